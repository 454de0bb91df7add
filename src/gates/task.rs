//! The `task_create` gate.

use std::sync::Arc;
use std::time::Duration;

use tracing::info;
use uuid::Uuid;

use super::hook_answer;
use super::installation::{self, Read};
use crate::domain::conversation::ConversationKind;
use crate::domain::event::{rfc3339, NewEvent};
use crate::domain::gate::{task_create_gate, task_decision, Gate, TaskDecision};
use crate::domain::manifest::{Manifest, ParticipantFilter};
use crate::domain::task::{Task, TaskFailure, TaskState};
use crate::domain::{now_millis, Millis};
use crate::hooks;
use crate::hub::Hub;
use crate::protocol::conversations::created_events;
use crate::protocol::tasks::{
    AcceptedTask, AppTaskCreate, InitialConversation, TaskAccepted, TaskActivated,
    TaskCreateCallback, TaskFailed, TaskInvited, TaskPayload,
};
use crate::protocol::{Method, Notification};
use crate::store::{Effects, NewConversation, StoreError};
use crate::telemetry::names;

/// How a task request ended.
#[derive(Debug, Clone)]
pub enum TaskOutcome {
    Accepted(AcceptedTask),
    Failed(Task),
    /// Someone else decided it already; this is its current state.
    Unchanged(Task),
}

fn payload<T: serde::Serialize>(value: T) -> serde_json::Value {
    serde_json::to_value(value).expect("event payloads serialize")
}

/// Runs the `task_create` gate for a waiting task: load it, ask the gate,
/// then apply the verdict (accept or reject) with the job's finish.
pub async fn decide(
    hub: &Arc<Hub>,
    task_id: Uuid,
    job_id: Uuid,
) -> Result<Option<TaskOutcome>, StoreError> {
    let Some(record) = hub.store.task(task_id).await? else {
        hub.store.finish_job(job_id).await?;
        return Ok(None);
    };
    let task = record.task;
    if task.state != TaskState::Waiting {
        return finish_unchanged(hub, task, job_id).await.map(Some);
    }
    let app = hub
        .store
        .app(task.app_id)
        .await?
        .ok_or(StoreError::NotFound)?;
    let initial: Option<InitialConversation> = record
        .initial_conversation
        .as_deref()
        .and_then(|s| serde_json::from_str(s).ok());
    // An accept refused because the app's installation stopped being
    // active meanwhile (ADR 0023 §7) leaves the task waiting: decided again
    // on the store's installation, it fails with `app_suspended`.
    let mut outcome = None;
    for read in [Read::Cached, Read::Fresh] {
        let decision = ask_gate(hub, &task, &app.manifest, &initial, read).await?;
        let now = now_millis();
        outcome = match decision {
            TaskDecision::Accept => {
                accept(hub, &task, &app.manifest, &initial, job_id, now).await?
            }
            TaskDecision::Reject { code, reason } => {
                reject(hub, &task, code, reason, job_id, now).await?
            }
        };
        if !matches!(&outcome, Some(TaskOutcome::Unchanged(t)) if t.state == TaskState::Waiting) {
            break;
        }
    }
    Ok(outcome)
}

/// A task someone else decided already: only the job is finished.
async fn finish_unchanged(
    hub: &Arc<Hub>,
    task: Task,
    job_id: Uuid,
) -> Result<TaskOutcome, StoreError> {
    let finish_only = Effects {
        finish_job: Some(job_id),
        ..Default::default()
    };
    hub.store
        .transition_task(
            task.id,
            TaskState::Waiting,
            TaskState::Waiting,
            None,
            &finish_only,
            now_millis(),
        )
        .await?;
    Ok(TaskOutcome::Unchanged(task))
}

/// The manifest's policy, in-process or by calling the app, once the
/// app's installation is active; else the task fails with its code.
async fn ask_gate(
    hub: &Arc<Hub>,
    task: &Task,
    manifest: &Manifest,
    initial: &Option<InitialConversation>,
    read: Read,
) -> Result<TaskDecision, StoreError> {
    if let Some(inactive) =
        installation::inactive(hub, task.app_id, AppTaskCreate::NAME, read).await?
    {
        return Ok(TaskDecision::Reject {
            code: inactive.code(),
            reason: None,
        });
    }
    Ok(match task_create_gate(&manifest.hooks.task_create) {
        Gate::Decided(d) => d,
        Gate::Hook { timeout_ms } => {
            let callback = TaskCreateCallback {
                task: task.clone(),
                initial_conversation: initial.clone(),
                check: false,
            };
            let outcome = hooks::call_app_as::<AppTaskCreate>(
                hub,
                task.app_id,
                manifest.callback_names,
                &callback,
                Duration::from_millis(timeout_ms),
            )
            .await;
            task_decision(hook_answer(outcome))
        }
    })
}

/// Activates the task with its conversations and tells the app and every
/// participant, in one transaction that finishes the job.
async fn accept(
    hub: &Arc<Hub>,
    task: &Task,
    manifest: &Manifest,
    initial: &Option<InitialConversation>,
    job_id: Uuid,
    now: Millis,
) -> Result<Option<TaskOutcome>, StoreError> {
    metrics::counter!(names::GATE_VERDICTS, "gate" => "task_create", "verdict" => "accept")
        .increment(1);
    let conversations = task_conversations(task, manifest, initial, now);
    let views: Vec<_> = conversations.iter().map(NewConversation::view).collect();
    let active = Task {
        state: TaskState::Active,
        updated_at: rfc3339(now),
        ..task.clone()
    };
    let accepted = AcceptedTask {
        task: active,
        conversations: views,
    };
    let app_receives = hub.installations.receives_events(task.app_id).await?;
    let events = accepted_events(task, &accepted, app_receives);
    let effects = Effects {
        events,
        finish_job: Some(job_id),
        schedule: Vec::new(),
        conversations,
    };
    match hub
        .store
        .transition_task(
            task.id,
            TaskState::Waiting,
            TaskState::Active,
            None,
            &effects,
            now,
        )
        .await?
    {
        Some(stored) => {
            hub.events.publish(&stored);
            info!(task = %task.id, app = %task.app_id, "task accepted");
            Ok(Some(TaskOutcome::Accepted(own_view(
                &accepted,
                task.initiator_id,
            ))))
        }
        None => Ok(current(hub, task.id).await?.map(TaskOutcome::Unchanged)),
    }
}

