//! `app check`: one synthetic call per `hook` gate of the app's manifest,
//! so its author finds a broken hook before users do. The calls carry
//! `check: true` and a task, conversation, message and lease made up for
//! the call: they are never stored, no agent hears of them, and the
//! answer is judged, never applied. Each is a probe (`hooks::Traffic`):
//! counted in `switchboard_server_calls_total` only, not in the app's
//! health figures.
//!
//! The call waits `timeoutMs` plus `hooks.check_grace_ms`, so an answer
//! after the gate's deadline is reported `late` (a live gate would have
//! failed closed with `timeout`) and only silence is `timeout`.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use super::{call_raw, record, HookOutcome, Traffic};
use crate::domain::conversation::{Conversation, ConversationKind};
use crate::domain::event::rfc3339;
use crate::domain::gate::{dispatch_gate, message_gate, task_create_gate, Gate, MessageGate};
use crate::domain::installation::InstallationState;
use crate::domain::lease::{Lease, LeaseState};
use crate::domain::message::{Message, Origin, Part};
use crate::domain::now_millis;
use crate::domain::task::{Task, TaskParticipant, TaskRole, TaskState};
use crate::hub::Hub;
use crate::protocol::tasks::{
    AppDispatchAuthorize, AppMessageAuthorize, AppTaskCreate, DispatchAuthorizeCallback,
    MessageAuthorizeCallback, TaskCreateCallback,
};
use crate::protocol::{callback_name, Method};
use crate::rpc::RpcError;
use crate::store::{AppRecord, StoreError};

/// How one gate's check ended, worst last: the exit code of `switchboard
/// app check` is the largest of its gates'.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CheckOutcome {
    /// Answered within `timeoutMs` with the gate's result type.
    Ok,
    /// Answered in time, but not with the gate's result type.
    BadResult,
    /// Answered in time with a JSON-RPC error.
    RemoteError,
    /// Answered after `timeoutMs`: a live gate would have failed closed.
    Late,
    /// No answer within `timeoutMs` plus `hooks.check_grace_ms`.
    Timeout,
    /// The socket closed while the call waited.
    Disconnected,
    /// The app has no open socket.
    Unavailable,
    /// The app's installation is not active: no call was made.
    Inactive,
}

impl CheckOutcome {
    pub const ALL: [CheckOutcome; 8] = [
        CheckOutcome::Ok,
        CheckOutcome::BadResult,
        CheckOutcome::RemoteError,
        CheckOutcome::Late,
        CheckOutcome::Timeout,
        CheckOutcome::Disconnected,
        CheckOutcome::Unavailable,
        CheckOutcome::Inactive,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CheckOutcome::Ok => "ok",
            CheckOutcome::BadResult => "bad_result",
            CheckOutcome::RemoteError => "remote_error",
            CheckOutcome::Late => "late",
            CheckOutcome::Timeout => "timeout",
            CheckOutcome::Disconnected => "disconnected",
            CheckOutcome::Unavailable => "unavailable",
            CheckOutcome::Inactive => "inactive",
        }
    }

    pub fn parse(s: &str) -> Option<CheckOutcome> {
        CheckOutcome::ALL.into_iter().find(|o| o.as_str() == s)
    }

    /// `switchboard app check`'s exit code for a gate that ended so (1 is
    /// the command's own failure: no check ran).
    pub fn exit_code(self) -> u8 {
        match self {
            CheckOutcome::Ok => 0,
            CheckOutcome::BadResult => 2,
            CheckOutcome::RemoteError => 3,
            CheckOutcome::Late => 4,
            CheckOutcome::Timeout => 5,
            CheckOutcome::Disconnected => 6,
            CheckOutcome::Unavailable => 7,
            CheckOutcome::Inactive => 8,
        }
    }
}

/// Where an answer stopped decoding: a JSON pointer into the result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DecodeError {
    pub pointer: String,
    pub message: String,
}

/// One gate's check.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GateCheck {
    /// The manifest's name of the gate (`task_create`, ...).
    pub gate: &'static str,
    /// The catalogue's method.
    pub method: &'static str,
    pub timeout_ms: u64,
    pub outcome: &'static str,
    /// How long the answer took; absent when no call was answered or made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<f64>,
    /// Whether the answer decodes as the gate's result type; absent when
    /// there was no result to decode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decodes: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decode_error: Option<DecodeError>,
    /// The app's JSON-RPC error, as it sent it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcError>,
    /// Why an answer was refused before decoding (both `result` and `error`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip)]
    pub kind: CheckOutcome,
}

/// A gate the manifest answers by hook.
struct HookGate {
    gate: &'static str,
    method: &'static str,
    wire_name: &'static str,
    timeout_ms: u64,
    params: Value,
    decode: fn(Value) -> Result<(), DecodeError>,
}

