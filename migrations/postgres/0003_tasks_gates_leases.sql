CREATE TABLE tasks (
    id             UUID PRIMARY KEY,
    app_id         UUID NOT NULL REFERENCES principals (id),
    initiator_id   UUID NOT NULL REFERENCES principals (id),
    state          TEXT NOT NULL CHECK (state IN ('waiting', 'active', 'failed', 'closed')),
    failure_code   TEXT,
    failure_reason TEXT,
    -- The initial conversation asked for, created on acceptance.
    initial_conversation TEXT,
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL
);
CREATE INDEX tasks_by_app ON tasks (app_id, id);

CREATE TABLE task_participants (
    task_id  UUID NOT NULL REFERENCES tasks (id),
    agent_id UUID NOT NULL REFERENCES principals (id),
    role     TEXT NOT NULL CHECK (role IN ('initiator', 'invited')),
    PRIMARY KEY (task_id, agent_id)
);
CREATE INDEX task_participants_by_agent ON task_participants (agent_id, task_id);

-- Work that must follow a commit (calling an app, expiring a lease), written
-- in the transaction that makes it necessary and deleted in the transaction
-- that completes it.
CREATE TABLE jobs (
    id           UUID PRIMARY KEY,
    kind         TEXT NOT NULL,
    subject      UUID NOT NULL,
    run_at       BIGINT NOT NULL,
    locked_until BIGINT,
    attempts     BIGINT NOT NULL DEFAULT 0,
    created_at   BIGINT NOT NULL
);
CREATE INDEX jobs_due ON jobs (run_at);

CREATE TABLE leases (
    id              UUID PRIMARY KEY,
    message_id      UUID NOT NULL REFERENCES messages (id),
    conversation_id UUID NOT NULL REFERENCES conversations (id),
    recipient_id    UUID NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('pending', 'held', 'granted', 'denied', 'completed', 'expired')),
    reason          TEXT,
    expires_at      BIGINT,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);
-- One live lease per recipient and message.
CREATE UNIQUE INDEX leases_live ON leases (recipient_id, message_id)
    WHERE state IN ('pending', 'held', 'granted');
