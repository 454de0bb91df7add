-- An app's interactions URL is verified once it echoed the hub's signed
-- ping and refused a request with a bad signature (ADR 0032 §2). The URL
-- that passed is kept: the state is `verified` exactly while it equals
-- the manifest's URL, so an upgrade that changes the URL resets it.
ALTER TABLE apps ADD COLUMN url_verified TEXT;
ALTER TABLE apps ADD COLUMN url_checked_at INTEGER;
ALTER TABLE apps ADD COLUMN url_check_reason TEXT;
