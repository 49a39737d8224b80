-- office (#5): a persona's unread count is read for every context frame
-- (and the persona list). Counting through `messages_persona` fetched
-- every message row of the conversation to test `read` (5.9 ms for 2 000
-- messages at 100 000 events); this partial index holds only the unread
-- ones, so the count touches nothing else.
CREATE INDEX messages_unread ON messages (persona_id) WHERE read = 0;
