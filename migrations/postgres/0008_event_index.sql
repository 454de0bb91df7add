-- Events as a thin per-audience index over payloads stored once (ADR 0018).
-- A delivery is three integers in `event_index`; the event itself (id,
-- type, time, and either the message it carries or a personal body) is one
-- `event_payloads` row however many receive it. Every stored event keeps
-- its audience, seq, id, type, time and payload, and every stream its
-- last, acknowledged and oldest seq, so cursors resume across this
-- migration with no gap and no duplicate.

-- `bigint`: the upsert that hands out seqs draws an identity value for every
-- row it proposes, conflicting or not.
CREATE TABLE event_streams_new (
    stream    BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    audience  UUID NOT NULL UNIQUE,
    last_seq  BIGINT NOT NULL DEFAULT 0,
    acked_seq BIGINT NOT NULL DEFAULT 0
);
INSERT INTO event_streams_new (audience, last_seq, acked_seq)
    SELECT audience, last_seq, acked_seq FROM event_streams ORDER BY audience;

CREATE TABLE event_payloads (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id    UUID NOT NULL UNIQUE,
    type        TEXT NOT NULL,
    occurred_at BIGINT NOT NULL,
    message_id  UUID REFERENCES messages (id),
    body        JSONB,
    refs        BIGINT NOT NULL,
    CHECK ((message_id IS NULL) <> (body IS NULL))
);

CREATE TABLE event_index (
    stream  BIGINT NOT NULL,
    seq     BIGINT NOT NULL,
    payload BIGINT NOT NULL,
    PRIMARY KEY (stream, seq)
);

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
ALTER INDEX event_streams_new_pkey RENAME TO event_streams_pkey;
ALTER INDEX event_streams_new_audience_key RENAME TO event_streams_audience_key;
ALTER SEQUENCE event_streams_new_stream_seq RENAME TO event_streams_stream_seq;

-- A forward to every participant but the sender writes no recipient rows
-- (`listed` false): its recipients are the participants who joined before
-- its seq. Only a verdict that forwards to a subset lists them. Existing
-- messages keep their rows.
ALTER TABLE messages ADD COLUMN listed BOOLEAN NOT NULL DEFAULT TRUE;
ALTER TABLE messages ADD COLUMN recipient_count BIGINT NOT NULL DEFAULT 0;
UPDATE messages m SET recipient_count =
    (SELECT COUNT(*) FROM message_recipients r WHERE r.message_id = m.id);
-- The conversation's last message seq when the participant joined.
ALTER TABLE conversation_participants ADD COLUMN joined_seq BIGINT NOT NULL DEFAULT 0;
