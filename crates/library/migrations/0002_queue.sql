-- Files an import still has to read, written before the first is read: an
-- import cut short (the app quit, the machine stopped) is finished at the
-- next start instead of being silently half done.
CREATE TABLE queue (
    path       TEXT PRIMARY KEY,
    -- The watched folder it came from, if any.
    root       TEXT,
    queued_at  INTEGER NOT NULL
);
