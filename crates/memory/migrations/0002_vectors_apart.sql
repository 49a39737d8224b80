-- Embeddings move out of `items` into their own table. A 1.5 KB vector in
-- every row left about two rows per 4 KB page, so the keyword query, which
-- looks up every match's row (visibility, time), read a different page for
-- nearly every match: at 100 000 messages that lookup was the largest cost
-- of a recall after the query embedding. `items` rows are now small and
-- dense; `vectors` is read once, when the index opens.
CREATE TABLE vectors (
    rowid     INTEGER PRIMARY KEY,          -- items.rowid
    embedding BLOB NOT NULL                 -- little-endian f32 x dim
);
INSERT INTO vectors (rowid, embedding) SELECT rowid, embedding FROM items WHERE embedding IS NOT NULL;

-- Rebuilt rather than ALTER ... DROP COLUMN, which leaves the pages sparse.
CREATE TABLE items_compact (
    rowid       INTEGER PRIMARY KEY,        -- also the FTS5 rowid
    item_id     TEXT NOT NULL UNIQUE,       -- ledger message id, or memory id
    kind        TEXT NOT NULL CHECK (kind IN ('message', 'memory')),
    persona_id  TEXT NOT NULL,              -- the visibility key (see memory::Scope)
    external_id TEXT,                       -- id in an imported file
    source_ids  TEXT NOT NULL DEFAULT '[]', -- JSON array: messages a memory came from
    text        TEXT NOT NULL,
    ts_ms       INTEGER NOT NULL,           -- original time (unix ms)
    seq         INTEGER,                    -- ledger event seq, when from the ledger
    embedded    INTEGER NOT NULL DEFAULT 0  -- 1 once its vector is in `vectors`
);
INSERT INTO items_compact (rowid, item_id, kind, persona_id, external_id, source_ids, text, ts_ms, seq, embedded)
    SELECT rowid, item_id, kind, persona_id, external_id, source_ids, text, ts_ms, seq, embedding IS NOT NULL
    FROM items ORDER BY rowid;
DROP TABLE items;
ALTER TABLE items_compact RENAME TO items;

CREATE INDEX items_persona ON items (persona_id, ts_ms);
CREATE INDEX items_external ON items (persona_id, external_id) WHERE external_id IS NOT NULL;
CREATE INDEX items_seq ON items (seq) WHERE seq IS NOT NULL;
CREATE INDEX items_pending ON items (rowid) WHERE embedded = 0;

CREATE TRIGGER items_ai AFTER INSERT ON items BEGIN
    INSERT INTO items_fts (rowid, text) VALUES (new.rowid, new.text);
END;
CREATE TRIGGER items_ad AFTER DELETE ON items BEGIN
    INSERT INTO items_fts (items_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
    DELETE FROM vectors WHERE rowid = old.rowid;
END;
-- New text, new vector (the row is embedded again in the background).
CREATE TRIGGER items_au AFTER UPDATE OF text ON items BEGIN
    INSERT INTO items_fts (items_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
    INSERT INTO items_fts (rowid, text) VALUES (new.rowid, new.text);
    DELETE FROM vectors WHERE rowid = old.rowid;
END;
