-- Cards: messages with components, and the interactions on them (ADR 0027 §5, §6).

-- A card is a message with `card_version` set. `card` is the card as
-- readers see it (JSON, rewritten with every version) so that every read
-- of a message carries it without a second query; `message_components`
-- is where the states are decided. `reply_to_interaction`: a reply an app
-- wrote for an interaction, which no agent may take a lease on.
ALTER TABLE messages ADD COLUMN card TEXT;
ALTER TABLE messages ADD COLUMN card_version INTEGER;
ALTER TABLE messages ADD COLUMN card_use TEXT CHECK (card_use IN ('once', 'once_per_principal'));
ALTER TABLE messages ADD COLUMN reply_to_interaction TEXT;

CREATE TABLE message_components (
    id                  TEXT PRIMARY KEY NOT NULL,
    message_id          TEXT NOT NULL REFERENCES messages (id),
    position            INTEGER NOT NULL,
    custom_id           TEXT NOT NULL,
    kind                TEXT NOT NULL CHECK (kind IN ('button', 'select', 'form')),
    -- The definition as posted (label, style, options, fields).
    definition          TEXT NOT NULL,
    trigger_level       TEXT NOT NULL CHECK (trigger_level IN ('read', 'write', 'trigger', 'admin')),
    required_capability TEXT,
    restricted_to       TEXT CHECK (restricted_to IN ('owner', 'run_starter')),
    state               TEXT NOT NULL CHECK (state IN ('active', 'used', 'disabled')),
    expires_at          INTEGER NOT NULL,
    UNIQUE (message_id, custom_id)
);
-- The app's cards with a component still active, for suspend and uninstall.
CREATE INDEX message_components_active ON message_components (message_id) WHERE state = 'active';

CREATE TABLE interactions (
    id              TEXT PRIMARY KEY NOT NULL,
    message_id      TEXT NOT NULL REFERENCES messages (id),
    component_id    TEXT NOT NULL REFERENCES message_components (id),
    app_id          TEXT NOT NULL,
    actor_id        TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    thread_id       TEXT,
    "values"        TEXT,
    state           TEXT NOT NULL CHECK (state IN ('received', 'dispatched', 'acknowledged', 'failed', 'rejected')),
    reason          TEXT,
    event_id        TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
-- `once_per_principal`: one interaction per principal and card, checked in
-- the interaction's transaction with the card locked.
CREATE INDEX interactions_by_card_actor ON interactions (message_id, actor_id);
