-- Memory (#4), persona management and chat state. Projections only,
-- rebuilt by replay like the rest.

-- Traits (JSON array of strings) and topics (JSON array of objects) of the
-- persona; `profile_source` says who filled them: none (nothing yet),
-- pending (the model is filling them), llm, human, or fallback (the model
-- failed and the persona kept only the human's words).
ALTER TABLE personas ADD COLUMN traits TEXT NOT NULL DEFAULT '[]';
ALTER TABLE personas ADD COLUMN topics TEXT NOT NULL DEFAULT '[]';
ALTER TABLE personas ADD COLUMN profile_source TEXT NOT NULL DEFAULT 'none';
-- RFC 3339 UTC; NULL = not paused.
ALTER TABLE personas ADD COLUMN paused_until TEXT;
ALTER TABLE personas ADD COLUMN heartbeat_minutes INTEGER NOT NULL DEFAULT 30;
ALTER TABLE personas ADD COLUMN context_window_hours INTEGER NOT NULL DEFAULT 8;

-- default | always | never: whether a message goes into the reply prompt.
ALTER TABLE messages ADD COLUMN context_status TEXT NOT NULL DEFAULT 'default';

-- The latest conversation summary per persona (every 10 messages).
CREATE TABLE summaries (
    persona_id TEXT PRIMARY KEY,
    text       TEXT NOT NULL,
    up_to_seq  INTEGER NOT NULL,  -- the last message it covers
    source     TEXT NOT NULL,     -- llm | fallback
    seq        INTEGER NOT NULL
);
