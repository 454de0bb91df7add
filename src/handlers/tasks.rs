//! App-bound tasks, the app's conversations and messages, and dispatch
//! leases.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::json;
use uuid::Uuid;

use super::conversations::{store_message, visible_conversation, Outgoing};
use super::store_failure;
use crate::domain::conversation::{Conversation, ConversationKind};
use crate::domain::event::{rfc3339, NewEvent};
use crate::domain::gate::{admission_of, AdmissionAnswer};
use crate::domain::lease::{Lease, LeaseState};
use crate::domain::manifest::TaskCreatePolicy;
use crate::domain::message::Origin;
use crate::domain::task::{Task, TaskParticipant, TaskRole, TaskState};
use crate::domain::{now_millis, PrincipalKind};
use crate::gates::{self, task::TaskOutcome};
use crate::gateway::RequestContext;
use crate::protocol::conversations::{created_events, MessageSendParams, MessageSendResult};
use crate::protocol::tasks::*;
use crate::protocol::Notification;
use crate::rpc::{ErrorKind, RpcError};
use crate::store::{
    CreatedConversation, CreatedLease, Effects, JobKind, LeaseChange, NewConversation, NewLease,
    NewTask,
};

fn invalid(field: &str, detail: impl std::fmt::Display) -> RpcError {
    RpcError::invalid_params(format!("{field}: {detail}")).with_data(json!({ "field": field }))
}

fn task_not_found(id: Uuid) -> RpcError {
    RpcError::not_found("task not found").with_data(json!({ "taskId": id }))
}

fn check_name(field: &str, name: &str) -> Result<(), RpcError> {
    if name.is_empty() || name.chars().count() > 100 || name.chars().any(char::is_control) {
        return Err(invalid(
            field,
            "must be 1 to 100 characters without control characters",
        ));
    }
    Ok(())
}

/// The error a failed task request answers with; `data` names the reason.
fn task_failed_error(task: &Task, hook_timeout: Option<u64>) -> RpcError {
    let failure = task
        .failure
        .clone()
        .unwrap_or(crate::domain::task::TaskFailure {
            code: "failed".into(),
            reason: None,
        });
    let (kind, message) = match failure.code.as_str() {
        "rejected" => (
            ErrorKind::Forbidden,
            format!(
                "the app rejected the task: {}",
                failure.reason.as_deref().unwrap_or("no reason given")
            ),
        ),
        "timeout" => (
            ErrorKind::Timeout,
            format!(
                "the app did not answer app/task/create within {} ms",
                hook_timeout.unwrap_or(0)
            ),
        ),
        "app_unavailable" => (
            ErrorKind::Unavailable,
            "the app is not connected".to_string(),
        ),
        "app_error" => (
            ErrorKind::Unavailable,
            "the app answered app/task/create with an error".to_string(),
        ),
        "invalid_answer" => (
            ErrorKind::Unavailable,
            "the app's answer to app/task/create was not a valid verdict".to_string(),
        ),
        other => (ErrorKind::Unavailable, format!("the task failed: {other}")),
    };
    RpcError::new(kind, message)
        .with_data(json!({ "taskId": task.id, "code": failure.code, "reason": failure.reason }))
}

