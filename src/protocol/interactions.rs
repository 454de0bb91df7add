//! Cards and interactions (ADR 0027 §1, §5, §6): operating a component,
//! the app's answer and its changes to a card, and their events.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::events::Envelope;
use super::{Caller, Direction, Method, Notification, RateClass};
use crate::domain::authz::Action;
use crate::domain::component::{self, Interaction};
use crate::domain::message::{Message, Part, DEFAULT_MAX_PARTS};
use crate::rpc::ErrorKind;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InteractionCreateParams {
    /// The card: a message of an app with components.
    pub message_id: Uuid,
    /// A component of that card.
    pub component_id: Uuid,
    /// A select's `{selected: [value]}` or a form's `{<field>: value}`;
    /// absent for a button. Only the actor and the card's app see them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Value>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InteractionResult {
    pub interaction: Interaction,
}

/// The end states an app may answer with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RespondState {
    Acknowledged,
    Rejected,
    Failed,
}

impl RespondState {
    pub fn state(self) -> component::InteractionState {
        match self {
            RespondState::Acknowledged => component::InteractionState::Acknowledged,
            RespondState::Rejected => component::InteractionState::Rejected,
            RespondState::Failed => component::InteractionState::Failed,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InteractionReply {
    /// As a send's: 1 to `messages.max_parts`, together at most
    /// `messages.max_bytes`.
    #[schemars(length(min = 1, max = DEFAULT_MAX_PARTS))]
    pub parts: Vec<Part>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InteractionRespondParams {
    pub interaction_id: Uuid,
    pub state: RespondState,
    /// A reply written as the app's message in the card's conversation and
    /// thread (`replyToInteraction` set; no agent takes a lease on it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<InteractionReply>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InteractionRespondResult {
    pub interaction: Interaction,
    /// The reply, when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
}

/// The states an app may set on its component.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ComponentSetState {
    /// Open again (a used one starts a new round).
    Active,
    Disabled,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ComponentUpdateParams {
    pub message_id: Uuid,
    pub component_id: Uuid,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ComponentSetState>,
    /// A button's new text (1 to 80 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 80))]
    pub label: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageResult {
    pub message: Message,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageUpdatedPayload {
    /// The message with its card at the version this event announces.
    pub message: Message,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InteractionCreatedPayload {
    pub interaction: Interaction,
}

macro_rules! entry {
    ($ty:ident, $action:expr, $class:ident, $name:literal, $caller:ident, $summary:literal, [$($err:ident),*], $params:ty, $result:ty) => {
        pub struct $ty;
        impl Method for $ty {
            const NAME: &'static str = $name;
            const DIRECTION: Direction = Direction::ToHub;
            const CALLER: Caller = Caller::$caller;
            const ACTION: Option<Action> = Some($action);
            const RATE_CLASS: RateClass = RateClass::$class;
            const SUMMARY: &'static str = $summary;
            const ERRORS: &'static [ErrorKind] = &[$(ErrorKind::$err),*];
            type Params = $params;
            type Result = $result;
        }
    };
}

entry!(AgentInteractionCreate, Action::InteractionCreate, Interaction, "agent/interaction/create", Agent,
    "Operate a component of an app's card the caller reads: 201-like answer {interaction: {state: \"received\"}}; the app gets app/interaction/created with the values. A used, disabled or expired component, or one of an app that can no longer answer, is ConflictError component_used.",
    [InvalidParams, NotFound, Forbidden, Conflict], InteractionCreateParams, InteractionResult);
super::twin!(
    PersonInteractionCreate,
    AgentInteractionCreate,
    "person/interaction/create"
);
entry!(AppInteractionRespond, Action::InteractionRespond, AgentRuntime, "app/interaction/respond", App,
    "Answer an interaction on one of the app's cards (components:write): acknowledged, rejected or failed, once (a second answer is ConflictError naming the state), with an optional reply message.",
    [InvalidParams, NotFound, Forbidden, Conflict], InteractionRespondParams, InteractionRespondResult);
entry!(AppComponentUpdate, Action::ComponentUpdate, Write, "app/component/update", App,
    "Change a component of one of the app's cards (components:write): its state (active or disabled) and/or a button's label; the card's version + 1 and its readers get agent/message/updated.",
    [InvalidParams, NotFound, Forbidden], ComponentUpdateParams, MessageResult);

pub struct MessageUpdated;
impl Notification for MessageUpdated {
    const NAME: &'static str = component::MESSAGE_UPDATED;
    const DIRECTION: Direction = Direction::FromHub;
    const AUDIENCE: Caller = Caller::Agent;
    const SUMMARY: &'static str = "A card the audience reads changed: payload {message} with the card at its new version (a component used, disabled or changed).";
    const EPHEMERAL: bool = false;
    type Params = Envelope<MessageUpdatedPayload>;
}
super::twin!(notification PersonMessageUpdated, MessageUpdated, "person/message/updated");

pub struct InteractionCreated;
impl Notification for InteractionCreated {
    const NAME: &'static str = component::INTERACTION_CREATED;
    const DIRECTION: Direction = Direction::FromHub;
    const AUDIENCE: Caller = Caller::App;
    const SUMMARY: &'static str = "A person or agent operated a component of one of the app's cards: payload {interaction} with its values. Answer with app/interaction/respond.";
    const EPHEMERAL: bool = false;
    type Params = Envelope<InteractionCreatedPayload>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_writes_the_catalogues_names() {
        assert_eq!(
            <PersonMessageUpdated as Notification>::NAME,
            component::PERSON_MESSAGE_UPDATED
        );
        assert_eq!(
            <MessageUpdated as Notification>::NAME,
            "agent/message/updated"
        );
        assert_eq!(
            <InteractionCreated as Notification>::NAME,
            "app/interaction/created"
        );
    }
}
