-- The office (#5): projections of obligations, bookmarks, handovers,
-- governance notes, constitutions, dreaming outputs, token usage, persona
-- language and reply frames. All rebuilt from events by replay.
CREATE TABLE reminders (
    id          TEXT PRIMARY KEY,
    persona_id  TEXT NOT NULL,
    text        TEXT NOT NULL,
    due_at      TEXT,
    obligation  TEXT NOT NULL,
    created_seq INTEGER NOT NULL,
    created_ts  TEXT NOT NULL,
    done_seq    INTEGER,
    done_ts     TEXT
);
CREATE INDEX reminders_persona ON reminders (persona_id, done_seq, due_at);

CREATE TABLE bookmarks (
    id          TEXT PRIMARY KEY,
    persona_id  TEXT NOT NULL,
    target_id   TEXT NOT NULL,
    label       TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    ts          TEXT NOT NULL
);
CREATE INDEX bookmarks_persona ON bookmarks (persona_id, seq);

CREATE TABLE handovers (
    seq         INTEGER PRIMARY KEY,
    persona_id  TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    text        TEXT NOT NULL,
    author      TEXT NOT NULL,
    reason      TEXT NOT NULL,
    ts          TEXT NOT NULL
);
CREATE INDEX handovers_persona ON handovers (persona_id, seq);

CREATE TABLE governance_notes (
    seq          INTEGER PRIMARY KEY,
    persona_id   TEXT NOT NULL,
    handover_seq INTEGER NOT NULL,
    note         TEXT NOT NULL,
    findings     TEXT NOT NULL,
    ts           TEXT NOT NULL
);
CREATE INDEX governance_notes_persona ON governance_notes (persona_id, seq);

CREATE TABLE constitutions (
    persona_id     TEXT NOT NULL,
    version        INTEGER NOT NULL,
    core_directive TEXT NOT NULL,
    overrides      TEXT NOT NULL,
    seq            INTEGER NOT NULL,
    ts             TEXT NOT NULL,
    PRIMARY KEY (persona_id, version)
);

CREATE TABLE periods (
    seq          INTEGER PRIMARY KEY,
    persona_id   TEXT NOT NULL,
    period_start TEXT NOT NULL,
    period_end   TEXT NOT NULL,
    summary      TEXT NOT NULL
);
CREATE INDEX periods_persona ON periods (persona_id, period_end);

CREATE TABLE baselines (
    seq         INTEGER PRIMARY KEY,
    persona_id  TEXT NOT NULL,
    text        TEXT NOT NULL,
    ts          TEXT NOT NULL
);
CREATE INDEX baselines_persona ON baselines (persona_id, seq);

CREATE TABLE token_usage (
    seq               INTEGER PRIMARY KEY,
    entity_id         TEXT NOT NULL,
    day               TEXT NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL
);
CREATE INDEX token_usage_day ON token_usage (entity_id, day);

CREATE TABLE token_quotas (
    entity_id   TEXT PRIMARY KEY,
    daily_limit INTEGER NOT NULL,
    seq         INTEGER NOT NULL
);

CREATE TABLE persona_languages (
    persona_id  TEXT PRIMARY KEY,
    language    TEXT NOT NULL
);

CREATE TABLE reply_frames (
    message_id  TEXT PRIMARY KEY,
    persona_id  TEXT NOT NULL,
    frame_hash  TEXT NOT NULL,
    frame       TEXT NOT NULL,
    seq         INTEGER NOT NULL
);