pub async fn request(ctx: RequestContext, p: TaskRequestParams) -> Result<AcceptedTask, RpcError> {
    let hub = ctx.hub.clone();
    let me = ctx.principal().id;
    let app = hub
        .store
        .app(p.app_id)
        .await
        .map_err(store_failure)?
        .ok_or_else(|| {
            RpcError::not_found("app not found").with_data(json!({ "appId": p.app_id }))
        })?;
    let mut seen = HashSet::new();
    for id in &p.invited_agent_ids {
        if *id == me {
            return Err(invalid(
                "invitedAgentIds",
                "lists the other agents; the caller joins as initiator",
            ));
        }
        if !seen.insert(*id) {
            return Err(invalid(
                "invitedAgentIds",
                format!("names agent {id} twice"),
            ));
        }
    }
    let max = app.manifest.limits.max_participants as usize;
    let total = p.invited_agent_ids.len() + 1;
    if total > max {
        return Err(RpcError::invalid_params(format!(
            "invitedAgentIds: the task would have {total} participants; the app allows at most {max} (limits.maxParticipants)"
        ))
        .with_data(json!({ "field": "invitedAgentIds", "limit": max })));
    }
    for id in &p.invited_agent_ids {
        let record = hub.store.principal(*id).await.map_err(store_failure)?;
        if record.map(|r| r.kind) != Some(PrincipalKind::Agent) {
            return Err(RpcError::not_found(format!("agent {id} not found"))
                .with_data(json!({ "agentId": id })));
        }
    }
    let mut participants = vec![TaskParticipant {
        agent_id: me,
        role: TaskRole::Initiator,
    }];
    participants.extend(p.invited_agent_ids.iter().map(|a| TaskParticipant {
        agent_id: *a,
        role: TaskRole::Invited,
    }));
    if let Some(ic) = &p.initial_conversation {
        check_name("initialConversation.name", &ic.name)?;
        let mut seen = HashSet::new();
        for a in &ic.participants {
            if !participants.iter().any(|p| p.agent_id == *a) {
                return Err(invalid(
                    "initialConversation.participants",
                    format!("agent {a} is not a task participant"),
                ));
            }
            if !seen.insert(*a) {
                return Err(invalid(
                    "initialConversation.participants",
                    format!("names agent {a} twice"),
                ));
            }
        }
    }
    let hook_timeout = match app.manifest.hooks.task_create {
        TaskCreatePolicy::Hook { timeout_ms } => Some(timeout_ms),
        _ => None,
    };
    let task_id = Uuid::now_v7();
    let job = gates::inline_job(
        &hub,
        JobKind::TaskCreate,
        task_id,
        hook_timeout.unwrap_or(0),
    );
    let new = NewTask {
        id: task_id,
        app_id: app.principal.id,
        initiator_id: me,
        participants,
        initial_conversation: p
            .initial_conversation
            .as_ref()
            .map(|ic| serde_json::to_string(ic).expect("serializes")),
        created_at: now_millis(),
    };
    hub.store
        .create_task(&new, &job)
        .await
        .map_err(store_failure)?;
    // The job was stored claimed for us: run the gate now.
    let outcome = match gates::task::decide(&hub, task_id, job.id).await {
        Ok(outcome) => outcome,
        Err(e) => {
            // The runner takes the job over; the answer names the task.
            let _ = hub.store.retry_job(job.id, now_millis()).await;
            tracing::warn!(task = %task_id, error = %e, "task gate failed; the job runner retries it");
            return Err(RpcError::internal().with_data(json!({ "taskId": task_id })));
        }
    };
    match outcome {
        Some(TaskOutcome::Accepted(accepted)) => Ok(accepted),
        Some(TaskOutcome::Failed(task)) => Err(task_failed_error(&task, hook_timeout)),
        Some(TaskOutcome::Unchanged(_)) | None => {
            // Decided already (a retried request), or gone: wait for the
            // verdict the job runner may still apply.
            let deadline = tokio::time::Instant::now()
                + Duration::from_millis(
                    hook_timeout.unwrap_or(0) + hub.config.jobs.inline_grace_ms,
                );
            loop {
                let task = hub
                    .store
                    .task(task_id)
                    .await
                    .map_err(store_failure)?
                    .ok_or_else(RpcError::internal)?
                    .task;
                match task.state {
                    TaskState::Waiting if tokio::time::Instant::now() < deadline => {
                        tokio::time::sleep(Duration::from_millis(25)).await;
                    }
                    TaskState::Waiting => {
                        return Err(RpcError::new(ErrorKind::Timeout, "the task is still waiting for its app; watch for agent/task/accepted or agent/task/failed")
                            .with_data(json!({ "taskId": task_id })))
                    }
                    TaskState::Failed => return Err(task_failed_error(&task, hook_timeout)),
                    TaskState::Active | TaskState::Closed => {
                        let conversations = task_conversations(&ctx, task_id).await?;
                        return Ok(AcceptedTask { task, conversations });
                    }
                }
            }
        }
    }
}

async fn task_conversations(
    ctx: &RequestContext,
    task_id: Uuid,
) -> Result<Vec<Conversation>, RpcError> {
    let all = ctx
        .hub
        .store
        .conversations_of(ctx.principal().id, None, 10_000)
        .await
        .map_err(store_failure)?;
    Ok(all
        .into_iter()
        .filter(|c| c.task_id == Some(task_id))
        .collect())
}

