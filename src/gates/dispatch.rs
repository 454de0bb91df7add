//! The `dispatch_authorize` gate and the lease lifecycle after it.

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use super::hook_answer;
use super::installation::{self, Read};
use crate::domain::event::NewEvent;
use crate::domain::gate::{admission, dispatch_gate, Admission, Gate};
use crate::domain::lease::{Lease, LeaseState};
use crate::domain::now_millis;
use crate::hooks;
use crate::hub::Hub;
use crate::protocol::tasks::{
    AppDispatchAuthorize, DispatchAuthorizeCallback, DispatchExpired, DispatchHeld,
    DispatchReleased, LeasePayload,
};
use crate::protocol::{Method, Notification};
use crate::store::{Effects, JobKind, LeaseChange, NewJob, StoreError};
use crate::telemetry::names;

/// Decides a pending lease with the manifest's policy (conversations outside
/// apps grant every dispatch).
pub async fn decide(
    hub: &Arc<Hub>,
    lease_id: Uuid,
    job_id: Uuid,
) -> Result<Option<Lease>, StoreError> {
    let Some(lease) = hub.store.lease(lease_id).await? else {
        hub.store.finish_job(job_id).await?;
        return Ok(None);
    };
    if lease.state != LeaseState::Pending {
        return apply(
            hub,
            lease_id,
            &[LeaseState::Pending],
            Admission::Deny {
                reason: String::new(),
            },
            Some(job_id),
        )
        .await;
    }
    // A grant refused because the app's installation stopped being active
    // meanwhile (ADR 0023 §7) leaves the lease pending: decided again on
    // the store's installation, it is denied with `app_suspended`.
    let mut applied = None;
    for read in [Read::Cached, Read::Fresh] {
        let decision = ask_gate(hub, &lease, read).await?;
        let from = [LeaseState::Pending];
        applied = apply(hub, lease_id, &from, decision, Some(job_id)).await?;
        if applied.is_some() || !still_pending(hub, lease_id).await? {
            break;
        }
    }
    Ok(applied)
}

async fn still_pending(hub: &Hub, lease_id: Uuid) -> Result<bool, StoreError> {
    let lease = hub.store.lease(lease_id).await?;
    Ok(lease.is_some_and(|l| l.state == LeaseState::Pending))
}

/// Outside apps every dispatch is granted; in a task conversation the
/// manifest's policy decides, in-process or by calling the app, once the
/// app's installation is active (else the lease is denied with its code).
async fn ask_gate(hub: &Arc<Hub>, lease: &Lease, read: Read) -> Result<Admission, StoreError> {
    let cfg = &hub.config.leases;
    let (message, _) = hub
        .store
        .message(lease.message_id)
        .await?
        .ok_or(StoreError::NotFound)?;
    let conversation = hub
        .store
        .conversation(lease.conversation_id)
        .await?
        .ok_or(StoreError::NotFound)?;
    let Some(task_id) = conversation.task_id else {
        return Ok(Admission::Grant {
            lease_timeout_ms: cfg.default_timeout_ms,
        });
    };
    let (task, app) = super::task_and_app(hub, task_id).await?;
    let method = AppDispatchAuthorize::NAME;
    if let Some(inactive) = installation::inactive(hub, task.app_id, method, read).await? {
        return Ok(Admission::Deny {
            reason: inactive.code().to_string(),
        });
    }
    Ok(
        match dispatch_gate(
            &app.manifest.hooks.dispatch_authorize,
            cfg.default_timeout_ms,
        ) {
            Gate::Decided(a) => a,
            Gate::Hook { timeout_ms } => {
                let callback = DispatchAuthorizeCallback {
                    task_id,
                    lease: lease.clone(),
                    message,
                    check: false,
                };
                let outcome = hooks::call_app_as::<AppDispatchAuthorize>(
                    hub,
                    task.app_id,
                    app.manifest.callback_names,
                    &callback,
                    Duration::from_millis(timeout_ms),
                )
                .await;
                admission(
                    hook_answer(outcome),
                    cfg.default_timeout_ms,
                    cfg.max_timeout_ms,
                )
            }
        },
    )
}

