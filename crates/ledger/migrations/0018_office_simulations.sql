-- The office (#5), session 5: simulations recorded in the ledger (a
-- required one is satisfied by a recorded simulation of the same action,
-- arguments and state, also after a restart) and the kinds of action each
-- persona has carried out (the first time of a kind, a simulation is
-- recommended). Both rebuilt from events by replay.
CREATE TABLE simulations (
    seq         INTEGER PRIMARY KEY,
    persona_id  TEXT NOT NULL,
    action      TEXT NOT NULL,
    args_hash   TEXT NOT NULL,
    state_hash  TEXT,
    level       TEXT NOT NULL
);
CREATE INDEX simulations_action ON simulations (persona_id, action, args_hash);

CREATE TABLE office_actions (
    persona_id  TEXT NOT NULL,
    action      TEXT NOT NULL,
    executions  INTEGER NOT NULL,
    first_seq   INTEGER NOT NULL,
    last_seq    INTEGER NOT NULL,
    PRIMARY KEY (persona_id, action)
);
