//! Dispatch leases: an agent asks to act on a message it received, the app
//! (or its static policy) admits it, the agent completes it.

use serde_json::json;
use uuid::Uuid;

use super::store_failure;
use super::tasks::invalid;
use crate::access::{self, Target};
use crate::domain::authz::Action;
use crate::domain::gate::{admission_of, AdmissionAnswer};
use crate::domain::lease::LeaseState;
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
    let conversation = access::check(
        &ctx,
        Action::ConversationRead,
        Target::conversation(p.conversation_id),
    )
    .await?
    .membership()?;
    let target = Target::message(conversation.id, p.message_id);
    let (message, _) = access::check(&ctx, Action::DispatchRequest, target)
        .await?
        .message()?;
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

pub async fn dispatch_complete(
    ctx: RequestContext,
    p: LeaseParams,
) -> Result<LeaseResult, RpcError> {
    let (lease, _) = access::check(&ctx, Action::DispatchComplete, Target::lease(p.lease_id))
        .await?
        .lease()?;
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
    let (lease, conversation) =
        access::check(&ctx, Action::DispatchResolve, Target::lease(p.lease_id))
            .await?
            .lease()?;
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
            .with_data(json!({ "leaseId": lease.lease_id, "taskId": conversation.task_id }))),
    }
}
