-- One log per audience principal. `last_seq` hands out gap-free sequence
-- numbers inside the writing transaction (the row lock orders commits per
-- audience); `acked_seq` is the reader's ack.
CREATE TABLE event_streams (
    audience  UUID PRIMARY KEY,
    last_seq  BIGINT NOT NULL DEFAULT 0,
    acked_seq BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE events (
    audience    UUID NOT NULL,
    seq         BIGINT NOT NULL,
    id          UUID NOT NULL UNIQUE,
    type        TEXT NOT NULL,
    occurred_at BIGINT NOT NULL,
    payload     JSONB NOT NULL,
    PRIMARY KEY (audience, seq)
);
CREATE INDEX events_by_time ON events (occurred_at);

CREATE TABLE conversations (
    id               UUID PRIMARY KEY,
    kind             TEXT NOT NULL CHECK (kind IN ('direct', 'group', 'task')),
    name             TEXT,
    task_id          UUID,
    direct_key       TEXT UNIQUE,
    created_by       UUID NOT NULL,
    created_at       BIGINT NOT NULL,
    last_message_seq BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE conversation_participants (
    conversation_id UUID NOT NULL REFERENCES conversations (id),
    principal_id    UUID NOT NULL,
    joined_at       BIGINT NOT NULL,
    PRIMARY KEY (conversation_id, principal_id)
);
CREATE INDEX conversation_participants_by_principal
    ON conversation_participants (principal_id, conversation_id);

-- `verdict` is 'pending' until a policy decided fan-out, then 'forwarded'
-- or 'blocked'. Recipients of a forwarded message are in message_recipients.
CREATE TABLE messages (
    id              UUID PRIMARY KEY,
    conversation_id UUID NOT NULL REFERENCES conversations (id),
    seq             BIGINT NOT NULL,
    sender_id       UUID NOT NULL,
    origin          TEXT NOT NULL,
    parts           JSONB NOT NULL,
    reply_to        UUID,
    client_msg_id   TEXT,
    request_hash    TEXT,
    verdict         TEXT NOT NULL CHECK (verdict IN ('pending', 'forwarded', 'blocked')),
    verdict_reason  TEXT,
    created_at      BIGINT NOT NULL,
    UNIQUE (conversation_id, seq)
);
CREATE UNIQUE INDEX messages_by_client_id ON messages (sender_id, client_msg_id)
    WHERE client_msg_id IS NOT NULL;

CREATE TABLE message_recipients (
    message_id   UUID NOT NULL REFERENCES messages (id),
    recipient_id UUID NOT NULL,
    PRIMARY KEY (message_id, recipient_id)
);

-- Results of creates made with an idempotency key, replayed on retry.
CREATE TABLE idempotency_keys (
    scope        TEXT NOT NULL,
    key          TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    status       INTEGER NOT NULL,
    response     TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (scope, key)
);
