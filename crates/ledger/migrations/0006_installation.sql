-- One row naming this copy of the database. Not an event and never
-- exported: an imported copy gets its own id, so two copies of one profile
-- on one machine keep separate signed tree heads in the keychain.
CREATE TABLE installation (
    id          TEXT PRIMARY KEY,
    created_at  TEXT NOT NULL
);
