-- The review's fixes of ADR 0032. A check of an app's URL takes the next
-- generation when it starts, and an upgrade that changes the URL takes one
-- too: a check records its outcome only while its generation is the
-- newest, so a stale check never overwrites a newer one.
ALTER TABLE apps ADD COLUMN url_check_gen INTEGER NOT NULL DEFAULT 0;
-- A delivery job marks itself sent, in its own write, before its request:
-- `sends` counts the requests, `sent_by` names the process that sent the
-- last one. A rerun in that same process (the store failed after the
-- request) sends nothing more; one in another (a crash) repeats the same
-- `webhook-id` once.
ALTER TABLE jobs ADD COLUMN sends INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN sent_by TEXT;
