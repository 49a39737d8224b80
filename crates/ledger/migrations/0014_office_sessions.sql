-- The office (#5), session 4: the session type and mode each persona works
-- in (latest `session_mode_set` wins). Rebuilt from events by replay.
CREATE TABLE session_modes (
    persona_id   TEXT PRIMARY KEY,
    session_type TEXT NOT NULL,
    mode         TEXT NOT NULL,
    seq          INTEGER NOT NULL
);
