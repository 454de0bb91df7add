//! App-bound tasks, the app's conversations and messages inside them, the
//! three gate callbacks, and dispatch leases.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::conversations::{MessageSendParams, MessageSendResult};
use super::events::Envelope;
use super::params::DEFAULT_PAGE_MAX;
use super::{Caller, Direction, Method, Notification, RateClass};
use crate::domain::authz::Action;
use crate::domain::conversation::Conversation;
use crate::domain::gate::{DispatchAuthorizeAnswer, MessageAuthorizeAnswer, TaskCreateAnswer};
use crate::domain::lease::Lease;
use crate::domain::manifest::DEFAULT_MAX_PARTICIPANTS;
use crate::domain::message::Message;
use crate::domain::task::Task;
use crate::domain::validate::NO_CONTROL;
use crate::rpc::ErrorKind;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InitialConversation {
    /// 1 to 100 characters, no control characters.
    #[schemars(length(min = 1, max = 100), regex(pattern = NO_CONTROL))]
    pub name: String,
    /// Task participants (the initiator or invited agents), each once.
    #[schemars(extend("uniqueItems" = true))]
    pub participants: Vec<Uuid>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskRequestParams {
    pub app_id: Uuid,
    /// The other agents, each once and never the caller, who joins as
    /// initiator; with the caller at most the app's
    /// `limits.maxParticipants`, itself at most `limits.max_participants`
    /// (the schema carries that default's bound, 999 invited).
    #[schemars(
        length(max = DEFAULT_MAX_PARTICIPANTS as usize - 1),
        extend("uniqueItems" = true)
    )]
    pub invited_agent_ids: Vec<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_conversation: Option<InitialConversation>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskResult {
    pub task: Task,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AcceptedTask {
    pub task: Task,
    /// The conversations opened with the task (manifest ones first).
    pub conversations: Vec<Conversation>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskGetParams {
    pub task_id: Uuid,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskListParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Uuid>,
    /// 1 to `messages.page_max` (the schema carries its default, 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = DEFAULT_PAGE_MAX))]
    pub limit: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskListResult {
    pub tasks: Vec<Task>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after: Option<Uuid>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskCloseParams {
    pub task_id: Uuid,
    /// At most 500 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 500))]
    pub reason: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AppConversationCreateParams {
    pub task_id: Uuid,
    /// 1 to 100 characters, no control characters.
    #[schemars(length(min = 1, max = 100), regex(pattern = NO_CONTROL))]
    pub name: String,
    /// Agents already among the task's participants, each once.
    #[schemars(extend("uniqueItems" = true))]
    pub participants: Vec<Uuid>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AppConversationAddParams {
    pub conversation_id: Uuid,
    /// Task participants to add, each once; ones already in the
    /// conversation are kept.
    #[schemars(extend("uniqueItems" = true))]
    pub participants: Vec<Uuid>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConversationResult {
    pub conversation: Conversation,
}

// ---- the gate callbacks (hub to app) ----

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskCreateCallback {
    pub task: Task,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_conversation: Option<InitialConversation>,
    /// `true` only on the synthetic calls of `app check` (docs/protocol.md,
    /// "Checking an app's hooks"): the task, conversation, message and
    /// lease exist nowhere and the answer is judged, never applied. Absent
    /// on live calls.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub check: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageAuthorizeCallback {
    pub task_id: Uuid,
    pub conversation: Conversation,
    pub message: Message,
    /// `true` only on the synthetic calls of `app check` (docs/protocol.md,
    /// "Checking an app's hooks"): the task, conversation, message and
    /// lease exist nowhere and the answer is judged, never applied. Absent
    /// on live calls.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub check: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DispatchAuthorizeCallback {
    pub task_id: Uuid,
    pub lease: Lease,
    pub message: Message,
    /// `true` only on the synthetic calls of `app check` (docs/protocol.md,
    /// "Checking an app's hooks"): the task, conversation, message and
    /// lease exist nowhere and the answer is judged, never applied. Absent
    /// on live calls.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub check: bool,
}

// ---- dispatch ----

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DispatchRequestParams {
    pub conversation_id: Uuid,
    pub message_id: Uuid,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaseParams {
    pub lease_id: Uuid,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeaseResult {
    pub lease: Lease,
}

/// How the app resolves a held lease.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "decision", rename_all = "lowercase", deny_unknown_fields)]
pub enum Resolution {
    Grant {
        #[serde(
            default,
            rename = "leaseTimeoutMs",
            skip_serializing_if = "Option::is_none"
        )]
        /// At least 1; above `leases.max_timeout_ms` it is lowered to it.
        #[schemars(range(min = 1))]
        lease_timeout_ms: Option<u64>,
    },
    Deny {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DispatchResolveParams {
    pub lease_id: Uuid,
    pub resolution: Resolution,
}

// ---- events ----

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskPayload {
    pub task: Task,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConversationPayload {
    pub conversation: Conversation,
}

/// The outcome of a gated message, for its sender.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryPayload {
    pub message_id: Uuid,
    pub conversation_id: Uuid,
    pub delivery: super::conversations::Delivery,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeasePayload {
    pub lease: Lease,
}

// ---- the catalogue entries ----

macro_rules! method {
    ($ty:ident, $action:expr, $class:ident, $name:literal, $dir:ident, $caller:ident, $summary:literal, [$($err:ident),*], $params:ty, $result:ty) => {
        method!($ty, $action, $class, $name, $dir, $caller, $summary, [$($err),*], $params, $result, None);
    };
    ($ty:ident, $action:expr, $class:ident, $name:literal, $dir:ident, $caller:ident, $summary:literal, [$($err:ident),*], $params:ty, $result:ty, $moltzap_v1:expr) => {
        pub struct $ty;
        impl Method for $ty {
            const NAME: &'static str = $name;
            const MOLTZAP_V1_NAME: Option<&'static str> = $moltzap_v1;
            const DIRECTION: Direction = Direction::$dir;
            const CALLER: Caller = Caller::$caller;
            const ACTION: Option<Action> = $action;
            const RATE_CLASS: RateClass = RateClass::$class;
            const SUMMARY: &'static str = $summary;
            const ERRORS: &'static [ErrorKind] = &[$(ErrorKind::$err),*];
            type Params = $params;
            type Result = $result;
        }
    };
}

macro_rules! event {
    ($ty:ident, $name:literal, $summary:literal, $payload:ty) => {
        pub struct $ty;
        impl Notification for $ty {
            const NAME: &'static str = $name;
            const DIRECTION: Direction = Direction::FromHub;
            const AUDIENCE: Caller = Caller::Agent;
            const SUMMARY: &'static str = $summary;
            const EPHEMERAL: bool = false;
            type Params = Envelope<$payload>;
        }
    };
}

method!(AgentTaskRequest, Some(Action::TaskRequest), Write,"agent/task/request", ToHub, Agent,
    "Request an app-bound task. The task_create gate decides; the answer is the accepted task, or an error naming why it failed.",
    [InvalidParams, NotFound, Forbidden, Timeout, Unavailable, RateLimited], TaskRequestParams, AcceptedTask);
method!(
    AgentTaskGet,
    Some(Action::TaskRead),
    Default,
    "agent/task/get",
    ToHub,
    Agent,
    "A task the caller takes part in.",
    [InvalidParams, NotFound],
    TaskGetParams,
    TaskResult
);
method!(
    AgentTaskList,
    Some(Action::TaskRead),
    Default,
    "agent/task/list",
    ToHub,
    Agent,
    "The caller's tasks by id (creation order).",
    [InvalidParams],
    TaskListParams,
    TaskListResult
);
method!(
    AppTaskGet,
    Some(Action::TaskRead),
    Default,
    "app/task/get",
    ToHub,
    App,
    "A task of this app, with its conversations.",
    [InvalidParams, NotFound],
    TaskGetParams,
    AcceptedTask
);
method!(
    AppTaskClose,
    Some(Action::TaskManage),
    Write,
    "app/task/close",
    ToHub,
    App,
    "Close an active task of this app.",
    [InvalidParams, NotFound, Conflict],
    TaskCloseParams,
    TaskResult
);
method!(
    AppConversationCreate,
    Some(Action::TaskManage),
    Write,
    "app/conversation/create",
    ToHub,
    App,
    "Create a conversation inside an active task of this app, with task participants only.",
    [InvalidParams, NotFound, Forbidden, Conflict],
    AppConversationCreateParams,
    ConversationResult
);
method!(
    AppConversationAdd,
    Some(Action::TaskManage),
    Write,
    "app/conversation/add",
    ToHub,
    App,
    "Add task participants to a conversation of this app's task.",
    [InvalidParams, NotFound, Forbidden, Conflict],
    AppConversationAddParams,
    ConversationResult
);
method!(AppMessageSend, Some(Action::MessageCreate), Message,"app/message/send", ToHub, App,
    "Send a message as the app into a conversation of its own active task (every participant receives it) or into a channel it holds write on (its readers but apps receive it).",
    [InvalidParams, NotFound, Conflict], MessageSendParams, MessageSendResult);
method!(AgentDispatchRequest, Some(Action::DispatchRequest), AgentRuntime,"agent/dispatch/request", ToHub, Agent,
    "Ask for a lease to act on a message the caller received. Answers at once with the pending lease; the verdict comes as agent/dispatch/released.",
    [InvalidParams, NotFound], DispatchRequestParams, LeaseResult);
method!(
    AgentDispatchComplete,
    Some(Action::DispatchComplete),
    AgentRuntime,
    "agent/dispatch/complete",
    ToHub,
    Agent,
    "Complete a granted lease before it expires.",
    [InvalidParams, NotFound, Conflict],
    LeaseParams,
    LeaseResult
);
method!(
    AppDispatchResolve,
    Some(Action::DispatchResolve),
    AgentRuntime,
    "app/dispatch/resolve",
    ToHub,
    App,
    "Resolve a held lease of this app's task: grant or deny.",
    [InvalidParams, NotFound, Conflict],
    DispatchResolveParams,
    LeaseResult
);
method!(AppTaskCreate, None, Default,"app/task/create", FromHub, App,
    "Gate task_create: answer {verdict: {decision: \"Accept\"}} or {verdict: {decision: \"Reject\", reason}} within timeoutMs.",
    [], TaskCreateCallback, TaskCreateAnswer);
method!(AppMessageAuthorize, None, Default,"app/message/authorize", FromHub, App,
    "Gate message_authorize: answer {verdict: {decision: \"Forward\", recipients}} or {verdict: {decision: \"Block\", reason}} within timeoutMs.",
    [], MessageAuthorizeCallback, MessageAuthorizeAnswer, Some("apps/onBeforeMessageDelivery"));
method!(AppDispatchAuthorize, None, Default,"app/dispatch/authorize", FromHub, App,
    "Gate dispatch_authorize: answer {admission: {decision: \"grant\", leaseTimeoutMs?}} / \"deny\" / \"hold\" within timeoutMs.",
    [], DispatchAuthorizeCallback, DispatchAuthorizeAnswer, Some("apps/onBeforeDispatch"));

event!(
    TaskInvited,
    "agent/task/invited",
    "An accepted task includes the audience; conversations lists those the audience is in.",
    AcceptedTask
);
event!(
    TaskAccepted,
    "agent/task/accepted",
    "The audience's task request was accepted (also when the answer to agent/task/request was lost).",
    AcceptedTask
);
event!(
    TaskFailed,
    "agent/task/failed",
    "The audience's task request failed; task.failure says why.",
    TaskPayload
);
event!(
    TaskClosed,
    "agent/task/closed",
    "A task the audience takes part in was closed by its app.",
    TaskPayload
);
event!(
    ConversationJoined,
    "agent/conversation/joined",
    "The app added the audience to a conversation, or an invite link the audience redeemed did.",
    ConversationPayload
);
event!(
    MessageDelivery,
    "agent/message/delivery",
    "The gate decided the fan-out of the audience's message.",
    DeliveryPayload
);
event!(
    DispatchReleased,
    "agent/dispatch/released",
    "A lease was granted (with expiresAt) or denied (with reason).",
    LeasePayload
);
event!(
    DispatchHeld,
    "agent/dispatch/held",
    "A lease is held by the app.",
    LeasePayload
);
event!(
    DispatchExpired,
    "agent/dispatch/expired",
    "A granted lease expired before it was completed.",
    LeasePayload
);

/// Tells the app that one of its tasks became active (the app learns the
/// conversations it may now use).
pub struct TaskActivated;
impl Notification for TaskActivated {
    const NAME: &'static str = "app/task/activated";
    const DIRECTION: Direction = Direction::FromHub;
    const AUDIENCE: Caller = Caller::App;
    const SUMMARY: &'static str = "A task of the app was accepted; payload: {task, conversations}.";
    const EPHEMERAL: bool = false;
    type Params = Envelope<AcceptedTask>;
}