fn lease_event(lease: &Lease, event_type: &'static str) -> NewEvent {
    let body = serde_json::to_value(LeasePayload {
        lease: lease.clone(),
    })
    .expect("payload serializes");
    NewEvent::new(lease.recipient_id, event_type, body)
}

/// Applies an admission to a lease that is in one of `from`, with its event
/// and follow-up job. `None` when the lease had moved on.
pub async fn apply(
    hub: &Arc<Hub>,
    lease_id: Uuid,
    from: &[LeaseState],
    decision: Admission,
    finish_job: Option<Uuid>,
) -> Result<Option<Lease>, StoreError> {
    let now = now_millis();
    let (to, reason, expires_at, schedule, event_type) = match &decision {
        Admission::Grant { lease_timeout_ms } => {
            let expires = now + *lease_timeout_ms as i64;
            (
                LeaseState::Granted,
                None,
                Some(expires),
                Some(NewJob::new(JobKind::LeaseExpire, lease_id, expires)),
                DispatchReleased::NAME,
            )
        }
        Admission::Deny { reason } => (
            LeaseState::Denied,
            Some(reason.clone()),
            None,
            None,
            DispatchReleased::NAME,
        ),
        Admission::Hold { reason } => {
            let until = now + hub.config.leases.max_hold_ms as i64;
            (
                LeaseState::Held,
                Some(reason.clone()),
                None,
                Some(NewJob::new(JobKind::HoldExpire, lease_id, until)),
                DispatchHeld::NAME,
            )
        }
    };
    let change = LeaseChange {
        lease_id,
        from: from.to_vec(),
        to,
        reason,
        expires_at,
        now,
    };
    // The event needs the lease as it will be; build it from the change.
    let Some(current) = hub.store.lease(lease_id).await? else {
        if let Some(job) = finish_job {
            hub.store.finish_job(job).await?;
        }
        return Ok(None);
    };
    let after = Lease {
        state: to,
        reason: change.reason.clone(),
        expires_at: expires_at.map(crate::domain::event::rfc3339),
        ..current
    };
    let effects = Effects {
        events: vec![lease_event(&after, event_type)],
        finish_job,
        schedule: schedule.into_iter().collect(),
        conversations: Vec::new(),
    };
    match hub.store.transition_lease(&change, &effects).await? {
        Some((lease, stored)) => {
            metrics::counter!(names::GATE_VERDICTS, "gate" => "dispatch_authorize", "verdict" => to.as_str()).increment(1);
            hub.events.publish(&stored);
            Ok(Some(lease))
        }
        None => Ok(None),
    }
}

/// A granted lease's deadline passed.
pub async fn expire(
    hub: &Arc<Hub>,
    lease_id: Uuid,
    job_id: Uuid,
) -> Result<Option<Lease>, StoreError> {
    let now = now_millis();
    let Some(current) = hub.store.lease(lease_id).await? else {
        hub.store.finish_job(job_id).await?;
        return Ok(None);
    };
    let after = Lease {
        state: LeaseState::Expired,
        reason: Some("lease expired".into()),
        ..current
    };
    let change = LeaseChange {
        lease_id,
        from: vec![LeaseState::Granted],
        to: LeaseState::Expired,
        reason: after.reason.clone(),
        expires_at: None,
        now,
    };
    let effects = Effects {
        events: vec![lease_event(
            &Lease {
                expires_at: None,
                ..after
            },
            DispatchExpired::NAME,
        )],
        finish_job: Some(job_id),
        ..Default::default()
    };
    let result = hub.store.transition_lease(&change, &effects).await?;
    if let Some((_, stored)) = &result {
        hub.events.publish(stored);
    }
    Ok(result.map(|(l, _)| l))
}

/// A held lease was not resolved within `leases.max_hold_ms`.
pub async fn hold_expired(
    hub: &Arc<Hub>,
    lease_id: Uuid,
    job_id: Uuid,
) -> Result<Option<Lease>, StoreError> {
    apply(
        hub,
        lease_id,
        &[LeaseState::Held],
        Admission::Deny {
            reason: "hold_expired".into(),
        },
        Some(job_id),
    )
    .await
}
