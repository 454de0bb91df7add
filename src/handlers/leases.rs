//! Dispatch leases: an agent asks to act on a message it received, the app
//! (or its static policy) admits it, the agent completes it.

use serde_json::json;
use uuid::Uuid;

use super::conversations::visible_membership;
use super::store_failure;
use super::task_conversations::app_conversation;
use super::tasks::invalid;
use crate::domain::gate::{admission_of, AdmissionAnswer};
use crate::domain::lease::{Lease, LeaseState};
use crate::domain::now_millis;
use crate::gates;
use crate::hub::RequestContext;
use crate::protocol::tasks::*;
use crate::rpc::RpcError;
use crate::store::{CreatedLease, Effects, JobKind, LeaseChange, NewLease};

pub async fn dispatch_request(
    ctx: RequestContext,
    p: DispatchRequestParams,
) -> Result<LeaseResult, RpcError> {
    let hub = ctx.hub.clone();
    let me = ctx.principal().id;
    let hidden =
        || RpcError::not_found("message not found").with_data(json!({ "messageId": p.message_id }));
    let conversation = visible_membership(&ctx, p.conversation_id).await?;
    let (message, _) = hub
        .store
        .message(p.message_id)
        .await
        .map_err(store_failure)?
        .ok_or_else(hidden)?;
    if message.conversation_id != conversation.id
        || !hub
            .store
            .is_recipient(message.id, me)
            .await
            .map_err(store_failure)?
    {
        return Err(hidden());
    }
    let lease_id = Uuid::now_v7();
    let job = gates::inline_job(
        &hub,
        JobKind::DispatchAuthorize,
        lease_id,
        hub.config.hooks.max_timeout_ms,
    );
    let new = NewLease {
        id: lease_id,
        message_id: message.id,
        conversation_id: conversation.id,
        recipient_id: me,
        created_at: now_millis(),
    };
    match hub
        .store
        .create_lease(&new, &job)
        .await
        .map_err(store_failure)?
    {
        CreatedLease::Existing(lease) => Ok(LeaseResult { lease }),
        CreatedLease::Created(lease) => {
            // Answer now; decide in the background (the verdict is an event).
            let hub2 = hub.clone();
            // The job was stored claimed for us.
            hub.tasks.spawn(async move {
                if let Err(e) = gates::dispatch::decide(&hub2, lease_id, job.id).await {
                    tracing::warn!(lease = %lease_id, error = %e, "dispatch gate failed; the job runner retries it");
                    let _ = hub2.store.retry_job(job.id, now_millis()).await;
                }
            });
            Ok(LeaseResult { lease })
        }
    }
}

fn lease_not_found(id: Uuid) -> RpcError {
    RpcError::not_found("lease not found").with_data(json!({ "leaseId": id }))
}

pub async fn dispatch_complete(
    ctx: RequestContext,
    p: LeaseParams,
) -> Result<LeaseResult, RpcError> {
    let lease = ctx
        .hub
        .store
        .lease(p.lease_id)
        .await
        .map_err(store_failure)?;
    let Some(lease) = lease.filter(|l| l.recipient_id == ctx.principal().id) else {
        return Err(lease_not_found(p.lease_id));
    };
    let change = LeaseChange {
        lease_id: lease.lease_id,
        from: vec![LeaseState::Granted],
        to: LeaseState::Completed,
        reason: None,
        expires_at: None,
        now: now_millis(),
    };
    match ctx
        .hub
        .store
        .transition_lease(&change, &Effects::default())
        .await
        .map_err(store_failure)?
    {
        Some((lease, _)) => Ok(LeaseResult { lease }),
        None => {
            let now = ctx
                .hub
                .store
                .lease(lease.lease_id)
                .await
                .map_err(store_failure)?
                .map_or(lease.state, |l| l.state);
            Err(
                RpcError::conflict(format!("the lease is {}, not granted", now.as_str()))
                    .with_data(json!({ "leaseId": lease.lease_id, "state": now })),
            )
        }
    }
}

pub async fn dispatch_resolve(
    ctx: RequestContext,
    p: DispatchResolveParams,
) -> Result<LeaseResult, RpcError> {
    let lease: Option<Lease> = ctx
        .hub
        .store
        .lease(p.lease_id)
        .await
        .map_err(store_failure)?;
    let lease = lease.ok_or_else(|| lease_not_found(p.lease_id))?;
    let (_, task) = app_conversation(&ctx, lease.conversation_id)
        .await
        .map_err(|_| lease_not_found(p.lease_id))?;
    let cfg = &ctx.hub.config.leases;
    let answer = match p.resolution {
        Resolution::Grant { lease_timeout_ms } => {
            if lease_timeout_ms == Some(0) {
                return Err(invalid(
                    "resolution.leaseTimeoutMs",
                    "must be greater than 0",
                ));
            }
            AdmissionAnswer::Grant { lease_timeout_ms }
        }
        Resolution::Deny { reason } => AdmissionAnswer::Deny { reason },
    };
    let decision = admission_of(answer, cfg.default_timeout_ms, cfg.max_timeout_ms);
    match gates::dispatch::apply(
        &ctx.hub,
        lease.lease_id,
        &[LeaseState::Pending, LeaseState::Held],
        decision,
        None,
    )
    .await
    .map_err(store_failure)?
    {
        Some(lease) => Ok(LeaseResult { lease }),
        None => Err(RpcError::conflict("the lease is already decided")
            .with_data(json!({ "leaseId": lease.lease_id, "taskId": task.id }))),
    }
}
