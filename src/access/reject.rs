//! The one place a principal's refusal is built (ADR 0020 §3, "Hidden
//! equals missing, structurally"): from the kind of resource and the id the
//! caller sent, never from the row, so a hidden resource answers exactly
//! like a missing one. [`Refusal::rpc`] is the gateway's error; `http` turns
//! a [`Refusal`] into its REST answer.

use serde_json::{json, Value};

use super::Target;
use crate::domain::authz::{Action, Answer, Denial, Reason};
use crate::rpc::{ErrorKind, RpcError};

/// A `threadId` naming no root of the channel, hidden or missing alike, or
/// a message that is itself in a thread (ADR 0020 §2).
pub const THREAD_UNKNOWN: &str = "names no thread of this channel";

/// The protocol's name for a component that cannot be used.
pub const COMPONENT_USED: &str = "component_used";

/// How a refusal is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalKind {
    NotFound,
    Forbidden,
    /// A referenced resource (`replyTo`): bad input naming the field.
    InvalidParams {
        field: &'static str,
    },
    /// A component that cannot be used (`component_inactive`): 409
    /// `component_used`, one answer for used, disabled, expired and an
    /// unreachable app (ADR 0027 §3).
    Conflict,
}

/// A refusal, in the protocol's words, for either transport.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    pub kind: RefusalKind,
    pub message: String,
    /// The JSON-RPC error's `data`.
    pub data: Value,
    pub reason: Reason,
    pub action: Action,
}

impl Refusal {
    pub fn rpc(self) -> RpcError {
        let kind = match self.kind {
            RefusalKind::NotFound => ErrorKind::NotFound,
            RefusalKind::Forbidden => ErrorKind::Forbidden,
            RefusalKind::InvalidParams { .. } => ErrorKind::InvalidParams,
            RefusalKind::Conflict => ErrorKind::Conflict,
        };
        RpcError::new(kind, self.message).with_data(self.data)
    }
}

/// The answer to `denial` of `action` on `target`.
pub fn reject(target: &Target, action: Action, denial: Denial) -> Refusal {
    let refusal = |kind, message: String, data| Refusal {
        kind,
        message,
        data,
        reason: denial.reason,
        action,
    };
    if let Some(field) = target.field {
        let what = target.kind().as_str();
        let text = match field {
            "threadId" => THREAD_UNKNOWN.to_string(),
            _ => format!("names no {what} of this conversation"),
        };
        return refusal(
            RefusalKind::InvalidParams { field },
            format!("Invalid params: {field}: {text}"),
            json!({ "field": field }),
        );
    }
    if denial.reason == Reason::ComponentInactive {
        return refusal(
            RefusalKind::Conflict,
            "the component cannot be used: component_used".into(),
            json!({ "reason": COMPONENT_USED, "action": action.as_str() }),
        );
    }
    match (denial.answer, denial.named) {
        (Answer::NotFound, Some(named)) => {
            let noun = named_noun(action);
            refusal(
                RefusalKind::NotFound,
                format!("{noun} {named} not found"),
                json!({ id_field(noun): named }),
            )
        }
        (Answer::NotFound, None) => {
            let noun = target.noun();
            refusal(
                RefusalKind::NotFound,
                format!("{noun} not found"),
                json!({ id_field(noun): target.requested_id() }),
            )
        }
        (Answer::Forbidden, Some(named)) if denial.reason == Reason::NotTaskParticipant => {
            let task = target.requested_id();
            refusal(
                RefusalKind::Forbidden,
                format!("agent {named} is not a participant of task {task}"),
                json!({
                    "reason": denial.reason.as_str(),
                    "action": action.as_str(),
                    "agentId": named,
                    "taskId": task,
                }),
            )
        }
        (Answer::Forbidden, _) => refusal(
            RefusalKind::Forbidden,
            format!("{action} refused: {}", denial.reason.as_str()),
            json!({ "reason": denial.reason.as_str(), "action": action.as_str() }),
        ),
    }
}

/// What a request's named principals are called: invitees are agents,
/// participants agents or people.
fn named_noun(action: Action) -> &'static str {
    match action {
        Action::TaskRequest | Action::TaskManage => "agent",
        _ => "principal",
    }
}

/// `conversation` -> `conversationId`.
fn id_field(noun: &str) -> String {
    format!("{noun}Id")
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn hidden() -> Denial {
        Denial {
            reason: Reason::NoGrant,
            answer: Answer::NotFound,
            named: None,
        }
    }

    #[test]
    fn a_not_found_names_the_requested_id_under_its_kind() {
        let id = Uuid::new_v4();
        for (target, message, field) in [
            (
                Target::conversation(id),
                "conversation not found",
                "conversationId",
            ),
            (Target::task(id), "task not found", "taskId"),
            (Target::lease(id), "lease not found", "leaseId"),
            (Target::app(id), "app not found", "appId"),
            (
                Target::message(Uuid::new_v4(), id),
                "message not found",
                "messageId",
            ),
        ] {
            let e = reject(&target, Action::ConversationRead, hidden()).rpc();
            assert_eq!(e.code, -32004);
            assert_eq!(e.message, message);
            assert_eq!(*e.data.unwrap(), json!({ field: id }));
        }
    }

    #[test]
    fn a_referenced_message_is_invalid_params_naming_the_field() {
        let target = Target::message(Uuid::new_v4(), Uuid::new_v4()).field("replyTo");
        let e = reject(&target, Action::MessageRead, hidden()).rpc();
        assert_eq!(e.kind(), Some(ErrorKind::InvalidParams));
        assert_eq!(
            e.message,
            "Invalid params: replyTo: names no message of this conversation"
        );
        assert_eq!(*e.data.unwrap(), json!({ "field": "replyTo" }));
    }

    #[test]
    fn a_forbidden_carries_reason_and_action() {
        let denial = Denial {
            reason: Reason::LevelInsufficient,
            answer: Answer::Forbidden,
            named: None,
        };
        let e = reject(
            &Target::conversation(Uuid::new_v4()),
            Action::MessageCreate,
            denial,
        )
        .rpc();
        assert_eq!(e.code, -32003);
        assert_eq!(
            *e.data.unwrap(),
            json!({ "reason": "level_insufficient", "action": "message.create" })
        );
    }

    #[test]
    fn a_named_principal_is_echoed_under_the_field_noun() {
        let named = Uuid::new_v4();
        let denial = Denial {
            named: Some(named),
            ..hidden()
        };
        let e = reject(
            &Target::hub().naming(&[named]),
            Action::ConversationCreate,
            denial,
        )
        .rpc();
        assert_eq!(*e.data.unwrap(), json!({ "principalId": named }));
        let e = reject(
            &Target::app(Uuid::new_v4()).naming(&[named]),
            Action::TaskRequest,
            denial,
        )
        .rpc();
        assert_eq!(e.message, format!("agent {named} not found"));
        assert_eq!(*e.data.unwrap(), json!({ "agentId": named }));
    }
}
