-- One log per audience principal. `last_seq` hands out gap-free sequence
-- numbers inside the writing transaction; `acked_seq` is the reader's ack.
CREATE TABLE event_streams (
    audience  TEXT PRIMARY KEY NOT NULL,
    last_seq  INTEGER NOT NULL DEFAULT 0,
    acked_seq INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE events (
    audience    TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    id          TEXT NOT NULL UNIQUE,
    type        TEXT NOT NULL,
    occurred_at INTEGER NOT NULL,
    payload     TEXT NOT NULL,
    PRIMARY KEY (audience, seq)
);
CREATE INDEX events_by_time ON events (occurred_at);

CREATE TABLE conversations (
    id               TEXT PRIMARY KEY NOT NULL,
    kind             TEXT NOT NULL CHECK (kind IN ('direct', 'group', 'task')),
    name             TEXT,
    task_id          TEXT,
    direct_key       TEXT UNIQUE,
    created_by       TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    last_message_seq INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE conversation_participants (
    conversation_id TEXT NOT NULL REFERENCES conversations (id),
    principal_id    TEXT NOT NULL,
    joined_at       INTEGER NOT NULL,
    PRIMARY KEY (conversation_id, principal_id)
);
CREATE INDEX conversation_participants_by_principal
    ON conversation_participants (principal_id, conversation_id);

-- `verdict` is 'pending' until a policy decided fan-out, then 'forwarded'
-- or 'blocked'. Recipients of a forwarded message are in message_recipients.
CREATE TABLE messages (
    id              TEXT PRIMARY KEY NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations (id),
    seq             INTEGER NOT NULL,
    sender_id       TEXT NOT NULL,
    origin          TEXT NOT NULL,
    parts           TEXT NOT NULL,
    reply_to        TEXT,
    client_msg_id   TEXT,
    request_hash    TEXT,
    verdict         TEXT NOT NULL CHECK (verdict IN ('pending', 'forwarded', 'blocked')),
    verdict_reason  TEXT,
    created_at      INTEGER NOT NULL,
    UNIQUE (conversation_id, seq)
);
CREATE UNIQUE INDEX messages_by_client_id ON messages (sender_id, client_msg_id)
    WHERE client_msg_id IS NOT NULL;

CREATE TABLE message_recipients (
    message_id   TEXT NOT NULL REFERENCES messages (id),
    recipient_id TEXT NOT NULL,
    PRIMARY KEY (message_id, recipient_id)
);

-- Results of creates made with an idempotency key, replayed on retry.
CREATE TABLE idempotency_keys (
    scope        TEXT NOT NULL,
    key          TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    status       INTEGER NOT NULL,
    response     TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (scope, key)
);
