//! The orphan sweep (ADR 0031 §3): a run whose process was killed outright
//! stays `starting` or `running` in the store. Every run's row names its
//! owner process and carries that owner's heartbeat, so a serving hub ends
//! `owner_lost` only the runs of an owner that stopped beating, never those
//! of a live second process (another hub, `switchboard app run`). The
//! swept run's fresh copy, named by its run id, is removed on this host.

use std::sync::Arc;
use std::time::Duration;

use crate::domain::now_millis;
use crate::hub::Hub;

/// Sweeps once at start, then every `hosted.orphan_after_ms` until the hub
/// shuts down.
pub async fn run(hub: Arc<Hub>) {
    let every = Duration::from_millis(hub.config.hosted.orphan_after_ms);
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => once(&hub).await,
            _ = hub.shutdown.cancelled() => return,
        }
    }
}

/// One sweep: the ids are logged, nothing of the runs' content.
pub async fn once(hub: &Hub) {
    let now = now_millis();
    let stale_before = now - hub.config.hosted.orphan_after_ms as i64;
    match hub
        .store
        .sweep_orphan_runs(hub.runs.owner(), stale_before, now)
        .await
    {
        Ok(swept) => {
            for run in swept {
                let work_dir = hub.config.hosted.work_dir.as_deref();
                if let Err(e) = super::package::remove_orphan_copy(work_dir, run) {
                    tracing::warn!(run = %run, error = %e, "hosted runs: an orphan's copy was not removed");
                }
                tracing::warn!(run = %run, "hosted run ended owner_lost: its process stopped beating");
            }
        }
        Err(e) => tracing::warn!(error = %e, "hosted runs: the orphan sweep failed"),
    }
}
