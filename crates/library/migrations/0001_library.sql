-- The document library: documents, their chunks (text + location + the
-- guard's verdict), a BM25 index over the chunks, and embedding vectors
-- keyed by the hash of what was embedded (shared by identical passages,
-- reused when an edited document keeps a chunk).

CREATE TABLE documents (
    id          INTEGER PRIMARY KEY,
    path        TEXT NOT NULL UNIQUE,
    format      TEXT NOT NULL,
    sha256      TEXT,
    size        INTEGER NOT NULL DEFAULT 0,
    mtime_ms    INTEGER NOT NULL DEFAULT 0,
    status      TEXT NOT NULL,
    pages       INTEGER,
    chunks      INTEGER NOT NULL DEFAULT 0,
    error       TEXT,
    indexed_at  INTEGER NOT NULL,
    -- Folder this file came from when it was added as watched.
    root        TEXT,
    -- Groups whose personas may use it, comma-separated (as memories are
    -- filed under groups); NULL: every persona.
    groups      TEXT
);

CREATE TABLE chunks (
    id           INTEGER PRIMARY KEY,
    document_id  INTEGER NOT NULL REFERENCES documents(id),
    ordinal      INTEGER NOT NULL,
    page         INTEGER,
    section      TEXT,
    text         TEXT NOT NULL,
    hash         TEXT NOT NULL,
    -- allow | sanitize | block: the prompt-injection guard's action.
    guard        TEXT NOT NULL,
    -- Guard categories, comma-separated; empty when allowed.
    guard_categories TEXT NOT NULL DEFAULT '',
    -- What may reach a prompt: the text, the sanitized text, or NULL.
    prompt_text  TEXT
);
CREATE INDEX chunks_by_document ON chunks(document_id);

CREATE VIRTUAL TABLE chunks_fts USING fts5(
    text, section, content='chunks', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, text, section) VALUES (new.id, new.text, coalesce(new.section, ''));
END;
CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, text, section) VALUES ('delete', old.id, old.text, coalesce(old.section, ''));
END;

-- A chunk longer than the model's window is embedded in parts; its
-- similarity is its best part's.
CREATE TABLE chunk_parts (
    chunk_id     INTEGER NOT NULL REFERENCES chunks(id),
    part         INTEGER NOT NULL,
    vector_hash  TEXT NOT NULL,
    PRIMARY KEY (chunk_id, part)
);
CREATE INDEX chunk_parts_by_vector ON chunk_parts(vector_hash);

CREATE TABLE vectors (
    hash    TEXT NOT NULL,
    model   TEXT NOT NULL,
    vector  BLOB NOT NULL,
    PRIMARY KEY (hash, model)
);

-- Folders added with --watch: the app watches them and reconciles them at start.
CREATE TABLE roots (
    path      TEXT PRIMARY KEY,
    added_at  INTEGER NOT NULL
);

-- Which passages a persona's reply cited. The snippet is a copy of the
-- document's text: removing the document deletes these rows too.
CREATE TABLE citations (
    message_id   TEXT NOT NULL,
    label        INTEGER NOT NULL,
    document_id  INTEGER NOT NULL,
    chunk_id     INTEGER NOT NULL,
    document     TEXT NOT NULL,
    page         INTEGER,
    section      TEXT,
    snippet      TEXT NOT NULL,
    PRIMARY KEY (message_id, label)
);
CREATE INDEX citations_by_document ON citations(document_id);
