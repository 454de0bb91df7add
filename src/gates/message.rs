//! The `message_authorize` gate.

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use super::hook_answer;
use super::installation::{self, Read};
use crate::domain::conversation::Conversation;
use crate::domain::event::NewEvent;
use crate::domain::gate::{
    all_except, message_decision, message_gate, MessageDecision, MessageGate,
};
use crate::domain::message::{Message, Origin};
use crate::domain::now_millis;
use crate::domain::task::{TaskHead, TaskState};
use crate::hooks;
use crate::hub::Hub;
use crate::protocol::conversations::{
    AppMessageReceived, Delivery, DeliveryState, MessageReceived, MessageReceivedPayload,
};
use crate::protocol::tasks::{
    AppMessageAuthorize, DeliveryPayload, MessageAuthorizeCallback, MessageDelivery,
};
use crate::protocol::{Method, Notification};
use crate::store::{
    AppRecord, Effects, JobKind, MessageDecided, MessageOutcome, NewJob, StoreError, Verdict,
};
use crate::telemetry::names;

pub fn delivery_of(verdict: &Verdict, dropped: u32) -> Delivery {
    match verdict {
        Verdict::Pending => Delivery {
            state: DeliveryState::Pending,
            recipients: None,
            reason: None,
            dropped: None,
        },
        Verdict::Forwarded { recipients } => Delivery {
            state: DeliveryState::Forwarded,
            recipients: Some(*recipients),
            reason: None,
            dropped: (dropped > 0).then_some(dropped),
        },
        Verdict::Blocked { reason } => Delivery {
            state: DeliveryState::Blocked,
            recipients: None,
            reason: Some(reason.clone()),
            dropped: None,
        },
    }
}

/// Decides a pending message of a task conversation and delivers it.
/// Returns the delivery as it now stands.
pub async fn decide(
    hub: &Arc<Hub>,
    message_id: Uuid,
    job_id: Uuid,
) -> Result<Option<Delivery>, StoreError> {
    decide_rounds(hub, message_id, job_id, None).await
}

/// What the sender's handler holds when it runs the gate at once, read for
/// its own checks: the stored message, the participants it was checked
/// against, the task and its app. The first round decides on these instead
/// of reading them again; the store still refuses a forward whose task
/// closed meanwhile, and the next round reads everything afresh.
pub struct Preloaded {
    pub message: Message,
    /// The conversation as the send saw it, with the message's seq as its
    /// last (a send concurrent with this one may be newer).
    pub conversation: Conversation,
    pub task: TaskHead,
    pub app: AppRecord,
}

/// [`decide`], first on what the handler already read.
pub async fn decide_preloaded(
    hub: &Arc<Hub>,
    preloaded: Preloaded,
    job_id: Uuid,
) -> Result<Option<Delivery>, StoreError> {
    let message_id = preloaded.message.id;
    decide_rounds(hub, message_id, job_id, Some(preloaded)).await
}

async fn decide_rounds(
    hub: &Arc<Hub>,
    message_id: Uuid,
    job_id: Uuid,
    mut preloaded: Option<Preloaded>,
) -> Result<Option<Delivery>, StoreError> {
    // A forward refused because the task closed, or the app's installation
    // stopped being active, meanwhile is decided again on the store's
    // installation, and then blocks ("task is closed", "app_suspended"); a
    // second round ends it unless a resume raced it too. The bound guards
    // against a store that disagrees with itself.
    let mut read = Read::Cached;
    for _ in 0..3 {
        if let Some(done) = decide_once(hub, message_id, job_id, preloaded.take(), read).await? {
            return Ok(done);
        }
        read = Read::Fresh;
    }
    Err(StoreError::Conflict(
        "the task's state kept changing while its message was decided".into(),
    ))
}

