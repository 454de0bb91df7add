//! This node's part of the cluster's presence table (ADR 0035): its lease,
//! renewed while it runs, and a row per app socket it holds, so that a gate
//! on any node finds the app's newest socket. Nothing here runs in single
//! mode.

use std::sync::Arc;
use std::time::Duration;

use tracing::{info, warn};
use uuid::Uuid;

use crate::domain::now_millis;
use crate::hub::Hub;
use crate::store::StoreResult;

/// Before the node serves: forgets the sockets a previous process left
/// under this node id (they died with it) and takes the lease.
pub async fn start(hub: &Hub) -> StoreResult<()> {
    if !clustered(hub) {
        return Ok(());
    }
    let node = hub.cluster.node_id();
    let forgotten = hub.store.forget_node(node).await?;
    if forgotten > 0 {
        info!(
            sockets = forgotten,
            "forgot app sockets a previous process left under this node id"
        );
    }
    renew(hub, node).await
}

/// Whether this node is one of a cluster (`cluster.mode = "nats"`).
pub fn clustered(hub: &Hub) -> bool {
    hub.cluster.mode() == crate::config::ClusterMode::Nats
}

async fn renew(hub: &Hub, node: &str) -> StoreResult<()> {
    let lease = hub.config.cluster.presence_lease_ms as i64;
    hub.store.renew_node(node, now_millis() + lease).await
}

/// Renews the lease every `cluster.presence_renew_ms` and forgets nodes
/// whose lease lapsed a lease ago; at shutdown, forgets this node, so
/// new calls go to the app's sockets on other nodes while this one
/// drains (calls already relayed here still answer).
pub async fn run(hub: Arc<Hub>) {
    if !clustered(&hub) {
        return;
    }
    let node = hub.cluster.node_id().to_string();
    let cfg = &hub.config.cluster;
    let mut tick = tokio::time::interval(Duration::from_millis(cfg.presence_renew_ms));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = hub.shutdown.cancelled() => break,
        }
        if let Err(e) = renew(&hub, &node).await {
            warn!(error = %e, "renewing this node's presence lease failed");
        }
        let lapsed = now_millis() - cfg.presence_lease_ms as i64;
        match hub.store.prune_nodes(lapsed).await {
            Ok(0) => {}
            Ok(n) => info!(nodes = n, "forgot nodes whose presence lease lapsed"),
            Err(e) => warn!(error = %e, "forgetting lapsed nodes failed"),
        }
    }
    if let Err(e) = hub.store.forget_node(&node).await {
        warn!(error = %e, "forgetting this node's presence at shutdown failed; its lease lapses");
    }
}

/// An app socket authenticated on this node: recorded before its connect
/// is answered, so a gate anywhere finds it once the app knows it is
/// connected.
pub async fn connected(hub: &Hub, connection_id: Uuid, app_id: Uuid) -> StoreResult<()> {
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
