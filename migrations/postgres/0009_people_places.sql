-- People, places with levels, and audited denials (ADR 0020 §5). PostgreSQL
-- widens the kind CHECKs in place.

CREATE TABLE spaces (
    id         UUID PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL
);

-- Principals: `person` joins the kinds; an agent may have an owner, who is
-- a person (checked by the store: a CHECK cannot read another row).
ALTER TABLE principals DROP CONSTRAINT principals_kind_check,
    ADD CONSTRAINT principals_kind_check CHECK (kind IN ('agent', 'app', 'person')),
    ADD COLUMN owner_id UUID REFERENCES principals (id),
    ADD COLUMN disabled_at BIGINT,
    ADD CONSTRAINT principals_owner_agent CHECK (owner_id IS NULL OR kind = 'agent');

-- Conversations: `channel` joins the kinds; a channel, and only a channel,
-- belongs to a space, and has a state.
ALTER TABLE conversations DROP CONSTRAINT conversations_kind_check,
    ADD CONSTRAINT conversations_kind_check CHECK (kind IN ('direct', 'group', 'task', 'channel')),
    ADD COLUMN space_id UUID REFERENCES spaces (id),
    ADD COLUMN state TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'read_only', 'archived')),
    ADD CONSTRAINT conversations_channel_space CHECK ((kind = 'channel') = (space_id IS NOT NULL));
CREATE UNIQUE INDEX channels_by_name ON conversations (space_id, name) WHERE kind = 'channel';

CREATE TABLE groups (
    id         UUID PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL
);

CREATE TABLE group_members (
    group_id     UUID NOT NULL REFERENCES groups (id),
    principal_id UUID NOT NULL REFERENCES principals (id),
    added_at     BIGINT NOT NULL,
    PRIMARY KEY (group_id, principal_id)
);
CREATE INDEX group_members_by_principal ON group_members (principal_id, group_id);

-- One level per subject (a principal or a group) on a place (a space or a
-- channel); granting again replaces it. `granted_by` NULL: the operator.
CREATE TABLE grants (
    id           UUID PRIMARY KEY,
    subject_kind TEXT NOT NULL CHECK (subject_kind IN ('principal', 'group')),
    subject_id   UUID NOT NULL,
    place_kind   TEXT NOT NULL CHECK (place_kind IN ('space', 'channel')),
    place_id     UUID NOT NULL,
    level        TEXT NOT NULL CHECK (level IN ('read', 'write', 'trigger', 'admin')),
    granted_by   UUID,
    created_at   BIGINT NOT NULL,
    UNIQUE (place_kind, place_id, subject_kind, subject_id)
);
CREATE INDEX grants_by_subject ON grants (subject_kind, subject_id);

-- Aggregated request-mode denials: closed enums and ids only, no text a
-- caller wrote.
CREATE TABLE audit_denials (
    id            UUID PRIMARY KEY,
    actor_id      UUID NOT NULL,
    actor_kind    TEXT NOT NULL,
    action        TEXT NOT NULL,
    reason        TEXT NOT NULL,
    resource_kind TEXT NOT NULL,
    resource_id   UUID NOT NULL,
    first_at      BIGINT NOT NULL,
    last_at       BIGINT NOT NULL,
    count         BIGINT NOT NULL
);
CREATE INDEX audit_denials_by_time ON audit_denials (last_at);

-- A channel message's thread root; absent is the main thread.
ALTER TABLE messages ADD COLUMN thread_id UUID REFERENCES messages (id);
CREATE INDEX messages_by_thread ON messages (conversation_id, thread_id, seq)
    WHERE thread_id IS NOT NULL;

-- An owner lists its agents (`owned_agents`).
CREATE INDEX principals_by_owner ON principals (owner_id) WHERE owner_id IS NOT NULL;