/// A task the calling agent takes part in (else the same NotFound).
async fn agent_task(ctx: &RequestContext, id: Uuid) -> Result<Task, RpcError> {
    match ctx.hub.store.task(id).await.map_err(store_failure)? {
        Some(r) if r.task.has_participant(ctx.principal().id) => Ok(r.task),
        _ => Err(task_not_found(id)),
    }
}

/// A task of the calling app (else the same NotFound).
async fn app_task(ctx: &RequestContext, id: Uuid) -> Result<Task, RpcError> {
    match ctx.hub.store.task(id).await.map_err(store_failure)? {
        Some(r) if r.task.app_id == ctx.principal().id => Ok(r.task),
        _ => Err(task_not_found(id)),
    }
}

fn require_active(task: &Task) -> Result<(), RpcError> {
    if task.state != TaskState::Active {
        return Err(
            RpcError::conflict(format!("the task is {}", task.state.as_str()))
                .with_data(json!({ "taskId": task.id, "state": task.state })),
        );
    }
    Ok(())
}

pub async fn get(ctx: RequestContext, p: TaskGetParams) -> Result<TaskResult, RpcError> {
    Ok(TaskResult {
        task: agent_task(&ctx, p.task_id).await?,
    })
}

pub async fn app_get(ctx: RequestContext, p: TaskGetParams) -> Result<AcceptedTask, RpcError> {
    let task = app_task(&ctx, p.task_id).await?;
    let conversations = ctx
        .hub
        .store
        .task_conversations(task.id)
        .await
        .map_err(store_failure)?;
    Ok(AcceptedTask {
        task,
        conversations,
    })
}

pub async fn list(ctx: RequestContext, p: TaskListParams) -> Result<TaskListResult, RpcError> {
    let max = ctx.hub.config.messages.page_max;
    let limit = match p.limit {
        None => max.min(50),
        Some(l) if (1..=max).contains(&l) => l,
        Some(_) => {
            return Err(invalid(
                "limit",
                format!("must be from 1 to {max} (messages.page_max)"),
            ))
        }
    };
    let mut tasks = ctx
        .hub
        .store
        .tasks_of(ctx.principal().id, p.after, limit + 1)
        .await
        .map_err(store_failure)?;
    let more = tasks.len() > limit as usize;
    tasks.truncate(limit as usize);
    let next_after = if more {
        tasks.last().map(|t| t.id)
    } else {
        None
    };
    Ok(TaskListResult { tasks, next_after })
}

pub async fn close(ctx: RequestContext, p: TaskCloseParams) -> Result<TaskResult, RpcError> {
    let task = app_task(&ctx, p.task_id).await?;
    require_active(&task)?;
    if let Some(r) = &p.reason {
        if r.chars().count() > 500 {
            return Err(invalid("reason", "must be at most 500 characters"));
        }
    }
    let now = now_millis();
    let failure = p
        .reason
        .clone()
        .map(|reason| crate::domain::task::TaskFailure {
            code: "closed".into(),
            reason: Some(reason),
        });
    let closed = Task {
        state: TaskState::Closed,
        failure: failure.clone(),
        updated_at: rfc3339(now),
        ..task.clone()
    };
    let body = serde_json::to_value(TaskPayload {
        task: closed.clone(),
    })
    .map_err(|_| RpcError::internal())?;
    let events = task
        .participant_ids()
        .into_iter()
        .map(|a| NewEvent::new(a, TaskClosed::NAME, body.clone()))
        .collect();
    let effects = Effects {
        events,
        ..Default::default()
    };
    match ctx
        .hub
        .store
        .transition_task(
            task.id,
            TaskState::Active,
            TaskState::Closed,
            failure.as_ref(),
            &effects,
            now,
        )
        .await
        .map_err(store_failure)?
    {
        Some(stored) => {
            ctx.hub.events.publish(&stored);
            Ok(TaskResult { task: closed })
        }
        None => Err(RpcError::conflict("the task is no longer active")
            .with_data(json!({ "taskId": task.id }))),
    }
}

