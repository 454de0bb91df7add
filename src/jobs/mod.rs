//! The job runner: claims due jobs and runs them. Jobs are written in the
//! transaction that makes them necessary, so work that must follow a commit
//! survives a crash; a handler usually runs its job at once (it stores it
//! already claimed, see `gates::inline_job`), and the runner picks up
//! whatever nobody ran: after a restart, a lease deadline, a transient
//! failure.

mod commands;
mod deliver;
mod interaction_dispatch;
mod url_verify;
mod webhook_attempt;
pub mod webhook_deliveries;
mod webhook_log;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::warn;

use crate::domain::now_millis;
use crate::hub::Hub;
use crate::store::{ClaimRoom, Job, JobKind};
use crate::telemetry::names;

pub async fn run(hub: Arc<Hub>) {
    let cfg = hub.config.jobs.clone();
    let mut tick = tokio::time::interval(Duration::from_millis(cfg.poll_interval_ms));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let slots = Slots::new(&hub);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = hub.shutdown.cancelled() => return,
        }
        let room = slots.room(cfg.batch);
        if room.other == 0 && room.app_url == 0 {
            continue;
        }
        let now = now_millis();
        match hub
            .store
            .claim_due_jobs_by_class(now, now + cfg.lock_ms as i64, room)
            .await
        {
            Ok(jobs) => {
                for job in jobs {
                    let hub2 = hub.clone();
                    let permit = slots.take(job.kind).await;
                    hub.tasks.spawn(async move {
                        execute(&hub2, job).await;
                        drop(permit);
                    });
                }
            }
            Err(e) => warn!(error = %e, "claiming jobs failed"),
        }
    }
}

/// The runner's two bounds: each job may wait on a hook
/// (`jobs.max_concurrent`), and a job that sends to an app's URL waits on
/// that app (`app.interaction_max_concurrent`), so slow apps take slots of
/// their own, never the gates' and the expiries'.
struct Slots {
    other: Arc<Semaphore>,
    app_url: Arc<Semaphore>,
}

impl Slots {
    fn new(hub: &Hub) -> Slots {
        Slots {
            other: Arc::new(Semaphore::new(hub.config.jobs.max_concurrent as usize)),
            app_url: Arc::new(Semaphore::new(
                hub.config.app.interaction_max_concurrent as usize,
            )),
        }
    }

    /// What the next claim may take: never more than the free slots, so
    /// [`take`](Self::take) never waits.
    fn room(&self, batch: u32) -> ClaimRoom {
        let free = |s: &Semaphore| (s.available_permits() as u32).min(batch);
        ClaimRoom {
            other: free(&self.other),
            app_url: free(&self.app_url),
        }
    }

    async fn take(&self, kind: JobKind) -> OwnedSemaphorePermit {
        let slots = match kind.reaches_app_url() {
            true => &self.app_url,
            false => &self.other,
        };
        slots.clone().acquire_owned().await.expect("semaphore open")
    }
}

/// Runs a claimed job; a transient failure schedules a retry with backoff.
pub async fn execute(hub: &Arc<Hub>, job: Job) {
    let kind = job.kind.as_str();
    let ran = match job.kind {
        JobKind::AppCommandDispatch => commands::dispatch(hub, &job).await,
        JobKind::AppInteractionDispatch => interaction_dispatch::run(hub, &job).await,
        JobKind::AppUrlVerify => url_verify::run(hub, &job).await,
        JobKind::HostedWake => crate::hosted::wake::run(hub, &job).await,
        _ => crate::gates::run(hub, &job).await,
    };
    match ran {
        Ok(()) => metrics::counter!(names::JOBS, "kind" => kind, "outcome" => "done").increment(1),
        Err(e) if job.attempts >= hub.config.jobs.max_attempts => {
            // Keeps failing: apply the fail-closed verdict instead.
            tracing::error!(job = %job.id, kind, attempts = job.attempts, error = %e, "job keeps failing; failing closed");
            let failed = match job.kind {
                JobKind::AppInteractionDispatch => {
                    interaction_dispatch::fail_closed(hub, &job).await
                }
                // Nothing of a command is repeated or failed later: the
                // invoker has its answer, the job only ends.
                JobKind::AppCommandDispatch => hub.store.finish_job(job.id).await,
                // The URL stays unverified; `verify-url` checks it again.
                JobKind::AppUrlVerify => hub.store.finish_job(job.id).await,
                // The mail stays in the app's log: the next message wakes
                // the app again.
                JobKind::HostedWake => hub.store.finish_job(job.id).await,
                _ => crate::gates::fail_closed(hub, &job).await,
            };
            match failed {
                Ok(()) => {
                    metrics::counter!(names::JOBS, "kind" => kind, "outcome" => "failed_closed")
                        .increment(1)
                }
                Err(e) => {
                    warn!(job = %job.id, error = %e, "could not fail the job closed; retrying later");
                    let _ = hub.store.retry_job(job.id, now_millis() + 60_000).await;
                }
            }
        }
        Err(e) => {
            metrics::counter!(names::JOBS, "kind" => kind, "outcome" => "retry").increment(1);
            let backoff = 500i64.saturating_mul(1 << job.attempts.min(10));
            warn!(job = %job.id, kind, attempts = job.attempts, error = %e, "job failed; retrying");
            if let Err(e) = hub.store.retry_job(job.id, now_millis() + backoff).await {
                warn!(job = %job.id, error = %e, "could not reschedule job; its lock will lapse");
            }
        }
    }
}
