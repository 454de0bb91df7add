-- People, places with levels, and audited denials (ADR 0020 §5).
-- `principals` and `conversations` widen their kind CHECKs, which SQLite
-- cannot alter: both are rebuilt by SQLite's documented procedure (new
-- table, copy, drop, rename). That needs foreign keys off, so the hub runs
-- its migrator on one connection opened without enforcement and checks
-- `PRAGMA foreign_key_check` on it before serving (ADR 0020 §5).

CREATE TABLE spaces (
    id         TEXT PRIMARY KEY NOT NULL,
    name       TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);

-- Principals: `person` joins the kinds; an agent may have an owner, who is
-- a person (checked by the store: a CHECK cannot read another row).
CREATE TABLE principals_new (
    id          TEXT PRIMARY KEY NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('agent', 'app', 'person')),
    name        TEXT NOT NULL,
    description TEXT,
    created_at  INTEGER NOT NULL,
    owner_id    TEXT REFERENCES principals (id),
    disabled_at INTEGER,
    CONSTRAINT principals_owner_agent CHECK (owner_id IS NULL OR kind = 'agent')
);
INSERT INTO principals_new (id, kind, name, description, created_at)
    SELECT id, kind, name, description, created_at FROM principals;
DROP TABLE principals;
ALTER TABLE principals_new RENAME TO principals;

-- Conversations: `channel` joins the kinds; a channel, and only a channel,
-- belongs to a space, and has a state. Every column, default and UNIQUE of
-- migrations 0002 and 0007 is kept.
CREATE TABLE conversations_new (
    id               TEXT PRIMARY KEY NOT NULL,
    kind             TEXT NOT NULL CHECK (kind IN ('direct', 'group', 'task', 'channel')),
    name             TEXT,
    task_id          TEXT,
    direct_key       TEXT UNIQUE,
    created_by       TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    last_message_seq INTEGER NOT NULL DEFAULT 0,
    template_key     TEXT,
    space_id         TEXT REFERENCES spaces (id),
    state            TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'read_only', 'archived')),
    CONSTRAINT conversations_channel_space CHECK ((kind = 'channel') = (space_id IS NOT NULL))
);
INSERT INTO conversations_new
    (id, kind, name, task_id, direct_key, created_by, created_at, last_message_seq, template_key)
    SELECT id, kind, name, task_id, direct_key, created_by, created_at, last_message_seq, template_key
    FROM conversations;
DROP TABLE conversations;
ALTER TABLE conversations_new RENAME TO conversations;
CREATE UNIQUE INDEX channels_by_name ON conversations (space_id, name) WHERE kind = 'channel';

CREATE TABLE groups (
    id         TEXT PRIMARY KEY NOT NULL,
    name       TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);

CREATE TABLE group_members (
    group_id     TEXT NOT NULL REFERENCES groups (id),
    principal_id TEXT NOT NULL REFERENCES principals (id),
    added_at     INTEGER NOT NULL,
    PRIMARY KEY (group_id, principal_id)
);
CREATE INDEX group_members_by_principal ON group_members (principal_id, group_id);

-- One level per subject (a principal or a group) on a place (a space or a
-- channel); granting again replaces it. `granted_by` NULL: the operator.
CREATE TABLE grants (
    id           TEXT PRIMARY KEY NOT NULL,
    subject_kind TEXT NOT NULL CHECK (subject_kind IN ('principal', 'group')),
    subject_id   TEXT NOT NULL,
    place_kind   TEXT NOT NULL CHECK (place_kind IN ('space', 'channel')),
    place_id     TEXT NOT NULL,
    level        TEXT NOT NULL CHECK (level IN ('read', 'write', 'trigger', 'admin')),
    granted_by   TEXT,
    created_at   INTEGER NOT NULL,
    UNIQUE (place_kind, place_id, subject_kind, subject_id)
);
CREATE INDEX grants_by_subject ON grants (subject_kind, subject_id);

-- Aggregated request-mode denials: closed enums and ids only, no text a
-- caller wrote.
CREATE TABLE audit_denials (
    id            TEXT PRIMARY KEY NOT NULL,
    actor_id      TEXT NOT NULL,
    actor_kind    TEXT NOT NULL,
    action        TEXT NOT NULL,
    reason        TEXT NOT NULL,
    resource_kind TEXT NOT NULL,
    resource_id   TEXT NOT NULL,
    first_at      INTEGER NOT NULL,
    last_at       INTEGER NOT NULL,
    count         INTEGER NOT NULL
);
CREATE INDEX audit_denials_by_time ON audit_denials (last_at);

-- A channel message's thread root; absent is the main thread.
ALTER TABLE messages ADD COLUMN thread_id TEXT REFERENCES messages (id);
CREATE INDEX messages_by_thread ON messages (conversation_id, thread_id, seq)
    WHERE thread_id IS NOT NULL;

-- An owner lists its agents (`owned_agents`).
CREATE INDEX principals_by_owner ON principals (owner_id) WHERE owner_id IS NOT NULL;