/// `None` when the forward met a task, or an installation, that is no
/// longer active.
async fn decide_once(
    hub: &Arc<Hub>,
    message_id: Uuid,
    job_id: Uuid,
    preloaded: Option<Preloaded>,
    read: Read,
) -> Result<Option<Option<Delivery>>, StoreError> {
    let subject = match preloaded {
        Some(p) => subject_of(p),
        None => {
            let Some((message, verdict)) = hub.store.message(message_id).await? else {
                hub.store.finish_job(job_id).await?;
                return Ok(Some(None));
            };
            if verdict != Verdict::Pending {
                return finish_decided(hub, message_id, verdict, job_id).await;
            }
            load_subject(hub, message).await?
        }
    };
    let decision = ask_gate(hub, &subject, read).await?;
    let (outcome, verdict, dropped) = outcome_of(decision);
    let delivery = delivery_of(&verdict, dropped);
    let owner = subject.task.app_id;
    // Read once per decision from the installation cache; the verdict's
    // transaction refuses a forward whose app is no longer active.
    let owner = hub
        .installations
        .receives_events(owner)
        .await?
        .then_some(owner);
    let events = verdict_events(&subject.message, &outcome, &delivery, owner);
    let schedule = match (owner, &outcome) {
        (Some(app), MessageOutcome::Forward { .. }) => wake_of(app),
        _ => Vec::new(),
    };
    let effects = Effects {
        events,
        finish_job: Some(job_id),
        schedule,
        ..Default::default()
    };
    match hub
        .store
        .decide_message(message_id, &outcome, &effects, now_millis())
        .await?
    {
        // The verdict's group commit published its events already.
        MessageDecided::Applied(_) => {
            count_verdict(&verdict, dropped);
            Ok(Some(Some(delivery)))
        }
        MessageDecided::AlreadyDecided => Ok(Some(
            hub.store
                .message(message_id)
                .await?
                .map(|(_, v)| delivery_of(&v, 0)),
        )),
        MessageDecided::NotApplicable => Ok(None),
    }
}

/// A beatless hosted app is woken by the mail it receives: the job is
/// written with the verdict (ADR 0031 §8), and the store keeps it only if
/// the app is a beatless hosted app then.
fn wake_of(app: Uuid) -> Vec<NewJob> {
    vec![NewJob::new(JobKind::HostedWake, app, now_millis())]
}

/// A message decided already: only the job is finished (the store leaves a
/// decided message as it is).
async fn finish_decided(
    hub: &Arc<Hub>,
    message_id: Uuid,
    verdict: Verdict,
    job_id: Uuid,
) -> Result<Option<Option<Delivery>>, StoreError> {
    let finish_only = Effects {
        finish_job: Some(job_id),
        ..Default::default()
    };
    hub.store
        .decide_message(
            message_id,
            &MessageOutcome::Block {
                reason: String::new(),
            },
            &finish_only,
            now_millis(),
        )
        .await?;
    Ok(Some(Some(delivery_of(&verdict, 0))))
}

/// What the gate decides about: the message, its conversation (with its
/// participants), the task and the task's app.
struct Subject {
    message: Message,
    conversation: Conversation,
    task: TaskHead,
    app: AppRecord,
}

async fn load_subject(hub: &Arc<Hub>, message: Message) -> Result<Subject, StoreError> {
    let conversation = hub
        .store
        .conversation(message.conversation_id)
        .await?
        .ok_or(StoreError::NotFound)?;
    let task_id = conversation.task_id.ok_or(StoreError::NotFound)?;
    let (task, app) = super::task_and_app(hub, task_id).await?;
    Ok(Subject {
        message,
        conversation,
        task: task.head(),
        app,
    })
}

/// The subject from what the handler read.
fn subject_of(p: Preloaded) -> Subject {
    Subject {
        conversation: p.conversation,
        message: p.message,
        task: p.task,
        app: p.app,
    }
}

/// A closed task blocks, and so does an app whose installation is not
/// active; otherwise the manifest's policy decides, in-process or by
/// calling the app.
async fn ask_gate(
    hub: &Arc<Hub>,
    subject: &Subject,
    read: Read,
) -> Result<MessageDecision, StoreError> {
    let Subject {
        message,
        conversation,
        task,
        app,
    } = subject;
    if task.state != TaskState::Active {
        return Ok(MessageDecision::Block {
            reason: format!("task is {}", task.state.as_str()),
        });
    }
    let method = AppMessageAuthorize::NAME;
    if let Some(inactive) = installation::inactive(hub, task.app_id, method, read).await? {
        return Ok(MessageDecision::Block {
            reason: inactive.code().to_string(),
        });
    }
    Ok(match message_gate(&app.manifest.hooks.message_authorize) {
        MessageGate::ForwardAll => MessageDecision::Forward {
            recipients: all_except(&conversation.participants, message.sender_id),
            dropped: 0,
        },
        MessageGate::Block(reason) => MessageDecision::Block { reason },
        MessageGate::Hook { timeout_ms } => {
            let callback = MessageAuthorizeCallback {
                task_id: task.id,
                conversation: conversation.clone(),
                message: message.clone(),
                check: false,
            };
            let outcome = hooks::call_app_as::<AppMessageAuthorize>(
                hub,
                task.app_id,
                app.manifest.callback_names,
                &callback,
                Duration::from_millis(timeout_ms),
            )
            .await;
            message_decision(
                hook_answer(outcome),
                &conversation.participants,
                message.sender_id,
            )
        }
    })
}

