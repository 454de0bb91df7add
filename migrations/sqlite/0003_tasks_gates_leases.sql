CREATE TABLE tasks (
    id             TEXT PRIMARY KEY NOT NULL,
    app_id         TEXT NOT NULL REFERENCES principals (id),
    initiator_id   TEXT NOT NULL REFERENCES principals (id),
    state          TEXT NOT NULL CHECK (state IN ('waiting', 'active', 'failed', 'closed')),
    failure_code   TEXT,
    failure_reason TEXT,
    -- The initial conversation asked for, created on acceptance.
    initial_conversation TEXT,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);
CREATE INDEX tasks_by_app ON tasks (app_id, id);

CREATE TABLE task_participants (
    task_id  TEXT NOT NULL REFERENCES tasks (id),
    agent_id TEXT NOT NULL REFERENCES principals (id),
    role     TEXT NOT NULL CHECK (role IN ('initiator', 'invited')),
    PRIMARY KEY (task_id, agent_id)
);
CREATE INDEX task_participants_by_agent ON task_participants (agent_id, task_id);

-- Work that must follow a commit (calling an app, expiring a lease), written
-- in the transaction that makes it necessary and deleted in the transaction
-- that completes it.
CREATE TABLE jobs (
    id           TEXT PRIMARY KEY NOT NULL,
    kind         TEXT NOT NULL,
    subject      TEXT NOT NULL,
    run_at       INTEGER NOT NULL,
    locked_until INTEGER,
    attempts     INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL
);
CREATE INDEX jobs_due ON jobs (run_at);

CREATE TABLE leases (
    id              TEXT PRIMARY KEY NOT NULL,
    message_id      TEXT NOT NULL REFERENCES messages (id),
    conversation_id TEXT NOT NULL REFERENCES conversations (id),
    recipient_id    TEXT NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('pending', 'held', 'granted', 'denied', 'completed', 'expired')),
    reason          TEXT,
    expires_at      INTEGER,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
-- One live lease per recipient and message.
CREATE UNIQUE INDEX leases_live ON leases (recipient_id, message_id)
    WHERE state IN ('pending', 'held', 'granted');
