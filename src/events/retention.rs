//! The background task that enforces `events.retention_hours` and
//! `events.retention_max_per_audience`.

use std::sync::Arc;
use std::time::Duration;

use tracing::{info, warn};

use crate::domain::now_millis;
use crate::hub::Hub;

pub async fn run(hub: Arc<Hub>) {
    let cfg = hub.config.events.clone();
    let mut tick = tokio::time::interval(Duration::from_millis(cfg.prune_interval_ms));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = hub.shutdown.cancelled() => return,
        }
        let older_than = now_millis() - (cfg.retention_hours as i64) * 3_600_000;
        match hub
            .store
            .prune_events(older_than, cfg.retention_max_per_audience)
            .await
        {
            Ok(0) => {}
            Ok(n) => info!(deleted = n, "pruned events past retention"),
            Err(e) => warn!(error = %e, "event pruning failed"),
        }
        hub.events.sweep_waiters();
        // Keyed rate-limiter state would otherwise grow with every principal seen.
        hub.limiter.retain_recent();
    }
}
