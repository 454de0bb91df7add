-- App commands and their invocations (ADR 0027 §2), and the details of
-- owner actions in the audit.

-- A command an app declared in its manifest or registered through the API.
-- `conversation_id` NULL: hub-wide (offered wherever the app holds write).
-- A removed command keeps its row (`removed_at`) so invocations keep their
-- reference; one live name per owner and place.
CREATE TABLE commands (
    id              UUID PRIMARY KEY,
    owner_id        UUID NOT NULL REFERENCES principals (id),
    name            TEXT NOT NULL,
    name_key        TEXT NOT NULL,
    description     TEXT NOT NULL,
    required_level  TEXT NOT NULL CHECK (required_level IN ('read', 'write', 'trigger', 'admin')),
    -- The option declarations as the manifest has them (JSON).
    options         JSONB NOT NULL,
    source          TEXT NOT NULL CHECK (source IN ('manifest', 'api')),
    conversation_id UUID REFERENCES conversations (id),
    version         BIGINT NOT NULL,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    removed_at      BIGINT
);
CREATE UNIQUE INDEX commands_live ON commands (owner_id, name_key, coalesce(conversation_id, '00000000-0000-0000-0000-000000000000'::uuid))
    WHERE removed_at IS NULL;

-- One row per invoke: ids only, never an option value (those are in the
-- app's event alone). The job's subject and the replay's answer.
CREATE TABLE command_invocations (
    id                   UUID PRIMARY KEY,
    command_id           UUID NOT NULL REFERENCES commands (id),
    app_id               UUID NOT NULL,
    actor_id             UUID NOT NULL,
    conversation_id      UUID NOT NULL,
    thread_id            UUID,
    event_id             UUID,
    client_invocation_id TEXT,
    created_at           BIGINT NOT NULL
);
CREATE UNIQUE INDEX command_invocations_client ON command_invocations (actor_id, client_invocation_id)
    WHERE client_invocation_id IS NOT NULL;

-- What an install, upgrade or uninstall did to commands (names) and
-- components (a count), a JSON object as text; absent for the other actions.
ALTER TABLE audit_actions ADD COLUMN details TEXT;
