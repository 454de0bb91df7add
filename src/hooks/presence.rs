//! This node's part of the cluster's presence table (ADR 0035): its lease,
//! renewed while it runs, and a row per app socket it holds, so that a gate
//! on any node finds the app's newest socket. Nothing here runs in single
//! mode.
//!
//! A node id is held by one process at a time (ADR 0034, 2026-12-02): each
//! start has a random instance id, and a start while another instance's
//! lease on the id is live is refused, so two nodes configured with one id
//! never both take its hook calls.

use std::sync::Arc;
use std::time::Duration;

use tracing::{error, info, warn};
use uuid::Uuid;

use crate::domain::now_millis;
use crate::hub::Hub;
use crate::store::Renewal;

/// Before the node serves: takes the node id's lease for this instance
/// (refused while another live instance holds it), then forgets the
/// sockets a previous process left under the id (they died with it).
pub async fn start(hub: &Hub) -> anyhow::Result<()> {
    if !clustered(hub) {
        return Ok(());
    }
    let node = hub.cluster.node_id();
    if !hub
        .store
        .claim_node(node, hub.cluster.instance_id(), lease_ms(hub))
        .await?
    {
        anyhow::bail!(
            "cluster.node_id {node:?} is held by another live node (its presence lease has not lapsed): \
             two nodes cannot share a node id; give this one another cluster.node_id, or wait \
             cluster.presence_lease_ms for a stopped node's lease to lapse"
        );
    }
    let forgotten = hub.store.forget_sockets(node).await?;
    if forgotten > 0 {
        info!(
            sockets = forgotten,
            "forgot app sockets a previous process left under this node id"
        );
    }
    Ok(())
}

/// Whether this node is one of a cluster (`cluster.mode = "nats"`).
pub fn clustered(hub: &Hub) -> bool {
    hub.cluster.mode() == crate::config::ClusterMode::Nats
}

fn lease_ms(hub: &Hub) -> i64 {
    hub.config.cluster.presence_lease_ms as i64
}

/// Renews the lease every `cluster.presence_renew_ms` and forgets nodes
/// whose lease lapsed a lease ago; at shutdown, forgets this node, so
/// new calls go to the app's sockets on other nodes while this one
/// drains (calls already relayed here still answer), and the node id is
/// free for the next start at once. A node that finds
/// another instance holding its id stops (fail closed: two holders would
/// answer each other's hook calls).
pub async fn run(hub: Arc<Hub>) {
    if !clustered(&hub) {
        return;
    }
    let node = hub.cluster.node_id().to_string();
    let mut tick =
        tokio::time::interval(Duration::from_millis(hub.config.cluster.presence_renew_ms));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = hub.shutdown.cancelled() => break,
        }
        if !renew(&hub, &node).await {
            hub.shutdown.cancel();
            return;
        }
        prune(&hub).await;
    }
    forget_at_drain(&hub, &node).await;
}

/// At the start of the drain: the node's lease and its app sockets' rows
/// go, so new hook calls pick the app's sockets on other nodes at once and
/// a restart with the same node id is not refused. The relay keeps
/// answering calls already routed here until the sockets closed
/// (`hooks::relay::serve`).
async fn forget_at_drain(hub: &Hub, node: &str) {
    match hub.store.forget_node(node, hub.cluster.instance_id()).await {
        Ok(sockets) => info!(
            sockets,
            "forgot this node's presence; new hook calls go to other nodes"
        ),
        Err(e) => {
            warn!(error = %e, "forgetting this node's presence at shutdown failed; its lease lapses")
        }
    }
}

/// One renewal; `false` when another instance holds the node id.
async fn renew(hub: &Hub, node: &str) -> bool {
    let instance = hub.cluster.instance_id();
    match hub.store.renew_node(node, instance, lease_ms(hub)).await {
        Ok(Renewal::Renewed) => true,
        Ok(Renewal::Reclaimed) => {
            warn!("this node's presence lease had lapsed (paused or cut off from the database); took it again");
            record_sockets(hub).await;
            true
        }
        Ok(Renewal::Lost) => {
            error!(node, "another node took this cluster.node_id while this one's lease had lapsed; stopping");
            false
        }
        Err(e) => {
            warn!(error = %e, "renewing this node's presence lease failed");
            true
        }
    }
}

/// Records every open app socket of this node again: a lapsed lease may
/// have been pruned with its sockets' rows.
async fn record_sockets(hub: &Hub) {
    let now = now_millis();
    for conn in hub.registry.all() {
        if conn.principal.kind != crate::domain::PrincipalKind::App {
            continue;
        }
        let added = hub
            .store
            .add_presence(conn.id, conn.principal.id, hub.cluster.node_id(), now)
            .await;
        if let Err(e) = added {
            warn!(connection = %conn.id, error = %e, "recording an app socket's presence again failed");
        }
    }
}

/// Forgets the nodes whose lease lapsed a lease ago, by the database's
/// clock, with their sockets.
async fn prune(hub: &Hub) {
    match hub.store.prune_nodes(lease_ms(hub)).await {
        Ok(0) => {}
        Ok(n) => info!(nodes = n, "forgot nodes whose presence lease lapsed"),
        Err(e) => warn!(error = %e, "forgetting lapsed nodes failed"),
    }
}

/// An app socket authenticated on this node: recorded before its connect
/// is answered, so a gate anywhere finds it once the app knows it is
/// connected.
pub async fn connected(
    hub: &Hub,
    connection_id: Uuid,
    app_id: Uuid,
) -> crate::store::StoreResult<()> {
    if !clustered(hub) {
        return Ok(());
    }
    hub.store
        .add_presence(connection_id, app_id, hub.cluster.node_id(), now_millis())
        .await
}

/// An app socket closed: its row goes. A failed delete leaves a row that
/// routes the app's calls here, where they end `unavailable`, until this
/// node is forgotten; logged.
pub async fn disconnected(hub: &Hub, connection_id: Uuid) {
    if !clustered(hub) {
        return;
    }
    if let Err(e) = hub.store.remove_presence(connection_id).await {
        warn!(connection = %connection_id, error = %e, "forgetting an app socket's presence failed");
    }
}
