-- Ed25519 keys that sign outgoing webhooks. The secret is sealed
-- (ChaCha20-Poly1305 with webhooks.key_encryption_key); only the public key
-- is ever published.
CREATE TABLE webhook_signing_keys (
    key_id        TEXT PRIMARY KEY NOT NULL,
    public_key    TEXT NOT NULL,
    sealed_secret BLOB NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('active', 'secondary', 'retired')),
    created_at    INTEGER NOT NULL,
    retires_at    INTEGER
);
-- At most one active key, whatever rotations race.
CREATE UNIQUE INDEX webhook_signing_keys_one_active ON webhook_signing_keys (state) WHERE state = 'active';
