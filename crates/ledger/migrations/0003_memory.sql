-- Memory (#4): persona groups, what personas learned about the human, and
-- which memories each reply was given. All projections, rebuilt by replay.

-- A persona sees data filed under `group_primary ∪ groups_visible` (JSON
-- array); what it learns is filed under `group_primary`. Ei sees everything.
ALTER TABLE personas ADD COLUMN group_primary TEXT NOT NULL DEFAULT 'General';
ALTER TABLE personas ADD COLUMN groups_visible TEXT NOT NULL DEFAULT '[]';

-- Facts, traits, topics, people and quotes about the human.
CREATE TABLE memories (
    id               TEXT PRIMARY KEY,
    kind             TEXT NOT NULL,               -- fact | trait | topic | person | quote
    subject          TEXT NOT NULL DEFAULT '',    -- what a fact is about / a person's name
    text             TEXT NOT NULL,
    group_name       TEXT NOT NULL,               -- the visibility boundary
    learned_by       TEXT NOT NULL,               -- persona id
    source_ids       TEXT NOT NULL DEFAULT '[]',  -- JSON array of message ids
    quote_message_id TEXT,
    quote_start      INTEGER,                     -- character offsets into that message
    quote_end        INTEGER,
    confidence       REAL NOT NULL,
    validation       TEXT NOT NULL DEFAULT 'none', -- none | ei | human (human = locked)
    superseded_by    TEXT,
    exposure         REAL NOT NULL DEFAULT 1.0,
    learned_ts       TEXT NOT NULL,
    created_seq      INTEGER NOT NULL,
    updated_seq      INTEGER NOT NULL
);
CREATE INDEX memories_group ON memories (group_name, kind);

-- The items (message or memory ids) retrieval gave a reply.
CREATE TABLE reply_sources (
    message_id TEXT PRIMARY KEY,
    persona_id TEXT NOT NULL,
    item_ids   TEXT NOT NULL,
    seq        INTEGER NOT NULL
);