/// Checks every hook gate of `app`, one after the other (as live traffic
/// reaches an app), in the manifest's order of the gates' life: task,
/// message, dispatch.
pub async fn check_app(hub: &Hub, app: &AppRecord) -> Result<Vec<GateCheck>, StoreError> {
    let gates = hook_gates(hub, app);
    let installation = hub.installations.read_fresh(app.principal.id).await?;
    let active = installation.is_some_and(|i| i.state == InstallationState::Active);
    let mut checks = Vec::with_capacity(gates.len());
    for gate in gates {
        checks.push(if active {
            check_gate(hub, app.principal.id, gate).await
        } else {
            finding(&gate, CheckOutcome::Inactive)
        });
    }
    Ok(checks)
}

async fn check_gate(hub: &Hub, app_id: Uuid, gate: HookGate) -> GateCheck {
    let deadline = Duration::from_millis(gate.timeout_ms + hub.config.hooks.check_grace_ms);
    let (answer, elapsed) = call_raw(hub, app_id, gate.wire_name, &gate.params, deadline).await;
    let in_time = elapsed <= Duration::from_millis(gate.timeout_ms);
    let latency_ms = Some(elapsed.as_secs_f64() * 1000.0);
    let (found, label) = match answer {
        HookOutcome::Ok(value) => {
            let decoded = (gate.decode)(value);
            let kind = match (&decoded, in_time) {
                (_, false) => CheckOutcome::Late,
                (Ok(()), true) => CheckOutcome::Ok,
                (Err(_), true) => CheckOutcome::BadResult,
            };
            let label = if decoded.is_ok() { "ok" } else { "bad_result" };
            let found = GateCheck {
                latency_ms,
                decodes: Some(decoded.is_ok()),
                decode_error: decoded.err(),
                ..finding(&gate, kind)
            };
            (found, label)
        }
        HookOutcome::RemoteError(e) => {
            let found = GateCheck {
                latency_ms,
                error: Some(e),
                ..finding(&gate, late_or(in_time, CheckOutcome::RemoteError))
            };
            (found, "remote_error")
        }
        HookOutcome::BadResult(reason) => {
            let found = GateCheck {
                latency_ms,
                decodes: Some(false),
                reason: Some(reason),
                ..finding(&gate, late_or(in_time, CheckOutcome::BadResult))
            };
            (found, "bad_result")
        }
        other => {
            let kind = match other {
                HookOutcome::Disconnected => CheckOutcome::Disconnected,
                HookOutcome::Unavailable => CheckOutcome::Unavailable,
                _ => CheckOutcome::Timeout,
            };
            (finding(&gate, kind), other.label())
        }
    };
    // Counted as the call ended under the check's own deadline.
    record(hub, app_id, gate.method, label, elapsed, Traffic::Probe);
    found
}

fn late_or(in_time: bool, kind: CheckOutcome) -> CheckOutcome {
    if in_time {
        kind
    } else {
        CheckOutcome::Late
    }
}

fn finding(gate: &HookGate, kind: CheckOutcome) -> GateCheck {
    GateCheck {
        gate: gate.gate,
        method: gate.method,
        timeout_ms: gate.timeout_ms,
        outcome: kind.as_str(),
        latency_ms: None,
        decodes: None,
        decode_error: None,
        error: None,
        reason: None,
        kind,
    }
}

/// Decodes `value` as `T`, naming the member where it stopped.
fn decodes_as<T: DeserializeOwned>(value: Value) -> Result<(), DecodeError> {
    serde_path_to_error::deserialize::<_, T>(value)
        .map(|_| ())
        .map_err(|e| DecodeError {
            pointer: pointer(e.path()),
            message: e.inner().to_string(),
        })
}

fn pointer(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    path.iter()
        .filter_map(|segment| match segment {
            Segment::Seq { index } => Some(index.to_string()),
            Segment::Map { key } => Some(key.replace('~', "~0").replace('/', "~1")),
            Segment::Enum { .. } => None,
            Segment::Unknown => Some("?".to_string()),
        })
        .map(|s| format!("/{s}"))
        .collect()
}

