//! An interaction: a principal operating a component (ADR 0027 §6), and
//! the states it moves through, forward only.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

pub use crate::domain::InvokedBy;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum InteractionState {
    Received,
    /// Handed to the app's transport (issue 17's POST; the gateway way sets
    /// none: the event is the hand-over).
    Dispatched,
    Acknowledged,
    Failed,
    Rejected,
}

impl InteractionState {
    pub const ALL: [InteractionState; 5] = [
        InteractionState::Received,
        InteractionState::Dispatched,
        InteractionState::Acknowledged,
        InteractionState::Failed,
        InteractionState::Rejected,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            InteractionState::Received => "received",
            InteractionState::Dispatched => "dispatched",
            InteractionState::Acknowledged => "acknowledged",
            InteractionState::Failed => "failed",
            InteractionState::Rejected => "rejected",
        }
    }

    pub fn parse(s: &str) -> Option<InteractionState> {
        InteractionState::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// An end state: nothing moves it again.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            InteractionState::Acknowledged | InteractionState::Failed | InteractionState::Rejected
        )
    }

    /// The states a move to `self` may start from: `received → dispatched
    /// → acknowledged | failed | rejected`, and straight from `received` to
    /// an end. The store applies a move as a compare-and-swap on these.
    pub fn sources(self) -> &'static [InteractionState] {
        use InteractionState::*;
        match self {
            Received => &[],
            Dispatched => &[Received],
            Acknowledged | Failed | Rejected => &[Received, Dispatched],
        }
    }

    pub fn can_move(from: InteractionState, to: InteractionState) -> bool {
        to.sources().contains(&from)
    }
}

/// An interaction as its actor and the card's app see it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Interaction {
    pub interaction_id: Uuid,
    pub message_id: Uuid,
    pub component_id: Uuid,
    pub custom_id: String,
    pub conversation_id: Uuid,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<Uuid>,
    /// The card's app.
    pub app_id: Uuid,
    pub invoked_by: InvokedBy,
    /// A select's `{selected}` or a form's fields; absent for a button.
    /// Only the actor and the app ever see them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Value>,
    pub state: InteractionState,
    /// Why it failed, when the hub failed it: `app_inactive` (the app's
    /// installation is not active), `url_unverified`, or a delivery to the
    /// app's `interactionsUrl` that gave no reply: `timeout`, `transport`,
    /// `blocked`, `redirect`, `http_status`, `too_large`, `invalid_reply`,
    /// `inactive` (its event no longer held), `denied` (the actor's rights
    /// re-checked, or the app's reply refused), `unrecorded` (the request
    /// went out and its answer could not be recorded), `no_signing_key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// RFC 3339.
    pub created_at: String,
}
