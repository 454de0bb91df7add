//! Cluster presence (ADR 0035): which node holds each app socket, and
//! which nodes are alive. The callback target of an app is its newest
//! presence row (the highest `seq`, the order the database saw the
//! connects in) whose node's lease is live, so the newest-socket rule of
//! ADR 0005 holds across nodes. Only `cluster.mode = "nats"` writes here.
//!
//! Every lease is written and read against the database's clock, never a
//! node's: nodes whose wall clocks drift apart still agree on which lease
//! is live (ADR 0034, 2026-12-02).

use async_trait::async_trait;
use uuid::Uuid;

use super::sql::{Arg, Database};
use super::{Backend, BaseDialect, StoreResult};
use crate::domain::Millis;

/// Where an app's callbacks go: the node and its socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallbackPresence {
    pub node_id: String,
    pub connection_id: Uuid,
}

/// What a lease renewal found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// This instance's live lease, extended.
    Renewed,
    /// The lease had lapsed, or its row was pruned or deleted (the node
    /// was paused past its lease): this instance holds the id again, and
    /// must record its app sockets again.
    Reclaimed,
    /// Another live instance holds the node id now.
    Lost,
}

#[async_trait]
pub trait PresenceStore: Send + Sync + 'static {
    /// Takes `node_id` for `instance_id` for `lease_ms` from the
    /// database's now, unless another instance holds an unexpired lease on
    /// it. Returns whether this instance holds it.
    async fn claim_node(
        &self,
        node_id: &str,
        instance_id: &str,
        lease_ms: i64,
    ) -> StoreResult<bool>;

    /// Extends this instance's lease by `lease_ms` from the database's
    /// now; a lapsed or missing lease is claimed again when nobody else
    /// holds the id.
    async fn renew_node(
        &self,
        node_id: &str,
        instance_id: &str,
        lease_ms: i64,
    ) -> StoreResult<Renewal>;

    /// Records an app socket on a node (its connect, before it is
    /// answered). Recording one already recorded changes nothing.
    async fn add_presence(
        &self,
        connection_id: Uuid,
        app_id: Uuid,
        node_id: &str,
        now: Millis,
    ) -> StoreResult<()>;

    /// Forgets an app socket (it closed).
    async fn remove_presence(&self, connection_id: Uuid) -> StoreResult<()>;

    /// The app's newest socket on a node whose lease is live now, by the
    /// database's clock.
    async fn callback_presence(&self, app_id: Uuid) -> StoreResult<Option<CallbackPresence>>;

    /// Forgets every socket recorded under a node id: a previous process's
    /// (they died with it), by the instance that just claimed the id.
    /// Returns the sockets forgotten.
    async fn forget_sockets(&self, node_id: &str) -> StoreResult<u64>;

    /// Forgets a node, its lease and its sockets, if `instance_id` still
    /// holds it (a node that stopped). Returns the sockets forgotten.
    async fn forget_node(&self, node_id: &str, instance_id: &str) -> StoreResult<u64>;

    /// Forgets the nodes whose lease lapsed more than `grace_ms` ago by
    /// the database's clock, with their sockets, and sockets under no
    /// node at all. Returns the nodes forgotten.
    async fn prune_nodes(&self, grace_ms: i64) -> StoreResult<u64>;
}

/// The database's now, in epoch milliseconds, as SQL of the dialect.
fn db_now(backend: Backend) -> &'static str {
    match backend {
        Backend::Postgres => "(CAST(EXTRACT(EPOCH FROM now()) * 1000 AS BIGINT))",
        Backend::Sqlite => "(CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))",
    }
}

/// Takes a node id for an instance when it is free, lapsed or already
/// the instance's: one statement, so two instances racing for one id
/// cannot both win.
fn claim_sql(now: &str) -> String {
    format!(
        "INSERT INTO cluster_nodes (node_id, instance_id, expires_at) VALUES ($1, $2, {now} + $3) \
         ON CONFLICT (node_id) DO UPDATE SET instance_id = excluded.instance_id, \
         expires_at = excluded.expires_at \
         WHERE cluster_nodes.instance_id = excluded.instance_id OR cluster_nodes.expires_at <= {now}"
    )
}

