-- Webhook subscriptions and their delivery log (ADR 0033). The outbox is
-- the app's own event log: `cursor` is the last seq of it the subscription
-- is done with, moved only when a delivery is recorded.

CREATE TABLE webhook_subscriptions (
    id              UUID PRIMARY KEY,
    app_id          UUID NOT NULL REFERENCES apps (app_id),
    -- 'api' (the app's REST call) or 'manifest' (delivery.eventsUrl).
    source          TEXT NOT NULL CHECK (source IN ('api', 'manifest')),
    url             TEXT NOT NULL,
    -- JSON array of event types.
    event_types     TEXT NOT NULL,
    -- The v1 HMAC secret sealed under webhooks.key_encryption_key
    -- (nonce || ciphertext, the id as associated data); NULL: v1a only.
    sealed_secret   BYTEA,
    state           TEXT NOT NULL CHECK (state IN ('active', 'disabled')),
    -- 'gone', 'failing' or 'operator' while disabled.
    disabled_reason TEXT,
    cursor          BIGINT NOT NULL,
    -- Attempts at the event after the cursor, and since when it fails.
    attempts        BIGINT NOT NULL DEFAULT 0,
    failing_since   BIGINT,
    next_attempt_at BIGINT NOT NULL,
    claimed_until   BIGINT,
    claim_token     UUID,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);
CREATE INDEX webhook_subscriptions_by_app ON webhook_subscriptions (app_id, created_at);
CREATE INDEX webhook_subscriptions_due ON webhook_subscriptions (next_attempt_at) WHERE state = 'active';
CREATE UNIQUE INDEX webhook_subscriptions_manifest ON webhook_subscriptions (app_id) WHERE source = 'manifest';

-- One row per attempt: outcome, status, duration and the next due time.
-- Never a body, a header, a URL or a signature.
CREATE TABLE webhook_attempts (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    subscription_id UUID NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
    app_id          UUID NOT NULL,
    event_id        UUID,
    seq             BIGINT NOT NULL,
    attempt         BIGINT NOT NULL,
    at              BIGINT NOT NULL,
    duration_ms     BIGINT NOT NULL,
    outcome         TEXT NOT NULL,
    status          BIGINT,
    next_attempt_at BIGINT
);
CREATE INDEX webhook_attempts_by_subscription ON webhook_attempts (subscription_id, id);
CREATE INDEX webhook_attempts_by_time ON webhook_attempts (at);
