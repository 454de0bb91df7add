//! Liveness, readiness and metrics for operators.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::hub::Hub;

pub async fn healthz() -> &'static str {
    "ok\n"
}

/// Ready when the database answers and the hub is not shutting down. The
/// body names the node and its link to the cluster: a node that lost NATS
/// still serves (delivery by the log check, closes by the database sweep,
/// ADR 0034), so it stays ready.
pub async fn readyz(State(hub): State<Arc<Hub>>) -> Response {
    if hub.shutdown.is_cancelled() {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response();
    }
    match hub.store.ping().await {
        Ok(()) => (StatusCode::OK, ready_text(&hub.cluster)).into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "readiness check failed");
            (StatusCode::SERVICE_UNAVAILABLE, "database unavailable\n").into_response()
        }
    }
}

pub async fn metrics(State(hub): State<Arc<Hub>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        hub.metrics.render(),
    )
        .into_response()
}

/// `ready`, then `node: <id>` and `cluster: single` or `cluster: nats
/// connected|disconnected`, one a line.
fn ready_text(cluster: &crate::cluster::Cluster) -> String {
    let link = match cluster.mode() {
        crate::config::ClusterMode::Single => "single",
        crate::config::ClusterMode::Nats if cluster.is_connected() => "nats connected",
        crate::config::ClusterMode::Nats => "nats disconnected",
    };
    format!("ready\nnode: {}\ncluster: {link}\n", cluster.node_id())
}
