-- App installations and the audit of owner actions (ADR 0023 §9).

-- An app's installation: its state and the scopes it asks for and holds.
-- Uninstalled rows stay for history; at most one other row per app.
CREATE TABLE installations (
    id               UUID PRIMARY KEY,
    app_id           UUID NOT NULL REFERENCES apps (app_id),
    state            TEXT NOT NULL CHECK (state IN ('active', 'suspended', 'uninstalled')),
    -- Comma-joined scope names in the catalogue's order ('' for none).
    requested_scopes TEXT NOT NULL,
    granted_scopes   TEXT NOT NULL,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);
CREATE UNIQUE INDEX installations_live ON installations (app_id) WHERE state <> 'uninstalled';
-- The revocation sweep of other processes reads the rows changed since.
CREATE INDEX installations_by_update ON installations (updated_at);

-- One row per owner action on an app: closed enums, ids, scope names and
-- times only; never a manifest, a key or a URL.
CREATE TABLE audit_actions (
    id            UUID PRIMARY KEY,
    actor_kind    TEXT NOT NULL CHECK (actor_kind IN ('operator', 'person', 'app')),
    actor_id      UUID,
    action        TEXT NOT NULL,
    app_id        UUID NOT NULL REFERENCES apps (app_id),
    scopes_before TEXT,
    scopes_after  TEXT,
    state_before  TEXT,
    state_after   TEXT,
    at            BIGINT NOT NULL
);
CREATE INDEX audit_actions_by_app ON audit_actions (app_id, id);
CREATE INDEX audit_actions_by_time ON audit_actions (at);

-- Every existing app keeps working: installed, active, with what a
-- scopeless (seed-000) manifest asks for. The first installation's id is
-- the app's own (no UUID function in SQLite's SQL; the same here).
INSERT INTO installations (id, app_id, state, requested_scopes, granted_scopes, created_at, updated_at)
SELECT a.app_id, a.app_id, 'active', 'events:subscribe', 'events:subscribe', a.updated_at, a.updated_at
  FROM apps a;