#[async_trait]
impl<D: Database + BaseDialect> PresenceStore for D {
    async fn claim_node(
        &self,
        node_id: &str,
        instance_id: &str,
        lease_ms: i64,
    ) -> StoreResult<bool> {
        let claimed = self
            .write()
            .await?
            .execute(
                &claim_sql(db_now(D::BACKEND)),
                &[
                    Arg::Text(node_id),
                    Arg::Text(instance_id),
                    Arg::Int(lease_ms),
                ],
            )
            .await?;
        Ok(claimed == 1)
    }

    async fn renew_node(
        &self,
        node_id: &str,
        instance_id: &str,
        lease_ms: i64,
    ) -> StoreResult<Renewal> {
        let now = db_now(D::BACKEND);
        let extended = self
            .write()
            .await?
            .execute(
                &format!(
                    "UPDATE cluster_nodes SET expires_at = {now} + $3 \
                     WHERE node_id = $1 AND instance_id = $2 AND expires_at > {now}"
                ),
                &[
                    Arg::Text(node_id),
                    Arg::Text(instance_id),
                    Arg::Int(lease_ms),
                ],
            )
            .await?;
        if extended == 1 {
            return Ok(Renewal::Renewed);
        }
        Ok(
            match self.claim_node(node_id, instance_id, lease_ms).await? {
                true => Renewal::Reclaimed,
                false => Renewal::Lost,
            },
        )
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
                 VALUES ($1, $2, $3, $4) ON CONFLICT (connection_id) DO NOTHING",
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

    async fn callback_presence(&self, app_id: Uuid) -> StoreResult<Option<CallbackPresence>> {
        let row = self
            .read()
            .await?
            .fetch_optional(
                &format!(
                    "SELECT p.node_id, p.connection_id FROM app_presence p \
                     JOIN cluster_nodes n ON n.node_id = p.node_id \
                     WHERE p.app_id = $1 AND n.expires_at > {} \
                     ORDER BY p.seq DESC LIMIT 1",
                    db_now(D::BACKEND)
                ),
                &[Arg::Id(app_id)],
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

    async fn forget_sockets(&self, node_id: &str) -> StoreResult<u64> {
        self.write()
            .await?
            .execute(
                "DELETE FROM app_presence WHERE node_id = $1",
                &[Arg::Text(node_id)],
            )
            .await
    }

    async fn forget_node(&self, node_id: &str, instance_id: &str) -> StoreResult<u64> {
        let mut tx = self.begin().await?;
        let held = tx
            .execute(
                "DELETE FROM cluster_nodes WHERE node_id = $1 AND instance_id = $2",
                &[Arg::Text(node_id), Arg::Text(instance_id)],
            )
            .await?;
        let mut sockets = 0;
        if held == 1 {
            sockets = tx
                .execute(
                    "DELETE FROM app_presence WHERE node_id = $1",
                    &[Arg::Text(node_id)],
                )
                .await?;
        }
        tx.commit().await?;
        Ok(sockets)
    }

    async fn prune_nodes(&self, grace_ms: i64) -> StoreResult<u64> {
        let now = db_now(D::BACKEND);
        let mut tx = self.begin().await?;
        let nodes = tx
            .execute(
                &format!("DELETE FROM cluster_nodes WHERE expires_at < {now} - $1"),
                &[Arg::Int(grace_ms)],
            )
            .await?;
        tx.execute(
            "DELETE FROM app_presence WHERE node_id NOT IN (SELECT node_id FROM cluster_nodes)",
            &[],
        )
        .await?;
        tx.commit().await?;
        Ok(nodes)
    }
}
