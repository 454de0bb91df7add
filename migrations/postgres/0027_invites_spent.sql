-- Issue 18's review: pruning deletes spent links by `uses_left <= 0` in its
-- own statement; this partial index keeps that from scanning the table
-- (expired links go by `app_invites_by_expiry`).
CREATE INDEX app_invites_spent ON app_invites (uses_left) WHERE uses_left <= 0;
