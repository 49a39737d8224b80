-- Files of watched folders the person removed from the library: the
-- watcher and the start-up scan leave them out until the person adds them
-- again (otherwise a removed document would come back at the next start).
CREATE TABLE ignored (
    path        TEXT PRIMARY KEY,
    removed_at  INTEGER NOT NULL
);
