//! The three gates: what a policy decides in-process, what a hook answer
//! means, and how every failure collapses to a fail-closed verdict.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::manifest::{DispatchPolicy, MessagePolicy, TaskCreatePolicy};

/// Why a hook produced no usable answer. Each maps to a stable reason code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookFailure {
    Timeout,
    /// No socket, or it closed while the call waited.
    Unavailable,
    /// The app answered with a JSON-RPC error.
    AppError,
    /// The answer did not decode.
    InvalidAnswer,
}

impl HookFailure {
    pub fn code(&self) -> &'static str {
        match self {
            HookFailure::Timeout => "timeout",
            HookFailure::Unavailable => "app_unavailable",
            HookFailure::AppError => "app_error",
            HookFailure::InvalidAnswer => "invalid_answer",
        }
    }
}

/// What the hub must do for a gate: decided already, or ask the app.
#[derive(Clone, Debug, PartialEq)]
pub enum Gate<D> {
    Decided(D),
    Hook { timeout_ms: u64 },
}

// ---- task_create ----

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskDecision {
    Accept,
    Reject {
        code: &'static str,
        reason: Option<String>,
    },
}

pub fn task_create_gate(policy: &TaskCreatePolicy) -> Gate<TaskDecision> {
    match policy {
        TaskCreatePolicy::Accept => Gate::Decided(TaskDecision::Accept),
        TaskCreatePolicy::Reject { reason } => Gate::Decided(TaskDecision::Reject {
            code: "rejected",
            reason: Some(reason.clone()),
        }),
        TaskCreatePolicy::Hook { timeout_ms } => Gate::Hook {
            timeout_ms: *timeout_ms,
        },
    }
}

/// `app/task/create` answers `{verdict: {decision: "Accept"}}` or
/// `{verdict: {decision: "Reject", reason}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskCreateAnswer {
    pub verdict: TaskVerdict,
}

// Every variant is a struct variant, even the member-less `Accept {}`:
// serde ignores extra members of a unit variant in an internally tagged
// enum, and an answer with members the hub does not know must fail closed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "decision", deny_unknown_fields)]
pub enum TaskVerdict {
    Accept {},
    Reject {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

pub fn task_decision(answer: Result<TaskCreateAnswer, HookFailure>) -> TaskDecision {
    match answer {
        Ok(TaskCreateAnswer {
            verdict: TaskVerdict::Accept {},
        }) => TaskDecision::Accept,
        Ok(TaskCreateAnswer {
            verdict: TaskVerdict::Reject { reason },
        }) => TaskDecision::Reject {
            code: "rejected",
            reason,
        },
        Err(f) => TaskDecision::Reject {
            code: f.code(),
            reason: None,
        },
    }
}

// ---- message_authorize ----

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MessageDecision {
    /// Deliver to these recipients (already filtered).
    Forward {
        recipients: Vec<Uuid>,
        dropped: u32,
    },
    Block {
        reason: String,
    },
}

pub enum MessageGate {
    /// Every participant but the sender.
    ForwardAll,
    Block(String),
    Hook {
        timeout_ms: u64,
    },
}

pub fn message_gate(policy: &MessagePolicy) -> MessageGate {
    match policy {
        MessagePolicy::ForwardAllExceptSender => MessageGate::ForwardAll,
        MessagePolicy::Deny { reason } => MessageGate::Block(reason.clone()),
        MessagePolicy::Hook { timeout_ms } => MessageGate::Hook {
            timeout_ms: *timeout_ms,
        },
    }
}

/// `app/message/authorize` answers `{verdict: {decision: "Forward",
/// recipients}}` or `{verdict: {decision: "Block", reason}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MessageAuthorizeAnswer {
    pub verdict: MessageVerdict,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "decision", deny_unknown_fields)]
pub enum MessageVerdict {
    Forward {
        recipients: Vec<Uuid>,
    },
    Block {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

/// Everyone in the conversation but the sender.
pub fn all_except(participants: &[Uuid], sender: Uuid) -> Vec<Uuid> {
    participants
        .iter()
        .copied()
        .filter(|p| *p != sender)
        .collect()
}

/// Turns a hook's answer into a decision. Forward recipients are kept only if
/// they are current participants and not the sender, each once; the rest are
/// dropped and counted. Failures block with an infrastructure reason.
pub fn message_decision(
    answer: Result<MessageAuthorizeAnswer, HookFailure>,
    participants: &[Uuid],
    sender: Uuid,
) -> MessageDecision {
    match answer {
        Ok(MessageAuthorizeAnswer {
            verdict: MessageVerdict::Forward { recipients },
        }) => {
            let mut kept = Vec::new();
            let mut dropped = 0;
            for r in recipients {
                if r != sender && participants.contains(&r) && !kept.contains(&r) {
                    kept.push(r);
                } else {
                    dropped += 1;
                }
            }
            MessageDecision::Forward {
                recipients: kept,
                dropped,
            }
        }
        Ok(MessageAuthorizeAnswer {
            verdict: MessageVerdict::Block { reason },
        }) => MessageDecision::Block {
            reason: reason.unwrap_or_else(|| "blocked by app".into()),
        },
        Err(f) => MessageDecision::Block {
            reason: format!("infrastructure: {}", f.code()),
        },
    }
}

// ---- dispatch_authorize ----

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    Grant { lease_timeout_ms: u64 },
    Deny { reason: String },
    Hold { reason: String },
}

pub fn dispatch_gate(policy: &DispatchPolicy, default_lease_ms: u64) -> Gate<Admission> {
    match policy {
        DispatchPolicy::Grant => Gate::Decided(Admission::Grant {
            lease_timeout_ms: default_lease_ms,
        }),
        DispatchPolicy::Deny { reason } => Gate::Decided(Admission::Deny {
            reason: reason.clone(),
        }),
        DispatchPolicy::Hook { timeout_ms } => Gate::Hook {
            timeout_ms: *timeout_ms,
        },
    }
}

/// `app/dispatch/authorize` answers `{admission: {decision: "grant",
/// leaseTimeoutMs?}}`, `{admission: {decision: "deny", reason}}` or
/// `{admission: {decision: "hold", reason}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DispatchAuthorizeAnswer {
    pub admission: AdmissionAnswer,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "decision", rename_all = "lowercase", deny_unknown_fields)]
