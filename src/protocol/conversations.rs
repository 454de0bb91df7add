//! Conversations and messages between agents.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::events::Envelope;
use super::params::DEFAULT_PAGE_MAX;
use super::{Caller, Direction, Method, Notification, RateClass};
use crate::domain::authz::Action;
use crate::domain::conversation::Conversation;
use crate::domain::message::{Message, Part, DEFAULT_MAX_PARTS};
use crate::domain::validate::NO_CONTROL;
use crate::rpc::ErrorKind;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NewConversationKind {
    Direct,
    Group,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("allOf" = [{
    "if": {"properties": {"kind": {"const": "direct"}}},
    "then": {
        "properties": {"participants": {"minItems": 1, "maxItems": 1}},
        "not": {"required": ["name"], "properties": {"name": {"type": "string"}}}
    }
}]))]
pub struct ConversationCreateParams {
    pub kind: NewConversationKind,
    /// The other agents, each once and never the caller, who is added.
    /// Direct: exactly one. Group: 1 to `messages.max_group_participants`
    /// - 1 (the schema carries the default, 256).
    #[schemars(
        length(min = 1, max = DEFAULT_MAX_GROUP_PARTICIPANTS - 1),
        extend("uniqueItems" = true)
    )]
    pub participants: Vec<Uuid>,
    /// Groups only: 1 to 100 characters, no control characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 100), regex(pattern = NO_CONTROL))]
    pub name: Option<String>,
}

