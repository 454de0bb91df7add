-- The console's overview (ADR 0030) reads every refresh: the longest
-- waiting tasks, the oldest live leases, and counts per state. Without
-- these each read scans `tasks` and `leases` whole.
-- One index serves both task reads: the count per state walks it without
-- the table, and the waiting list is its `waiting` range, already in
-- order. (A separate partial index for the list lost to a state index in
-- SQLite's planner, which then sorted every waiting task.)
CREATE INDEX tasks_by_state ON tasks (state, updated_at, id);
-- Live leases only, oldest first; `state` makes it cover the count too.
CREATE INDEX leases_live_by_age ON leases (created_at, id, state)
    WHERE state IN ('pending', 'held');