pub enum AdmissionAnswer {
    Grant {
        #[serde(
            default,
            rename = "leaseTimeoutMs",
            skip_serializing_if = "Option::is_none"
        )]
        lease_timeout_ms: Option<u64>,
    },
    Deny {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    Hold {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

/// Turns an app's admission into a decision, bounding the lease length.
/// Failures deny (the documented failure path), with the reason code.
pub fn admission(
    answer: Result<DispatchAuthorizeAnswer, HookFailure>,
    default_lease_ms: u64,
    max_lease_ms: u64,
) -> Admission {
    match answer {
        Ok(a) => admission_of(a.admission, default_lease_ms, max_lease_ms),
        Err(f) => Admission::Deny {
            reason: format!("infrastructure: {}", f.code()),
        },
    }
}

pub fn admission_of(a: AdmissionAnswer, default_lease_ms: u64, max_lease_ms: u64) -> Admission {
    match a {
        AdmissionAnswer::Grant { lease_timeout_ms } => Admission::Grant {
            lease_timeout_ms: lease_timeout_ms
                .unwrap_or(default_lease_ms)
                .clamp(1, max_lease_ms),
        },
        AdmissionAnswer::Deny { reason } => Admission::Deny {
            reason: reason.unwrap_or_else(|| "denied by app".into()),
        },
        AdmissionAnswer::Hold { reason } => Admission::Hold {
            reason: reason.unwrap_or_else(|| "held by app".into()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_decode_as_the_seed_shows() {
        let a: MessageAuthorizeAnswer =
            serde_json::from_value(json!({"verdict": {"decision": "Forward", "recipients": ["22222222-2222-4222-8222-222222222222"]}})).unwrap();
        assert!(matches!(a.verdict, MessageVerdict::Forward { .. }));
        let a: MessageAuthorizeAnswer = serde_json::from_value(
            json!({"verdict": {"decision": "Block", "reason": "night phase is closed"}}),
        )
        .unwrap();
        assert_eq!(
            a.verdict,
            MessageVerdict::Block {
                reason: Some("night phase is closed".into())
            }
        );
        let d: DispatchAuthorizeAnswer = serde_json::from_value(
            json!({"admission": {"decision": "grant", "leaseTimeoutMs": 30000}}),
        )
        .unwrap();
        assert_eq!(
            d.admission,
            AdmissionAnswer::Grant {
                lease_timeout_ms: Some(30000)
            }
        );
        let d: DispatchAuthorizeAnswer = serde_json::from_value(
            json!({"admission": {"decision": "hold", "reason": "waiting for moderator state"}}),
        )
        .unwrap();
        assert!(matches!(d.admission, AdmissionAnswer::Hold { .. }));
        assert!(serde_json::from_value::<DispatchAuthorizeAnswer>(
            json!({"admission": {"decision": "maybe"}})
        )
        .is_err());
    }

    #[test]
    fn forward_keeps_only_current_participants_other_than_the_sender() {
        let (s, a, b, stranger) = (
            Uuid::new_v4(),
            Uuid::new_v4(),
            Uuid::new_v4(),
            Uuid::new_v4(),
        );
        let answer = MessageAuthorizeAnswer {
            verdict: MessageVerdict::Forward {
                recipients: vec![a, stranger, s, a, b],
            },
        };
        assert_eq!(
            message_decision(Ok(answer), &[s, a, b], s),
            MessageDecision::Forward {
                recipients: vec![a, b],
                dropped: 3
            }
        );
    }

    #[test]
    fn failures_close_every_gate() {
        for f in [
            HookFailure::Timeout,
            HookFailure::Unavailable,
            HookFailure::AppError,
            HookFailure::InvalidAnswer,
        ] {
            assert!(matches!(
                task_decision(Err(f.clone())),
                TaskDecision::Reject { .. }
            ));
            assert!(matches!(
                message_decision(Err(f.clone()), &[], Uuid::nil()),
                MessageDecision::Block { .. }
            ));
            assert!(matches!(admission(Err(f), 1, 2), Admission::Deny { .. }));
        }
    }

    #[test]
    fn lease_lengths_are_bounded() {
        let a = admission_of(
            AdmissionAnswer::Grant {
                lease_timeout_ms: Some(u64::MAX),
            },
            10,
            1000,
        );
        assert_eq!(
            a,
            Admission::Grant {
                lease_timeout_ms: 1000
            }
        );
        let a = admission_of(
            AdmissionAnswer::Grant {
                lease_timeout_ms: None,
            },
            10,
            1000,
        );
        assert_eq!(
            a,
            Admission::Grant {
                lease_timeout_ms: 10
            }
        );
    }
}
