-- Runtime (issue #6): saved items (notes, movies, shows, videos, links,
-- facts, bookmarks, reminders) written by tools, and runtime settings.
-- Projections: rebuilt from the events like every other one.
CREATE TABLE items (
    id          TEXT PRIMARY KEY,
    kind        TEXT NOT NULL,
    title       TEXT NOT NULL,
    data        TEXT NOT NULL,
    persona_id  TEXT,
    ts          TEXT NOT NULL,
    seq         INTEGER NOT NULL
);
CREATE INDEX items_seq ON items (seq);

CREATE TABLE runtime_settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    seq   INTEGER NOT NULL
);
