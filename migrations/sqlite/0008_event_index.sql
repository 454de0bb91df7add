-- Events as a thin per-audience index over payloads stored once (ADR 0018).
-- A delivery is three integers in `event_index`; the event itself (id,
-- type, time, and either the message it carries or a personal body) is one
-- `event_payloads` row however many receive it. Every stored event keeps
-- its audience, seq, id, type, time and payload, and every stream its
-- last, acknowledged and oldest seq, so cursors resume across this
-- migration with no gap and no duplicate.

CREATE TABLE event_streams_new (
    stream    INTEGER PRIMARY KEY,          -- surrogate; streams are never deleted
    audience  TEXT NOT NULL UNIQUE,         -- the principal
    last_seq  INTEGER NOT NULL DEFAULT 0,
    acked_seq INTEGER NOT NULL DEFAULT 0
);
INSERT INTO event_streams_new (audience, last_seq, acked_seq)
    SELECT audience, last_seq, acked_seq FROM event_streams ORDER BY audience;

CREATE TABLE event_payloads (
    id          INTEGER PRIMARY KEY,        -- rowid alias: stable under VACUUM
    event_id    TEXT NOT NULL UNIQUE,       -- the envelope's id, shared by a fan-out's copies
    type        TEXT NOT NULL,
    occurred_at INTEGER NOT NULL,
    message_id  TEXT REFERENCES messages (id),
    body        TEXT,                       -- a personal event's payload
    refs        INTEGER NOT NULL,           -- index rows still pointing here
    CHECK ((message_id IS NULL) <> (body IS NULL))
);

CREATE TABLE event_index (
    stream  INTEGER NOT NULL,
    seq     INTEGER NOT NULL,
    payload INTEGER NOT NULL,
    PRIMARY KEY (stream, seq)
) WITHOUT ROWID;

-- Old events keep their payload copies (one payload row each); they age
-- out under retention.
-- Every old event has its audience's stream (the old append made it
-- first); one without would be unreachable, so it is not carried over.
INSERT INTO event_payloads (event_id, type, occurred_at, body, refs)
    SELECT e.id, e.type, e.occurred_at, e.payload, 1 FROM events e
    WHERE EXISTS (SELECT 1 FROM event_streams_new s WHERE s.audience = e.audience)
    ORDER BY e.audience, e.seq;
INSERT INTO event_index (stream, seq, payload)
    SELECT s.stream, e.seq, p.id FROM events e
    JOIN event_streams_new s ON s.audience = e.audience
    JOIN event_payloads p ON p.event_id = e.id;
CREATE INDEX event_payloads_by_time ON event_payloads (occurred_at);

DROP TABLE events;
DROP TABLE event_streams;
ALTER TABLE event_streams_new RENAME TO event_streams;

-- A forward to every participant but the sender writes no recipient rows
-- (`listed` = 0): its recipients are the participants who joined before its
-- seq. Only a verdict that forwards to a subset lists them. Existing
-- messages keep their rows.
ALTER TABLE messages ADD COLUMN listed INTEGER NOT NULL DEFAULT 1;
ALTER TABLE messages ADD COLUMN recipient_count INTEGER NOT NULL DEFAULT 0;
UPDATE messages SET recipient_count =
    (SELECT COUNT(*) FROM message_recipients r WHERE r.message_id = messages.id);
-- The conversation's last message seq when the participant joined.
ALTER TABLE conversation_participants ADD COLUMN joined_seq INTEGER NOT NULL DEFAULT 0;
