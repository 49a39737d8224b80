-- The ledger: append-only, hash-chained, signed. Payload bodies live apart
-- from the hashed header so content can be erased without breaking the chain.
CREATE TABLE events (
    seq          INTEGER PRIMARY KEY,
    id           TEXT    NOT NULL UNIQUE,
    ts           TEXT    NOT NULL,
    entity_id    TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    signer       TEXT    NOT NULL,
    payload_hash BLOB    NOT NULL,
    prev_hash    BLOB    NOT NULL,
    hash         BLOB    NOT NULL,
    signature    BLOB    NOT NULL
);
CREATE INDEX events_entity ON events (entity_id, seq);
CREATE INDEX events_kind ON events (kind, seq);

CREATE TRIGGER events_reject_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'ledger events are append-only');
END;
CREATE TRIGGER events_reject_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'ledger events are append-only');
END;

-- Erasable payload bodies (exact bytes that were hashed).
CREATE TABLE payloads (
    seq  INTEGER PRIMARY KEY,
    body BLOB NOT NULL
);

-- Projections: rebuilt from scratch by replaying the events.
CREATE TABLE entities (
    id          TEXT PRIMARY KEY,
    kind        TEXT NOT NULL,
    public_key  BLOB NOT NULL,
    created_seq INTEGER NOT NULL
);

CREATE TABLE personas (
    id                TEXT PRIMARY KEY,
    name              TEXT NOT NULL,
    name_key          TEXT NOT NULL UNIQUE,
    short_description TEXT NOT NULL,
    long_description  TEXT NOT NULL,
    model             TEXT NOT NULL,
    is_system         INTEGER NOT NULL,
    archived          INTEGER NOT NULL DEFAULT 0,
    created_seq       INTEGER NOT NULL,
    updated_seq       INTEGER NOT NULL
);

CREATE TABLE messages (
    id          TEXT PRIMARY KEY,
    persona_id  TEXT NOT NULL,
    role        TEXT NOT NULL,
    content     TEXT NOT NULL,
    ts          TEXT NOT NULL,
    read        INTEGER NOT NULL,
    seq         INTEGER NOT NULL
);
CREATE INDEX messages_persona ON messages (persona_id, seq);

CREATE TABLE accounts (
    name          TEXT PRIMARY KEY,
    base_url      TEXT NOT NULL,
    default_model TEXT NOT NULL,
    enabled       INTEGER NOT NULL,
    created_seq   INTEGER NOT NULL
);

CREATE TABLE erased (
    seq          INTEGER PRIMARY KEY,
    erased_by    INTEGER NOT NULL
);

-- Operational state, not memory: the persisted LLM work queue.
CREATE TABLE queue (
    id          TEXT PRIMARY KEY,
    priority    INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    persona_id  TEXT,
    body        TEXT NOT NULL,
    state       TEXT NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    last_error  TEXT,
    enqueued_at TEXT NOT NULL,
    not_before  TEXT NOT NULL
);
CREATE INDEX queue_ready ON queue (state, priority, enqueued_at);
