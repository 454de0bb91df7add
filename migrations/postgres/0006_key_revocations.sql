-- The gateway's revocation sweep asks for keys revoked since a moment, so a
-- key revoked by another process (the operator CLI, another hub node)
-- closes its sockets here too.
CREATE INDEX principal_keys_revoked ON principal_keys (revoked_at) WHERE revoked_at IS NOT NULL;
