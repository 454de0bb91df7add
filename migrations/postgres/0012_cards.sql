-- Cards: messages with components, and the interactions on them (ADR 0027 §5, §6).

-- A card is a message with `card_version` set. `card` is the card as
-- readers see it (JSON, rewritten with every version) so that every read
-- of a message carries it without a second query; `message_components`
-- is where the states are decided. `reply_to_interaction`: a reply an app
-- wrote for an interaction, which no agent may take a lease on.
ALTER TABLE messages ADD COLUMN card JSONB;
ALTER TABLE messages ADD COLUMN card_version BIGINT;
ALTER TABLE messages ADD COLUMN card_use TEXT CHECK (card_use IN ('once', 'once_per_principal'));
ALTER TABLE messages ADD COLUMN reply_to_interaction UUID;

CREATE TABLE message_components (
    id                  UUID PRIMARY KEY,
    message_id          UUID NOT NULL REFERENCES messages (id),
    position            BIGINT NOT NULL,
    custom_id           TEXT NOT NULL,
    kind                TEXT NOT NULL CHECK (kind IN ('button', 'select', 'form')),
    -- The definition as posted (label, style, options, fields).
    definition          JSONB NOT NULL,
    trigger_level       TEXT NOT NULL CHECK (trigger_level IN ('read', 'write', 'trigger', 'admin')),
    required_capability TEXT,
    restricted_to       TEXT CHECK (restricted_to IN ('owner', 'run_starter')),
    state               TEXT NOT NULL CHECK (state IN ('active', 'used', 'disabled')),
    expires_at          BIGINT NOT NULL,
    UNIQUE (message_id, custom_id)
);
-- The app's cards with a component still active, for suspend and uninstall.
CREATE INDEX message_components_active ON message_components (message_id) WHERE state = 'active';

CREATE TABLE interactions (
    id              UUID PRIMARY KEY,
    message_id      UUID NOT NULL REFERENCES messages (id),
    component_id    UUID NOT NULL REFERENCES message_components (id),
    app_id          UUID NOT NULL,
    actor_id        UUID NOT NULL,
    conversation_id UUID NOT NULL,
    thread_id       UUID,
    "values"        JSONB,
    state           TEXT NOT NULL CHECK (state IN ('received', 'dispatched', 'acknowledged', 'failed', 'rejected')),
    reason          TEXT,
    event_id        UUID NOT NULL,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);
-- `once_per_principal`: one interaction per principal and card, checked in
-- the interaction's transaction with the card locked.
CREATE INDEX interactions_by_card_actor ON interactions (message_id, actor_id);
