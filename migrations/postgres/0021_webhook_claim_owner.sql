-- Webhook claims name the process that holds them (ADR 0033, review fixes):
-- several hub processes may share one database, so a process gives back
-- only its own claims and lets another's lapse at `claimed_until`.
ALTER TABLE webhook_subscriptions ADD COLUMN claim_owner TEXT;