/// The default of `messages.max_group_participants` (the creator
/// included); the exported schema carries it.
pub const DEFAULT_MAX_GROUP_PARTICIPANTS: usize = 256;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConversationCreateResult {
    pub conversation: Conversation,
    /// False when a direct conversation for the pair already existed.
    pub created: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConversationListParams {
    /// Page after this conversation id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Uuid>,
    /// 1 to `messages.page_max` (the schema carries its default, 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = DEFAULT_PAGE_MAX))]
    pub limit: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConversationListResult {
    pub conversations: Vec<Conversation>,
    /// Pass as `after` for the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after: Option<Uuid>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConversationGetParams {
    pub conversation_id: Uuid,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConversationGetResult {
    pub conversation: Conversation,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MessageSendParams {
    pub conversation_id: Uuid,
    /// 1 to `messages.max_parts` (the schema carries its default, 16),
    /// together at most `messages.max_bytes` (default 65536; not in the
    /// schema: text counts UTF-8 bytes, data its compact JSON).
    #[schemars(length(min = 1, max = DEFAULT_MAX_PARTS))]
    pub parts: Vec<Part>,
    /// Idempotency key, unique per sender: a retry returns the original
    /// result; reuse with a different message is a ConflictError. 1 to 128
    /// characters, no control characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128), regex(pattern = NO_CONTROL))]
    pub client_msg_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<Uuid>,
    /// In a channel: the root of the thread the message answers (a message
    /// of the channel without `threadId`); absent for the main thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<Uuid>,
    /// Apps only (`app/message/send`): the card's components, 1 to
    /// `component.max_per_message` (default 25); an agent's or a person's
    /// is InvalidParams `components` (ADR 0027 §5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = crate::domain::component::DEFAULT_MAX_PER_MESSAGE))]
    pub components: Option<Vec<crate::domain::component::NewComponent>>,
    /// With `components`: `once` (default, the first interaction uses the
    /// card) or `once_per_principal` (each principal once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card_use: Option<crate::domain::component::CardUse>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryState {
    /// Recipients received `agent/message/received`.
    Forwarded,
    /// A policy blocked fan-out; `reason` says why.
    Blocked,
    /// The policy has not decided yet; the sender learns the outcome by event.
    Pending,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    pub state: DeliveryState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipients: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Recipients the app named that are not participants: never delivered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageSendResult {
    pub message: Message,
    pub delivery: Delivery,
    /// True when this answers a retry of an earlier send (same clientMsgId).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub duplicate: bool,
}

/// `after` or `before`, never both (`null` is absent).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("not" = {
    "required": ["after", "before"],
    "properties": {"after": {"type": "integer"}, "before": {"type": "integer"}}
}))]
pub struct MessageListParams {
    pub conversation_id: Uuid,
    /// Messages after this seq, oldest first.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::params::optional_cursor"
    )]
    #[schemars(range(max = 9223372036854775807u64))]
    pub after: Option<u64>,
    /// Messages before this seq (the newest ones first when paging back);
    /// the page itself is always oldest first.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::params::optional_cursor"
    )]
    #[schemars(range(max = 9223372036854775807u64))]
    pub before: Option<u64>,
    /// 1 to `messages.page_max` (the schema carries its default, 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = DEFAULT_PAGE_MAX))]
    pub limit: Option<u32>,
    /// In a channel: list the thread under this root; absent lists the
    /// main thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<Uuid>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageListResult {
    pub messages: Vec<Message>,
    /// Whether more messages lie beyond this page in the paging direction.
    pub has_more: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TypingSendParams {
    pub conversation_id: Uuid,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Empty {}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageReceivedPayload {
    pub message: Message,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConversationCreatedPayload {
    /// The conversation. For a conversation of more than
    /// [`EVENT_PARTICIPANTS_MAX`] members `participants` is left empty
    /// (read it with `agent/conversation/get`): one event per member, each
    /// listing every member, would grow with the square of the size.
    pub conversation: Conversation,
    pub participant_count: usize,
}

/// `agent/conversation/created` for each recipient, sharing one payload.
pub fn created_events(
    conversation: Conversation,
    recipients: &[Uuid],
) -> Vec<crate::domain::event::NewEvent> {
    created_events_by_kind(conversation, recipients, &[])
}

/// [`created_events`] for an audience with people: those in `people` get
/// `person/conversation/created` (ADR 0020 §1).
pub fn created_events_by_kind(
    conversation: Conversation,
    recipients: &[Uuid],
    people: &[Uuid],
) -> Vec<crate::domain::event::NewEvent> {
    let payload = std::sync::Arc::new(
        serde_json::to_value(ConversationCreatedPayload::new(conversation))
            .expect("payload serializes"),
    );
    recipients
        .iter()
        .map(|a| {
            let name = if people.contains(a) {
                PersonConversationCreated::NAME
            } else {
                ConversationCreated::NAME
            };
            crate::domain::event::NewEvent::new(*a, name, payload.clone())
        })
        .collect()
}

/// Most participants an event lists inline.
pub const EVENT_PARTICIPANTS_MAX: usize = 256;

impl ConversationCreatedPayload {
    pub fn new(mut conversation: Conversation) -> Self {
        let participant_count = conversation.participants.len();
        if participant_count > EVENT_PARTICIPANTS_MAX {
            conversation.participants.clear();
        }
        ConversationCreatedPayload {
            conversation,
            participant_count,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TypingPayload {
    pub conversation_id: Uuid,
    /// Who is composing, agent or person.
    pub principal_id: Uuid,
    /// Set when the one composing is an agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<Uuid>,
}

const READ_ERRORS: &[ErrorKind] = &[
    ErrorKind::InvalidParams,
    ErrorKind::NotFound,
    ErrorKind::RateLimited,
];

pub struct AgentConversationCreate;
impl Method for AgentConversationCreate {
    const NAME: &'static str = "agent/conversation/create";
    const DIRECTION: Direction = Direction::ToHub;
    const CALLER: Caller = Caller::Agent;
    const ACTION: Option<Action> = Some(Action::ConversationCreate);
    const RATE_CLASS: RateClass = RateClass::Write;
    const SUMMARY: &'static str =
        "Open a direct (one other participant; the pair's existing one is reused, created: false) or group conversation outside any app. Each participant must be an active agent or person, else NotFound with data.principalId.";
    const ERRORS: &'static [ErrorKind] = &[
        ErrorKind::InvalidParams,
        ErrorKind::NotFound,
        ErrorKind::RateLimited,
    ];
    type Params = ConversationCreateParams;
    type Result = ConversationCreateResult;
}

pub struct AgentConversationList;
impl Method for AgentConversationList {
    const NAME: &'static str = "agent/conversation/list";
    const DIRECTION: Direction = Direction::ToHub;
    const CALLER: Caller = Caller::Agent;
    const ACTION: Option<Action> = Some(Action::ConversationRead);
    const RATE_CLASS: RateClass = RateClass::Default;
    const SUMMARY: &'static str =
        "The caller's conversations, oldest first, paged by id (UUIDv7, so by creation).";
    const ERRORS: &'static [ErrorKind] = READ_ERRORS;
    type Params = ConversationListParams;
    type Result = ConversationListResult;
}

pub struct AgentConversationGet;
impl Method for AgentConversationGet {
    const NAME: &'static str = "agent/conversation/get";
    const DIRECTION: Direction = Direction::ToHub;
    const CALLER: Caller = Caller::Agent;
    const ACTION: Option<Action> = Some(Action::ConversationRead);
    const RATE_CLASS: RateClass = RateClass::Default;
    const SUMMARY: &'static str = "One conversation the caller takes part in.";
    const ERRORS: &'static [ErrorKind] = READ_ERRORS;
    type Params = ConversationGetParams;
    type Result = ConversationGetResult;
}

pub struct AgentMessageSend;
impl Method for AgentMessageSend {
    const NAME: &'static str = "agent/message/send";
    const DIRECTION: Direction = Direction::ToHub;
    const CALLER: Caller = Caller::Agent;
    const ACTION: Option<Action> = Some(Action::MessageCreate);
    const RATE_CLASS: RateClass = RateClass::Message;
    const SUMMARY: &'static str =
        "Send a message; it is stored first, then its conversation's policy decides who receives it.";
    const ERRORS: &'static [ErrorKind] = &[
        ErrorKind::InvalidParams,
        ErrorKind::NotFound,
        ErrorKind::Conflict,
        ErrorKind::RateLimited,
    ];
    type Params = MessageSendParams;
    type Result = MessageSendResult;
}

pub struct AgentMessageList;
impl Method for AgentMessageList {
    const NAME: &'static str = "agent/message/list";
    const DIRECTION: Direction = Direction::ToHub;
    const CALLER: Caller = Caller::Agent;
    const ACTION: Option<Action> = Some(Action::MessageRead);
    const RATE_CLASS: RateClass = RateClass::Default;
    const SUMMARY: &'static str =
        "History of a conversation as the caller sees it (sent or received), paged by seq in either direction.";
    const ERRORS: &'static [ErrorKind] = READ_ERRORS;
    type Params = MessageListParams;
    type Result = MessageListResult;
}

pub struct AgentTypingSend;
impl Method for AgentTypingSend {
    const NAME: &'static str = "agent/typing/send";
    const DIRECTION: Direction = Direction::ToHub;
    const CALLER: Caller = Caller::Agent;
    const ACTION: Option<Action> = Some(Action::TypingSend);
    const RATE_CLASS: RateClass = RateClass::Message;
    const SUMMARY: &'static str =
        "Tell the other participants the caller is composing (ephemeral: never stored or replayed).";
    const ERRORS: &'static [ErrorKind] = READ_ERRORS;
    type Params = TypingSendParams;
    type Result = Empty;
}

pub struct MessageReceived;
impl Notification for MessageReceived {
    const NAME: &'static str = "agent/message/received";
    const DIRECTION: Direction = Direction::FromHub;
    const AUDIENCE: Caller = Caller::Agent;
    const SUMMARY: &'static str = "A message was delivered to the audience.";
    const EPHEMERAL: bool = false;
    type Params = Envelope<MessageReceivedPayload>;
}

/// An agent's message reached the app that owns its task conversation, or
/// a message reached a channel the app reads (issue 18: what a hosted app,
/// beatless or not, reads its players' answers and its channels from).
/// Written with the verdict that forwards it (a channel's with the send),
/// to the app's own stream, only while its installation is active and
/// holds `events:subscribe`; never to the sender, never counted in a
/// delivery.
pub struct AppMessageReceived;
impl Notification for AppMessageReceived {
    const NAME: &'static str = "app/message/received";
    const DIRECTION: Direction = Direction::FromHub;
    const AUDIENCE: Caller = Caller::App;
    const SUMMARY: &'static str = "An agent's message in one of the app's task conversations was forwarded, or a message was sent in a channel the app reads and did not send (the app's copy, beside its recipients', counted in no delivery); payload: {message}.";
    const EPHEMERAL: bool = false;
    type Params = Envelope<MessageReceivedPayload>;
}

pub struct ConversationCreated;
impl Notification for ConversationCreated {
    const NAME: &'static str = "agent/conversation/created";
    const DIRECTION: Direction = Direction::FromHub;
    const AUDIENCE: Caller = Caller::Agent;
    const SUMMARY: &'static str = "Another principal opened a conversation that includes the audience (every participant but the creator). conversation.participants is empty above 256 members: read them with conversation/get.";
    const EPHEMERAL: bool = false;
    type Params = Envelope<ConversationCreatedPayload>;
}

pub struct TypingReceived;
impl Notification for TypingReceived {
    const NAME: &'static str = "agent/typing/received";
    const DIRECTION: Direction = Direction::FromHub;
    const AUDIENCE: Caller = Caller::Agent;
    const SUMMARY: &'static str =
        "A participant is composing a message; agentId is set when an agent types.";
    const EPHEMERAL: bool = true;
    type Params = Envelope<TypingPayload>;
}

super::twin!(
    PersonConversationCreate,
    AgentConversationCreate,
    "person/conversation/create"
);
super::twin!(
    PersonConversationList,
    AgentConversationList,
    "person/conversation/list"
);
super::twin!(
    PersonConversationGet,
    AgentConversationGet,
    "person/conversation/get"
);
super::twin!(PersonMessageSend, AgentMessageSend, "person/message/send");
super::twin!(PersonMessageList, AgentMessageList, "person/message/list");
super::twin!(PersonTypingSend, AgentTypingSend, "person/typing/send");
super::twin!(notification PersonMessageReceived, MessageReceived, "person/message/received");
super::twin!(notification PersonConversationCreated, ConversationCreated, "person/conversation/created");
super::twin!(notification PersonTypingReceived, TypingReceived, "person/typing/received");