/// Checks that every agent is a participant of the task.
fn only_task_participants(task: &Task, agents: &[Uuid]) -> Result<(), RpcError> {
    let mut seen = HashSet::new();
    for a in agents {
        if !task.has_participant(*a) {
            return Err(RpcError::forbidden(format!(
                "agent {a} is not a participant of task {}",
                task.id
            ))
            .with_data(json!({ "agentId": a, "taskId": task.id })));
        }
        if !seen.insert(*a) {
            return Err(invalid("participants", format!("names agent {a} twice")));
        }
    }
    Ok(())
}

pub async fn app_conversation_create(
    ctx: RequestContext,
    p: AppConversationCreateParams,
) -> Result<ConversationResult, RpcError> {
    let task = app_task(&ctx, p.task_id).await?;
    require_active(&task)?;
    check_name("name", &p.name)?;
    only_task_participants(&task, &p.participants)?;
    let new = NewConversation {
        id: Uuid::now_v7(),
        kind: ConversationKind::Task,
        name: Some(p.name),
        task_id: Some(task.id),
        direct_key: None,
        template_key: None,
        created_by: task.app_id,
        participants: p.participants,
        created_at: now_millis(),
    };
    let events = created_events(new.view(), &new.participants);
    match ctx
        .hub
        .store
        .create_conversation(&new, &events)
        .await
        .map_err(store_failure)?
    {
        CreatedConversation::Created(conversation, stored) => {
            ctx.hub.events.publish(&stored);
            Ok(ConversationResult { conversation })
        }
        CreatedConversation::Existing(conversation) => Ok(ConversationResult { conversation }),
    }
}

/// A conversation of one of the calling app's tasks, with that task.
async fn app_conversation(
    ctx: &RequestContext,
    id: Uuid,
) -> Result<(Conversation, Task), RpcError> {
    let hidden =
        || RpcError::not_found("conversation not found").with_data(json!({ "conversationId": id }));
    let conversation = ctx
        .hub
        .store
        .conversation(id)
        .await
        .map_err(store_failure)?
        .ok_or_else(hidden)?;
    let task_id = conversation.task_id.ok_or_else(hidden)?;
    let task = app_task(ctx, task_id).await.map_err(|_| hidden())?;
    Ok((conversation, task))
}

pub async fn app_conversation_add(
    ctx: RequestContext,
    p: AppConversationAddParams,
) -> Result<ConversationResult, RpcError> {
    let (conversation, task) = app_conversation(&ctx, p.conversation_id).await?;
    require_active(&task)?;
    only_task_participants(&task, &p.participants)?;
    let added: Vec<Uuid> = p
        .participants
        .iter()
        .copied()
        .filter(|a| !conversation.participants.contains(a))
        .collect();
    let mut after = conversation.clone();
    after.participants.extend(added.iter().copied());
    let body = serde_json::to_value(crate::protocol::tasks::ConversationPayload {
        conversation: after,
    })
    .map_err(|_| RpcError::internal())?;
    let events: Vec<NewEvent> = added
        .iter()
        .map(|a| NewEvent::new(*a, ConversationJoined::NAME, body.clone()))
        .collect();
    let stored = ctx
        .hub
        .store
        .add_participants(conversation.id, &added, &events, now_millis())
        .await
        .map_err(store_failure)?;
    ctx.hub.events.publish(&stored);
    let conversation = ctx
        .hub
        .store
        .conversation(conversation.id)
        .await
        .map_err(store_failure)?
        .ok_or_else(RpcError::internal)?;
    Ok(ConversationResult { conversation })
}

pub async fn app_message_send(
    ctx: RequestContext,
    p: MessageSendParams,
) -> Result<MessageSendResult, RpcError> {
    let (conversation, task) = app_conversation(&ctx, p.conversation_id).await?;
    require_active(&task)?;
    let out = Outgoing {
        sender: ctx.principal().id,
        origin: Origin::App,
        parts: p.parts,
        client_msg_id: p.client_msg_id,
        reply_to: p.reply_to,
    };
    store_message(&ctx, &conversation, out).await
}

pub async fn dispatch_request(
    ctx: RequestContext,
    p: DispatchRequestParams,
) -> Result<LeaseResult, RpcError> {
    let hub = ctx.hub.clone();
    let me = ctx.principal().id;
    let hidden =
        || RpcError::not_found("message not found").with_data(json!({ "messageId": p.message_id }));
    let conversation = visible_conversation(&ctx, p.conversation_id).await?;
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
