-- Who said each message: 1 the person, 0 the persona; NULL for a memory,
-- a system line, or a message indexed before this column (unknown, so
-- never counted by recall's rule for names, see `RecallSettings::speaker_weight`).
ALTER TABLE items ADD COLUMN by_human INTEGER;
