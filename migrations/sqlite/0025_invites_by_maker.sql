-- Issue 18's review: `invite_create` counts its maker's live links
-- against `hosted.invite_max_live`, by maker and expiry.
CREATE INDEX app_invites_by_maker ON app_invites (created_by, expires_at);
