//! The three app gates, run as durable jobs. Each executor loads its
//! subject, decides with the manifest's policy (in-process, or by calling the
//! app through `hooks`), and applies the verdict and its events in one
//! transaction that also deletes the job. A verdict is applied only from the
//! state it was computed for, so running a job twice (after a crash, or by the
//! runner and a handler) cannot apply two verdicts.

pub mod dispatch;
pub mod installation;
pub mod message;
pub mod task;

use std::sync::Arc;

use crate::domain::gate::HookFailure;
use crate::domain::task::Task;
use crate::domain::{now_millis, Millis};
use crate::hooks::HookOutcome;
use crate::hub::Hub;
use crate::store::{AppRecord, Job, JobKind, NewJob, StoreError};

/// A hook's outcome as the domain sees it: an answer or a failure kind.
pub fn hook_answer<T>(outcome: HookOutcome<T>) -> Result<T, HookFailure> {
    match outcome {
        HookOutcome::Ok(t) => Ok(t),
        HookOutcome::RemoteError(_) => Err(HookFailure::AppError),
        HookOutcome::Timeout => Err(HookFailure::Timeout),
        HookOutcome::Disconnected | HookOutcome::Unavailable => Err(HookFailure::Unavailable),
        HookOutcome::BadResult(_) => Err(HookFailure::InvalidAnswer),
    }
}

/// The task a conversation belongs to and the app that owns it: whose
/// manifest decides the gate. Either missing is `NotFound`.
pub async fn task_and_app(hub: &Hub, task_id: uuid::Uuid) -> Result<(Task, AppRecord), StoreError> {
    let task = hub
        .store
        .task(task_id)
        .await?
        .ok_or(StoreError::NotFound)?
        .task;
    let app = hub
        .store
        .app(task.app_id)
        .await?
        .ok_or(StoreError::NotFound)?;
    Ok((task, app))
}

/// When a job written for inline execution becomes the runner's: after the
/// hook's deadline and a grace period, so the handler gets the first try.
pub fn inline_run_at(hub: &Hub, hook_timeout_ms: u64) -> Millis {
    now_millis() + hook_timeout_ms as i64 + hub.config.jobs.inline_grace_ms as i64
}

/// A gate job its writer runs at once: stored already claimed for
/// `jobs.lock_ms` (the runner takes it over only after a crash), due for the
/// runner after the hook's deadline and the grace period.
pub fn inline_job(hub: &Hub, kind: JobKind, subject: uuid::Uuid, hook_timeout_ms: u64) -> NewJob {
    NewJob::new(kind, subject, inline_run_at(hub, hook_timeout_ms))
        .claimed_until(now_millis() + hub.config.jobs.lock_ms as i64)
}

/// Runs one claimed job. An error is transient (the store failed); the
/// runner retries it later.
pub async fn run(hub: &Arc<Hub>, job: &Job) -> Result<(), StoreError> {
    match job.kind {
        JobKind::TaskCreate => task::decide(hub, job.subject, job.id).await.map(|_| ()),
        JobKind::MessageAuthorize => message::decide(hub, job.subject, job.id).await.map(|_| ()),
        JobKind::DispatchAuthorize => dispatch::decide(hub, job.subject, job.id).await.map(|_| ()),
        JobKind::LeaseExpire => dispatch::expire(hub, job.subject, job.id).await.map(|_| ()),
        JobKind::HoldExpire => dispatch::hold_expired(hub, job.subject, job.id)
            .await
            .map(|_| ()),
        JobKind::AppCommandDispatch
        | JobKind::AppInteractionDispatch
        | JobKind::AppUrlVerify
        | JobKind::HostedWake => Err(not_a_gate(job)),
    }
}

/// Applies the fail-closed verdict of a job that kept failing: a task fails,
/// a message is blocked, a lease is denied, a granted lease expires.
pub async fn fail_closed(hub: &Arc<Hub>, job: &Job) -> Result<(), StoreError> {
    match job.kind {
        JobKind::TaskCreate => task::fail_closed(hub, job.subject, job.id).await,
        JobKind::MessageAuthorize => message::fail_closed(hub, job.subject, job.id).await,
        JobKind::DispatchAuthorize | JobKind::HoldExpire => dispatch::apply(
            hub,
            job.subject,
            &[
                crate::domain::lease::LeaseState::Pending,
                crate::domain::lease::LeaseState::Held,
            ],
            crate::domain::gate::Admission::Deny {
                reason: "infrastructure: hub_error".into(),
            },
            Some(job.id),
        )
        .await
        .map(|_| ()),
        JobKind::LeaseExpire => dispatch::expire(hub, job.subject, job.id).await.map(|_| ()),
        JobKind::AppCommandDispatch
        | JobKind::AppInteractionDispatch
        | JobKind::AppUrlVerify
        | JobKind::HostedWake => Err(not_a_gate(job)),
    }
}

/// A job `jobs` runs itself (a command's or an interaction's dispatch)
/// handed to a gate:
/// the runner's mistake, refused rather than run as something else.
fn not_a_gate(job: &Job) -> StoreError {
    StoreError::Corrupt(format!("job {} is no gate job", job.id))
}
