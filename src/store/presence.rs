//! Cluster presence (ADR 0035): which node holds each app socket, and
//! which nodes are alive. The callback target of an app is its newest
//! presence row (the highest `seq`, the order the database saw the
//! connects in) whose node's lease is live, so the newest-socket rule of
//! ADR 0005 holds across nodes. Only `cluster.mode = "nats"` writes here.

use async_trait::async_trait;
use uuid::Uuid;

use super::sql::{Arg, Database};
use super::StoreResult;
use crate::domain::Millis;

/// Where an app's callbacks go: the node and its socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallbackPresence {
    pub node_id: String,
    pub connection_id: Uuid,
}

#[async_trait]
pub trait PresenceStore: Send + Sync + 'static {
    /// Writes or extends a node's lease to `expires_at`.
    async fn renew_node(&self, node_id: &str, expires_at: Millis) -> StoreResult<()>;

    /// Records an app socket on a node (its connect, before it is answered).
    async fn add_presence(
        &self,
        connection_id: Uuid,
        app_id: Uuid,
        node_id: &str,
        now: Millis,
    ) -> StoreResult<()>;

    /// Forgets an app socket (it closed).
    async fn remove_presence(&self, connection_id: Uuid) -> StoreResult<()>;

    /// The app's newest socket on a node whose lease is live at `now`.
    async fn callback_presence(
        &self,
        app_id: Uuid,
        now: Millis,
    ) -> StoreResult<Option<CallbackPresence>>;

    /// Forgets a node: its lease and every socket recorded under it (a
    /// node starting under an id its previous process used, a node that
    /// stopped). Returns the sockets forgotten.
    async fn forget_node(&self, node_id: &str) -> StoreResult<u64>;

    /// Forgets the nodes whose lease ended before `before`, with their
    /// sockets. Returns the nodes forgotten.
    async fn prune_nodes(&self, before: Millis) -> StoreResult<u64>;
}

#[async_trait]
impl<D: Database> PresenceStore for D {
    async fn renew_node(&self, node_id: &str, expires_at: Millis) -> StoreResult<()> {
        self.write()
            .await?
            .execute(
                "INSERT INTO cluster_nodes (node_id, expires_at) VALUES ($1, $2) \
                 ON CONFLICT (node_id) DO UPDATE SET expires_at = excluded.expires_at",
                &[Arg::Text(node_id), Arg::Int(expires_at)],
            )
            .await?;
        Ok(())
    }

    async fn add_presence(
        &self,
        connection_id: Uuid,
        app_id: Uuid,
        node_id: &str,
        now: Millis,
    ) -> StoreResult<()> {
        self.write()
            .await?
            .execute(
                "INSERT INTO app_presence (connection_id, app_id, node_id, connected_at) \
                 VALUES ($1, $2, $3, $4)",
                &[
                    Arg::Id(connection_id),
                    Arg::Id(app_id),
                    Arg::Text(node_id),
                    Arg::Int(now),
                ],
            )
            .await?;
        Ok(())
    }

    async fn remove_presence(&self, connection_id: Uuid) -> StoreResult<()> {
        self.write()
            .await?
            .execute(
                "DELETE FROM app_presence WHERE connection_id = $1",
                &[Arg::Id(connection_id)],
            )
            .await?;
        Ok(())
    }

    async fn callback_presence(
        &self,
        app_id: Uuid,
        now: Millis,
    ) -> StoreResult<Option<CallbackPresence>> {
        let row = self
            .read()
            .await?
            .fetch_optional(
                "SELECT p.node_id, p.connection_id FROM app_presence p \
                 JOIN cluster_nodes n ON n.node_id = p.node_id \
                 WHERE p.app_id = $1 AND n.expires_at > $2 \
                 ORDER BY p.seq DESC LIMIT 1",
                &[Arg::Id(app_id), Arg::Int(now)],
            )
            .await?;
        row.map(|r| {
            Ok(CallbackPresence {
                node_id: r.text("node_id")?,
                connection_id: r.id("connection_id")?,
            })
        })
        .transpose()
    }

    async fn forget_node(&self, node_id: &str) -> StoreResult<u64> {
        let mut tx = self.begin().await?;
        let sockets = tx
            .execute(
                "DELETE FROM app_presence WHERE node_id = $1",
                &[Arg::Text(node_id)],
            )
            .await?;
        tx.execute(
            "DELETE FROM cluster_nodes WHERE node_id = $1",
            &[Arg::Text(node_id)],
        )
        .await?;
        tx.commit().await?;
        Ok(sockets)
    }

    async fn prune_nodes(&self, before: Millis) -> StoreResult<u64> {
        let mut tx = self.begin().await?;
        tx.execute(
            "DELETE FROM app_presence WHERE node_id IN \
             (SELECT node_id FROM cluster_nodes WHERE expires_at < $1)",
            &[Arg::Int(before)],
        )
        .await?;
        let nodes = tx
            .execute(
                "DELETE FROM cluster_nodes WHERE expires_at < $1",
                &[Arg::Int(before)],
            )
            .await?;
        tx.commit().await?;
        Ok(nodes)
    }
}
