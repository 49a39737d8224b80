-- The search index is a projection of the ledger: every row here can be
-- rebuilt from the ledger's events (delete index.db and reopen). Nothing in
-- it is authoritative; it is never signed and never exported.

CREATE TABLE items (
    rowid       INTEGER PRIMARY KEY,        -- also the FTS5 rowid
    item_id     TEXT NOT NULL UNIQUE,       -- ledger message id, or memory id
    kind        TEXT NOT NULL CHECK (kind IN ('message', 'memory')),
    persona_id  TEXT NOT NULL,              -- the conversation it belongs to
    external_id TEXT,                       -- id in an imported file
    source_ids  TEXT NOT NULL DEFAULT '[]', -- JSON array: messages a memory came from
    text        TEXT NOT NULL,
    ts_ms       INTEGER NOT NULL,           -- original time (unix ms)
    seq         INTEGER,                    -- ledger event seq, when from the ledger
    embedding   BLOB                        -- little-endian f32 x dim; NULL until embedded
);
CREATE INDEX items_persona ON items (persona_id, ts_ms);
CREATE INDEX items_external ON items (persona_id, external_id) WHERE external_id IS NOT NULL;
CREATE INDEX items_seq ON items (seq) WHERE seq IS NOT NULL;
CREATE INDEX items_pending ON items (rowid) WHERE embedding IS NULL;

CREATE VIRTUAL TABLE items_fts USING fts5 (
    text,
    content = 'items',
    content_rowid = 'rowid',
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER items_ai AFTER INSERT ON items BEGIN
    INSERT INTO items_fts (rowid, text) VALUES (new.rowid, new.text);
END;
CREATE TRIGGER items_ad AFTER DELETE ON items BEGIN
    INSERT INTO items_fts (items_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
END;
CREATE TRIGGER items_au AFTER UPDATE OF text ON items BEGIN
    INSERT INTO items_fts (items_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
    INSERT INTO items_fts (rowid, text) VALUES (new.rowid, new.text);
END;

-- key/value: 'ledger_seq' = last ledger event applied; 'embed_model' = model id of stored vectors.
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
