-- Cluster mode (ADR 0034, 2026-12-02): which process holds a node id. A
-- node takes its id only when no other live instance (an unexpired lease)
-- holds it, so two processes configured with one `cluster.node_id` never
-- both serve. Rows written before this column hold no instance.
ALTER TABLE cluster_nodes ADD COLUMN instance_id TEXT NOT NULL DEFAULT '';
