-- The orphan sweep (ADR 0031 §3): which process runs a live run, and when it
-- last said so. A run whose owner stopped beating is ended `owner_lost` by
-- another hub process; a live owner (a second hub, `switchboard app run`)
-- keeps its runs. Rows before this migration have neither: they are swept.
ALTER TABLE app_runs ADD COLUMN owner TEXT;
ALTER TABLE app_runs ADD COLUMN heartbeat_at BIGINT;
CREATE INDEX app_runs_live ON app_runs (state, heartbeat_at);
