-- Cluster mode (ADR 0035): which node holds each app socket, so that a
-- gate on any node finds the app's newest socket. A node's lease row says
-- it is alive; a presence row counts only while its node's lease is live.
-- SQLite never runs cluster mode; the tables keep the store's areas alike
-- on both backends.
CREATE TABLE cluster_nodes (
    node_id    TEXT PRIMARY KEY NOT NULL,
    expires_at INTEGER NOT NULL
);

-- `seq` orders the connects as the one database saw them: the newest
-- socket is the highest seq, whatever the nodes' clocks say.
CREATE TABLE app_presence (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    connection_id TEXT NOT NULL UNIQUE,
    app_id        TEXT NOT NULL,
    node_id       TEXT NOT NULL,
    connected_at  INTEGER NOT NULL
);
CREATE INDEX app_presence_app ON app_presence (app_id, seq);
CREATE INDEX app_presence_node ON app_presence (node_id);
