//! The background task that enforces `events.retention_hours`,
//! `events.retention_max_per_audience` and `audit.retention_days`, and
//! deletes the hosted apps' invite links no one can redeem any more
//! (expired or used up: `hosted.invite_max_live` counts only live ones).

use std::sync::Arc;
use std::time::Duration;

use tracing::{info, warn};

use tokio_util::sync::CancellationToken;

use super::EventBus;
use crate::config::EventsConfig;
use crate::domain::now_millis;
use crate::store::DynStore;

/// State keyed by principal that would otherwise grow with every principal
/// seen (the hub's call limiters), forgotten where it is back to rest.
pub trait KeyedState: Send + Sync {
    fn retain_recent(&self);
}

/// The parts of the hub the retention task works on.
pub struct Retention {
    pub config: EventsConfig,
    pub store: DynStore,
    pub events: Arc<EventBus>,
    /// `audit.retention_days`, in milliseconds: audit records last denied
    /// longer ago are pruned on the same tick.
    pub audit_retention_ms: i64,
    /// The gateway's per-principal call limiters, pruned on the same tick.
    pub limiters: Arc<dyn KeyedState>,
    pub shutdown: CancellationToken,
}

pub async fn run(parts: Retention) {
    let cfg = parts.config.clone();
    let mut tick = tokio::time::interval(Duration::from_millis(cfg.prune_interval_ms));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = parts.shutdown.cancelled() => return,
        }
        let older_than = now_millis() - (cfg.retention_hours as i64) * 3_600_000;
        match parts
            .store
            .prune_events(older_than, cfg.retention_max_per_audience)
            .await
        {
            Ok(0) => {}
            Ok(n) => info!(deleted = n, "pruned events past retention"),
            Err(e) => warn!(error = %e, "event pruning failed"),
        }
        prune_audit(&parts).await;
        match parts.store.prune_invites(now_millis()).await {
            Ok(0) => {}
            Ok(n) => info!(deleted = n, "pruned expired and used-up invite links"),
            Err(e) => warn!(error = %e, "invite link pruning failed"),
        }
        parts.events.sweep_waiters();
        // Keyed rate-limiter state would otherwise grow with every principal seen.
        parts.limiters.retain_recent();
    }
}

async fn prune_audit(parts: &Retention) {
    let before = now_millis() - parts.audit_retention_ms;
    match parts.store.prune_denials(before).await {
        Ok(0) => {}
        Ok(n) => info!(deleted = n, "pruned audit records past retention"),
        Err(e) => warn!(error = %e, "audit pruning failed"),
    }
    match parts.store.prune_actions(before).await {
        Ok(0) => {}
        Ok(n) => info!(deleted = n, "pruned owner actions past retention"),
        Err(e) => warn!(error = %e, "owner action pruning failed"),
    }
}
