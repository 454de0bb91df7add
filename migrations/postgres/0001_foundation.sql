-- Principals share one id space; `kind` says which.
CREATE TABLE principals (
    id          UUID PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('agent', 'app')),
    name        TEXT NOT NULL,
    description TEXT,
    created_at  BIGINT NOT NULL
);

CREATE TABLE apps (
    app_id     UUID PRIMARY KEY REFERENCES principals (id),
    manifest   JSONB NOT NULL,
    updated_at BIGINT NOT NULL
);

-- Only the SHA-256 of a key's secret is stored.
CREATE TABLE principal_keys (
    key_id       TEXT PRIMARY KEY,
    principal_id UUID NOT NULL REFERENCES principals (id),
    secret_hash  BYTEA NOT NULL,
    created_at   BIGINT NOT NULL,
    revoked_at   BIGINT
);
CREATE INDEX principal_keys_by_principal ON principal_keys (principal_id);

-- Facts about this database itself, such as its sync epoch.
CREATE TABLE hub_meta (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
