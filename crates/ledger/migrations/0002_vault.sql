-- Save slots. A checkpoint is a pointer into the ledger (a seq), not a copy
-- of the data: restoring replays the events up to that seq, so erased
-- payloads stay erased and no snapshot can hold content that was forgotten.
-- Slots 0-9 are auto-saves (FIFO, 0 = oldest), 10-14 manual saves.
-- Operational state, not memory: never cleared by a projection rebuild.
CREATE TABLE checkpoints (
    slot         INTEGER PRIMARY KEY CHECK (slot BETWEEN 0 AND 14),
    seq          INTEGER NOT NULL,
    name         TEXT    NOT NULL,
    created_at   TEXT    NOT NULL,
    state_digest TEXT    NOT NULL
);
