-- The console's sessions (ADR 0036): in the database, so that a login made
-- through one node behind a load balancer is known to every node, and a
-- logout on one ends it on all. Only digests are kept: the HMAC-SHA-256 of
-- the session id and of its CSRF token, keyed by the admin token (a token
-- change ends every session). Times are milliseconds since the epoch.
CREATE TABLE console_sessions (
    id_digest BYTEA PRIMARY KEY,
    csrf_digest BYTEA NOT NULL,
    created_at BIGINT NOT NULL,
    last_used_at BIGINT NOT NULL
);
-- A login past console.max_sessions ends the oldest.
CREATE INDEX console_sessions_by_created ON console_sessions (created_at);
