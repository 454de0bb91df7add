-- Hosted apps' persona and profile, and invite links to rooms (ADR 0031 §6).

-- `set_persona` and `set_profile`: one row per app; a NULL persona falls
-- back to the card's `entry.persona` file, a NULL profile to the card's
-- name and tagline.
CREATE TABLE app_profiles (
    app_id     TEXT PRIMARY KEY NOT NULL REFERENCES principals (id),
    persona    TEXT,
    profile    TEXT,
    updated_at INTEGER NOT NULL
);

-- `invite_create`: a link `sbinv_<id>_<secret>` to a room; only the
-- secret's sha256 is kept. Redeeming spends one use in a conditional UPDATE
-- on `uses_left`, so two accepts racing for the last use cannot both win.
CREATE TABLE app_invites (
    id              TEXT PRIMARY KEY NOT NULL,
    secret_hash     BLOB NOT NULL,
    conversation_id TEXT NOT NULL REFERENCES conversations (id),
    created_by      TEXT NOT NULL REFERENCES principals (id),
    uses_left       INTEGER NOT NULL CHECK (uses_left >= 0),
    expires_at      INTEGER NOT NULL,
    created_at      INTEGER NOT NULL
);
CREATE INDEX app_invites_by_expiry ON app_invites (expires_at);
