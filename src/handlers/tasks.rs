//! App-bound tasks: the agent's request (checked, stored with its gate job,
//! decided at once), reading, listing and closing. The app's conversations
//! are in `task_conversations`, dispatch leases in `leases`.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::json;
use uuid::Uuid;

use crate::domain::card::ReplyPolicy;

use super::store_failure;
use crate::access::{self, Target};
use crate::domain::authz::{Action, Facts, Resource};
use crate::domain::conversation::Conversation;
use crate::domain::event::{rfc3339, NewEvent};
use crate::domain::manifest::TaskCreatePolicy;
use crate::domain::now_millis;
use crate::domain::task::{Task, TaskParticipant, TaskRole, TaskState};
use crate::gates::{self, task::TaskOutcome};
use crate::hub::RequestContext;
use crate::protocol::tasks::*;
use crate::protocol::Notification;
use crate::rpc::{ErrorKind, RpcError};
use crate::store::{Effects, JobKind, NewTask};

pub(super) use super::invalid;

pub(super) fn check_name(field: &str, name: &str) -> Result<(), RpcError> {
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
        "app_suspended" | "app_not_installed" => (
            ErrorKind::Forbidden,
            format!("the app's installation is not active: {}", failure.code),
        ),
        other => (ErrorKind::Unavailable, format!("the task failed: {other}")),
    };
    RpcError::new(kind, message)
        .with_data(json!({ "taskId": task.id, "code": failure.code, "reason": failure.reason }))
}

/// `agent/task/request`: check the request, store the waiting task with its
/// claimed gate job, run the gate, answer with the verdict.
/// A hosted app's card may keep its door for its members (ADR 0031 §9):
/// a requester who shares none of its rooms is refused `not_a_member`.
async fn check_reply_policy(ctx: &RequestContext, app: Uuid, me: Uuid) -> Result<(), RpcError> {
    let store = &ctx.hub.store;
    match store
        .hosted_reply_policy(app)
        .await
        .map_err(store_failure)?
    {
        Some(ReplyPolicy::Members)
            if !store.shares_room(app, me).await.map_err(store_failure)? =>
        {
            Err(RpcError::forbidden(
                "not_a_member: this app takes tasks only from principals who share a room with it",
            )
            .with_data(serde_json::json!({"code": "not_a_member"})))
        }
        _ => Ok(()),
    }
}

pub async fn request(ctx: RequestContext, p: TaskRequestParams) -> Result<AcceptedTask, RpcError> {
    let hub = ctx.hub.clone();
    let me = ctx.principal().id;
    super::check_others(
        me,
        &p.invited_agent_ids,
        "invitedAgentIds",
        "the caller joins as initiator",
    )?;
    let target = Target::app(p.app_id).naming(&p.invited_agent_ids);
    let app = access::check(&ctx, Action::TaskRequest, target)
        .await?
        .app()?;
    check_participant_limit(&p.invited_agent_ids, app.manifest.limits.max_participants)?;
    check_reply_policy(&ctx, app.principal.id, me).await?;
    let participants = participants_of(me, &p.invited_agent_ids);
    if let Some(ic) = &p.initial_conversation {
        check_initial_conversation(ic, &participants)?;
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
        // Decided already (a retried request), or gone: wait for the
        // verdict the job runner may still apply.
        Some(TaskOutcome::Unchanged(_)) | None => await_verdict(&ctx, task_id, hook_timeout).await,
    }
}

/// With the caller, no more than the app's `limits.maxParticipants`.
fn check_participant_limit(invited: &[Uuid], max_participants: u32) -> Result<(), RpcError> {
    let max = max_participants as usize;
    let total = invited.len() + 1;
    if total > max {
        return Err(RpcError::invalid_params(format!(
            "invitedAgentIds: the task would have {total} participants; the app allows at most {max} (limits.maxParticipants)"
        ))
        .with_data(json!({ "field": "invitedAgentIds", "limit": max })));
    }
    Ok(())
}

/// The caller as initiator, then the invited agents.
fn participants_of(me: Uuid, invited: &[Uuid]) -> Vec<TaskParticipant> {
    let mut participants = vec![TaskParticipant {
        agent_id: me,
        role: TaskRole::Initiator,
    }];
    participants.extend(invited.iter().map(|a| TaskParticipant {
        agent_id: *a,
        role: TaskRole::Invited,
    }));
    participants
}

/// A valid name, and only task participants, each once.
fn check_initial_conversation(
    ic: &InitialConversation,
    participants: &[TaskParticipant],
) -> Result<(), RpcError> {
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
    Ok(())
}

/// Polls the task until it leaves `waiting` or the hook's deadline and the
/// inline grace have passed.
async fn await_verdict(
    ctx: &RequestContext,
    task_id: Uuid,
    hook_timeout: Option<u64>,
) -> Result<AcceptedTask, RpcError> {
    let hub = &ctx.hub;
    let deadline = tokio::time::Instant::now()
        + Duration::from_millis(hook_timeout.unwrap_or(0) + hub.config.jobs.inline_grace_ms);
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
                let conversations = task_conversations(ctx, task_id).await?;
                return Ok(AcceptedTask { task, conversations });
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
    let of_task = all
        .into_iter()
        .filter(|c| c.task_id == Some(task_id))
        .collect();
    super::conversations::readable(ctx, of_task).await
}

/// The task, if the caller may read it (a participant, the task's app);
/// else the same NotFound as a missing one.
pub(super) async fn readable_task(ctx: &RequestContext, id: Uuid) -> Result<Task, RpcError> {
    access::check(ctx, Action::TaskRead, Target::task(id))
        .await?
        .task()
}

pub(super) fn require_active(task: &Task) -> Result<(), RpcError> {
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
        task: readable_task(&ctx, p.task_id).await?,
    })
}

pub async fn app_get(ctx: RequestContext, p: TaskGetParams) -> Result<AcceptedTask, RpcError> {
    let task = readable_task(&ctx, p.task_id).await?;
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
    let mut listed = ctx
        .hub
        .store
        .tasks_of(ctx.principal().id, p.after, limit + 1)
        .await
        .map_err(store_failure)?;
    let more = listed.len() > limit as usize;
    listed.truncate(limit as usize);
    let next_after = if more {
        listed.last().map(|t| t.id)
    } else {
        None
    };
    let tasks = access::filter(&ctx.hub, ctx.principal(), Action::TaskRead, listed, |t| {
        let resource = Resource::Task {
            app_id: t.app_id,
            participants: t.participant_ids(),
        };
        (resource, Facts::default())
    })
    .await
    .map_err(store_failure)?;
    Ok(TaskListResult { tasks, next_after })
}

pub async fn close(ctx: RequestContext, p: TaskCloseParams) -> Result<TaskResult, RpcError> {
    let task = access::check(&ctx, Action::TaskManage, Target::task(p.task_id))
        .await?
        .task()?;
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
