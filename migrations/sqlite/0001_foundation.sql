-- Principals share one id space; `kind` says which.
CREATE TABLE principals (
    id          TEXT PRIMARY KEY NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('agent', 'app')),
    name        TEXT NOT NULL,
    description TEXT,
    created_at  INTEGER NOT NULL
);

CREATE TABLE apps (
    app_id     TEXT PRIMARY KEY NOT NULL REFERENCES principals (id),
    manifest   TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);

-- Only the SHA-256 of a key's secret is stored.
CREATE TABLE principal_keys (
    key_id       TEXT PRIMARY KEY NOT NULL,
    principal_id TEXT NOT NULL REFERENCES principals (id),
    secret_hash  BLOB NOT NULL,
    created_at   INTEGER NOT NULL,
    revoked_at   INTEGER
);
CREATE INDEX principal_keys_by_principal ON principal_keys (principal_id);

-- Facts about this database itself, such as its sync epoch.
CREATE TABLE hub_meta (
    name  TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);