/// The manifest's conversation templates, plus the initiator's initial
/// conversation if it asked for one.
fn task_conversations(
    task: &Task,
    manifest: &Manifest,
    initial: &Option<InitialConversation>,
    now: Millis,
) -> Vec<NewConversation> {
    let participants = task.participant_ids();
    let mut conversations: Vec<NewConversation> = manifest
        .conversations
        .iter()
        .map(|t| NewConversation {
            id: Uuid::now_v7(),
            kind: ConversationKind::Task,
            name: Some(t.name.clone()),
            task_id: Some(task.id),
            direct_key: None,
            template_key: Some(t.key.clone()),
            created_by: task.app_id,
            participants: match t.participant_filter {
                ParticipantFilter::All => participants.clone(),
                ParticipantFilter::None => Vec::new(),
            },
            created_at: now,
        })
        .collect();
    if let Some(ic) = initial {
        conversations.push(NewConversation {
            id: Uuid::now_v7(),
            kind: ConversationKind::Task,
            name: Some(ic.name.clone()),
            task_id: Some(task.id),
            direct_key: None,
            template_key: None,
            created_by: task.app_id,
            participants: ic.participants.clone(),
            created_at: now,
        });
    }
    conversations
}

/// Each agent hears of the conversations it is in, no others.
fn own_view(accepted: &AcceptedTask, agent: Uuid) -> AcceptedTask {
    AcceptedTask {
        task: accepted.task.clone(),
        conversations: accepted
            .conversations
            .iter()
            .filter(|c| c.participants.contains(&agent))
            .cloned()
            .collect(),
    }
}

/// `task/activated` for the app (when its installation lets it receive
/// events), `task/accepted` for the initiator, `task/invited` for the
/// others, and each conversation's created events.
fn accepted_events(task: &Task, accepted: &AcceptedTask, app_receives: bool) -> Vec<NewEvent> {
    let mut events = Vec::new();
    if app_receives {
        events.push(NewEvent::new(
            task.app_id,
            TaskActivated::NAME,
            payload(accepted),
        ));
    }
    for p in &task.participants {
        let event_type = if p.agent_id == task.initiator_id {
            TaskAccepted::NAME
        } else {
            TaskInvited::NAME
        };
        events.push(NewEvent::new(
            p.agent_id,
            event_type,
            payload(own_view(accepted, p.agent_id)),
        ));
    }
    for view in &accepted.conversations {
        events.extend(created_events(view.clone(), &view.participants));
    }
    events
}

/// Fails the task with the gate's code and reason.
async fn reject(
    hub: &Arc<Hub>,
    task: &Task,
    code: &'static str,
    reason: Option<String>,
    job_id: Uuid,
    now: Millis,
) -> Result<Option<TaskOutcome>, StoreError> {
    metrics::counter!(names::GATE_VERDICTS, "gate" => "task_create", "verdict" => code)
        .increment(1);
    let failure = TaskFailure {
        code: code.to_string(),
        reason,
    };
    match fail(hub, task, failure, job_id, now).await? {
        Some(failed) => {
            info!(task = %task.id, app = %task.app_id, code, "task failed");
            Ok(Some(TaskOutcome::Failed(failed)))
        }
        None => Ok(current(hub, task.id).await?.map(TaskOutcome::Unchanged)),
    }
}

async fn current(hub: &Hub, id: Uuid) -> Result<Option<Task>, StoreError> {
    Ok(hub.store.task(id).await?.map(|r| r.task))
}

/// After `jobs.max_attempts` failed runs: the task fails (`hub_error`).
pub async fn fail_closed(hub: &Arc<Hub>, task_id: Uuid, job_id: Uuid) -> Result<(), StoreError> {
    let Some(record) = hub.store.task(task_id).await? else {
        return hub.store.finish_job(job_id).await;
    };
    let failure = TaskFailure {
        code: "hub_error".into(),
        reason: None,
    };
    fail(hub, &record.task, failure, job_id, now_millis()).await?;
    Ok(())
}

/// Moves a waiting task to `failed`, tells its initiator, finishes the job.
/// `None` when the task was no longer waiting.
async fn fail(
    hub: &Arc<Hub>,
    task: &Task,
    failure: TaskFailure,
    job_id: Uuid,
    now: Millis,
) -> Result<Option<Task>, StoreError> {
    let failed = Task {
        state: TaskState::Failed,
        failure: Some(failure.clone()),
        updated_at: rfc3339(now),
        ..task.clone()
    };
    let events = vec![NewEvent::new(
        task.initiator_id,
        TaskFailed::NAME,
        payload(TaskPayload {
            task: failed.clone(),
        }),
    )];
    let effects = Effects {
        events,
        finish_job: Some(job_id),
        ..Default::default()
    };
    let stored = hub
        .store
        .transition_task(
            task.id,
            TaskState::Waiting,
            TaskState::Failed,
            Some(&failure),
            &effects,
            now,
        )
        .await?;
    Ok(stored.map(|stored| {
        hub.events.publish(&stored);
        failed
    }))
}