/// The manifest's `hook` gates with their synthetic params.
fn hook_gates(hub: &Hub, app: &AppRecord) -> Vec<HookGate> {
    let made_up = Synthetic::new(app);
    let manifest = &app.manifest;
    let names = manifest.callback_names;
    let mut gates = Vec::new();
    if let Gate::Hook { timeout_ms } = task_create_gate(&manifest.hooks.task_create) {
        gates.push(HookGate {
            gate: "task_create",
            method: AppTaskCreate::NAME,
            wire_name: callback_name::<AppTaskCreate>(names),
            timeout_ms,
            params: to_params(&TaskCreateCallback {
                task: made_up.task.clone(),
                initial_conversation: None,
                check: true,
            }),
            decode: decodes_as::<<AppTaskCreate as Method>::Result>,
        });
    }
    if let MessageGate::Hook { timeout_ms } = message_gate(&manifest.hooks.message_authorize) {
        gates.push(HookGate {
            gate: "message_authorize",
            method: AppMessageAuthorize::NAME,
            wire_name: callback_name::<AppMessageAuthorize>(names),
            timeout_ms,
            params: to_params(&MessageAuthorizeCallback {
                task_id: made_up.task.id,
                conversation: made_up.conversation.clone(),
                message: made_up.message.clone(),
                check: true,
            }),
            decode: decodes_as::<<AppMessageAuthorize as Method>::Result>,
        });
    }
    let lease_ms = hub.config.leases.default_timeout_ms;
    if let Gate::Hook { timeout_ms } = dispatch_gate(&manifest.hooks.dispatch_authorize, lease_ms) {
        gates.push(HookGate {
            gate: "dispatch_authorize",
            method: AppDispatchAuthorize::NAME,
            wire_name: callback_name::<AppDispatchAuthorize>(names),
            timeout_ms,
            params: to_params(&DispatchAuthorizeCallback {
                task_id: made_up.task.id,
                lease: made_up.lease,
                message: made_up.message,
                check: true,
            }),
            decode: decodes_as::<<AppDispatchAuthorize as Method>::Result>,
        });
    }
    gates
}

fn to_params(callback: &impl Serialize) -> Value {
    serde_json::to_value(callback).expect("callback params serialize")
}

/// A task, its conversation, a message in it and a lease on it, made up
/// for the check: fresh ids that name nothing in the store, an initiator
/// and a recipient that are no agents.
struct Synthetic {
    task: Task,
    conversation: Conversation,
    message: Message,
    lease: Lease,
}

impl Synthetic {
    fn new(app: &AppRecord) -> Synthetic {
        let now = rfc3339(now_millis());
        let (initiator, recipient) = (Uuid::new_v4(), Uuid::new_v4());
        let task = Task {
            id: Uuid::new_v4(),
            app_id: app.principal.id,
            initiator_id: initiator,
            state: TaskState::Waiting,
            participants: vec![
                TaskParticipant {
                    agent_id: initiator,
                    role: TaskRole::Initiator,
                },
                TaskParticipant {
                    agent_id: recipient,
                    role: TaskRole::Invited,
                },
            ],
            failure: None,
            created_at: now.clone(),
            updated_at: now.clone(),
        };
        let template = app.manifest.conversations.first();
        let conversation = Conversation {
            id: Uuid::new_v4(),
            kind: ConversationKind::Task,
            name: Some(template.map_or("check", |t| t.name.as_str()).to_string()),
            key: template.map(|t| t.key.clone()),
            task_id: Some(task.id),
            space_id: None,
            state: None,
            created_by: app.principal.id,
            participants: vec![initiator, recipient],
            last_message_seq: 1,
            created_at: now.clone(),
        };
        let message = Message {
            id: Uuid::new_v4(),
            conversation_id: conversation.id,
            seq: 1,
            sender_id: initiator,
            origin: Origin::Agent,
            parts: vec![Part::Text {
                text: "switchboard app check".into(),
            }],
            reply_to: None,
            thread_id: None,
            reply_to_interaction: None,
            card: None,
            created_at: now.clone(),
        };
        let lease = Lease {
            lease_id: Uuid::new_v4(),
            message_id: message.id,
            conversation_id: conversation.id,
            recipient_id: recipient,
            state: LeaseState::Pending,
            reason: None,
            expires_at: None,
            created_at: now,
        };
        Synthetic {
            task,
            conversation,
            message,
            lease,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::tasks::AppTaskCreate;

    type TaskAnswer = <AppTaskCreate as Method>::Result;

    #[test]
    fn a_wrongly_typed_answer_names_the_member_at_fault() {
        let wrong = serde_json::json!({"verdict": {"decision": "Maybe"}});
        let e = decodes_as::<TaskAnswer>(wrong).unwrap_err();
        assert!(e.pointer.starts_with("/verdict"), "{e:?}");
        assert!(e.message.contains("Maybe"), "{e:?}");
        let missing = serde_json::json!({});
        let e = decodes_as::<TaskAnswer>(missing).unwrap_err();
        assert_eq!(e.pointer, "", "{e:?}");
        assert!(e.message.contains("verdict"), "{e:?}");
        let fine = serde_json::json!({"verdict": {"decision": "Accept"}});
        assert_eq!(decodes_as::<TaskAnswer>(fine), Ok(()));
    }

    #[test]
    fn every_outcome_has_its_own_exit_code_and_name() {
        let mut codes: Vec<u8> = CheckOutcome::ALL.iter().map(|o| o.exit_code()).collect();
        codes.dedup();
        assert_eq!(codes.len(), CheckOutcome::ALL.len());
        assert!(!codes.contains(&1), "1 is the command's own failure");
        for o in CheckOutcome::ALL {
            assert_eq!(CheckOutcome::parse(o.as_str()), Some(o));
        }
    }
}