/// The store's outcome, the verdict it records, and how many recipients the
/// app's answer named that are not participants.
fn outcome_of(decision: MessageDecision) -> (MessageOutcome, Verdict, u32) {
    match decision {
        MessageDecision::Forward {
            recipients,
            dropped,
        } => {
            let verdict = Verdict::Forwarded {
                recipients: recipients.len() as u32,
            };
            (MessageOutcome::Forward { recipients }, verdict, dropped)
        }
        MessageDecision::Block { reason } => (
            MessageOutcome::Block {
                reason: reason.clone(),
            },
            Verdict::Blocked { reason },
            0,
        ),
    }
}

/// `agent/message/received` for each recipient of a forward,
/// `app/message/received` for the task's app when it `receives` events,
/// and the delivery for an agent sender.
fn verdict_events(
    message: &Message,
    outcome: &MessageOutcome,
    delivery: &Delivery,
    receives: Option<Uuid>,
) -> Vec<NewEvent> {
    let mut events = Vec::new();
    if let MessageOutcome::Forward { recipients } = outcome {
        let body = std::sync::Arc::new(
            serde_json::to_value(MessageReceivedPayload {
                message: message.clone(),
            })
            .expect("payload serializes"),
        );
        // `{"message": M}` with M as stored: the log refers to its row.
        events.extend(NewEvent::message_copies(
            recipients,
            MessageReceived::NAME,
            message.id,
            body.clone(),
        ));
        if let Some(app) = receives {
            events.extend(NewEvent::message_copies(
                &[app],
                AppMessageReceived::NAME,
                message.id,
                body,
            ));
        }
    }
    if message.origin == Origin::Agent {
        let body = serde_json::to_value(DeliveryPayload {
            message_id: message.id,
            conversation_id: message.conversation_id,
            delivery: delivery.clone(),
        })
        .expect("payload serializes");
        events.push(NewEvent::new(
            message.sender_id,
            MessageDelivery::NAME,
            body,
        ));
    }
    events
}

/// Counted once applied: a forward that met a closed task is decided again
/// and counted then.
fn count_verdict(verdict: &Verdict, dropped: u32) {
    let label = if matches!(verdict, Verdict::Forwarded { .. }) {
        "forward"
    } else {
        "block"
    };
    metrics::counter!(names::GATE_VERDICTS, "gate" => "message_authorize", "verdict" => label)
        .increment(1);
    if dropped > 0 {
        metrics::counter!(names::RECIPIENTS_DROPPED).increment(dropped as u64);
    }
}

/// After `jobs.max_attempts` failed runs: the message is blocked.
pub async fn fail_closed(hub: &Arc<Hub>, message_id: Uuid, job_id: Uuid) -> Result<(), StoreError> {
    let reason = "infrastructure: hub_error".to_string();
    let mut events = Vec::new();
    if let Some((message, _)) = hub.store.message(message_id).await? {
        if message.origin == Origin::Agent {
            let body = serde_json::to_value(DeliveryPayload {
                message_id: message.id,
                conversation_id: message.conversation_id,
                delivery: delivery_of(
                    &Verdict::Blocked {
                        reason: reason.clone(),
                    },
                    0,
                ),
            })
            .expect("payload serializes");
            events.push(NewEvent::new(
                message.sender_id,
                MessageDelivery::NAME,
                body,
            ));
        }
    }
    let effects = Effects {
        events,
        finish_job: Some(job_id),
        ..Default::default()
    };
    // The verdict's group commit publishes its events.
    hub.store
        .decide_message(
            message_id,
            &MessageOutcome::Block { reason },
            &effects,
            now_millis(),
        )
        .await?;
    Ok(())
}
