-- The orphan sweep (ADR 0031 §3): which process runs a live run, and when it
-- last said so. A run whose owner stopped beating is ended `owner_lost` by
-- another hub process; a live owner (a second hub, `switchboard app run`)
-- keeps its runs. Rows before this migration have neither: they are swept.
ALTER TABLE app_runs ADD COLUMN owner TEXT;
ALTER TABLE app_runs ADD COLUMN heartbeat_at BIGINT;
CREATE INDEX app_runs_live ON app_runs (state, heartbeat_at);

-- Beatless apps (ADR 0031 §8): the card's `beatless` as its last run saw
-- it, so the message verdict that reaches the app knows to wake it; and at
-- most one live run of a beatless app, held by the store on both backends
-- (`alone` marks such a run; two wake jobs racing insert one run).
ALTER TABLE hosted_apps ADD COLUMN beatless INTEGER NOT NULL DEFAULT 0;
ALTER TABLE app_runs ADD COLUMN alone INTEGER NOT NULL DEFAULT 0;
CREATE UNIQUE INDEX app_runs_one_live_alone ON app_runs (app_id)
    WHERE alone = 1 AND state IN ('starting', 'running');

-- `reply_policy` (ADR 0031 §9) of the card as its last run saw it: who may
-- request the app's tasks.
ALTER TABLE hosted_apps ADD COLUMN reply_policy TEXT NOT NULL DEFAULT 'all'
    CHECK (reply_policy IN ('all', 'members'));
