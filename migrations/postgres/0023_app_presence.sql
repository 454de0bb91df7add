-- Cluster mode (ADR 0035): which node holds each app socket, so that a
-- gate on any node finds the app's newest socket. A node's lease row says
-- it is alive; a presence row counts only while its node's lease is live.
CREATE TABLE cluster_nodes (
    node_id    TEXT PRIMARY KEY,
    expires_at BIGINT NOT NULL
);

-- `seq` orders the connects as the one database saw them: the newest
-- socket is the highest seq, whatever the nodes' clocks say.
CREATE TABLE app_presence (
    seq           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    connection_id UUID NOT NULL UNIQUE,
    app_id        UUID NOT NULL,
    node_id       TEXT NOT NULL,
    connected_at  BIGINT NOT NULL
);
CREATE INDEX app_presence_app ON app_presence (app_id, seq);
CREATE INDEX app_presence_node ON app_presence (node_id);
