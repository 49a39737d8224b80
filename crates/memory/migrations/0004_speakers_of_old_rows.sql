-- Messages indexed before 0003 have no speaker. Forgetting how far the index
-- has read the ledger makes the next catch-up read every event once more:
-- rows already there keep their vectors and only get who said them (see
-- `MemoryIndex::sync_from_ledger`).
DELETE FROM meta WHERE key = 'ledger_seq';
