//! Commands (ADR 0027 §1, §4, §8): listing what a place offers, invoking,
//! autocomplete, and the app's own register, remove and list; the event
//! the owning app receives and the hub's autocomplete call to it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::events::Envelope;
use super::{Caller, Direction, Method, Notification, RateClass};
use crate::domain::authz::{Action, Level};
use crate::domain::command::Choice;
use crate::domain::manifest::{CommandDecl, OptionDecl};
use crate::rpc::ErrorKind;

/// A command as its callers see it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandView {
    pub command_id: Uuid,
    /// The owning app.
    pub app_id: Uuid,
    pub name: String,
    pub description: String,
    pub required_level: Level,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<OptionDecl>,
    /// The one place it is offered in; absent for a hub-wide command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<Uuid>,
    /// 1, then one more per change an upgrade made.
    pub version: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandListParams {
    /// The channel or conversation to list the commands of.
    pub conversation_id: Uuid,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandListResult {
    /// By name, then app.
    pub commands: Vec<CommandView>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandInvokeParams {
    pub command_id: Uuid,
    pub conversation_id: Uuid,
    /// A root message of the channel; the channel's main thread when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<Uuid>,
    /// By option name, each of its declared type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Map<String, Value>>,
    /// 1 to `command.client_invocation_id_max_chars` characters (the schema
    /// carries its default, 64), unique per caller and command: a repeat
    /// answers the first invocation with `duplicate: true` and writes
    /// nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = CLIENT_INVOCATION_ID_MAX))]
    pub client_invocation_id: Option<String>,
}

pub const CLIENT_INVOCATION_ID_MAX: usize = 64;

/// The 202 of an invoke: accepted, handed to the app. Nothing else
/// follows from it (no message, no agent event).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandInvokeResult {
    pub invocation_id: Uuid,
    pub command_id: Uuid,
    pub conversation_id: Uuid,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<Uuid>,
    /// Always true.
    pub accepted: bool,
    /// Present (true) when `clientInvocationId` named an earlier one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub duplicate: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandAutocompleteParams {
    pub command_id: Uuid,
    pub conversation_id: Uuid,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<Uuid>,
    /// The option being typed: declared with `autocomplete: true`.
    pub option: String,
    /// What the caller typed so far (at most
    /// `command.autocomplete_value_max_chars` characters; the schema carries
    /// its default, 100).
    #[schemars(length(max = AUTOCOMPLETE_VALUE_MAX))]
    pub value: String,
    /// The other options typed so far, checked as an invoke's are (none
    /// required yet), then passed to the app.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Map<String, Value>>,
}

pub const AUTOCOMPLETE_VALUE_MAX: usize = 100;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandAutocompleteResult {
    /// At most `command.autocomplete_max_choices`; empty when the app did
    /// not answer validly by the deadline.
    pub choices: Vec<Choice>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandRegisterParams {
    pub command: CommandDecl,
    /// Offer it only here: a channel or a conversation of the app's own
    /// task where it holds write. Hub-wide when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<Uuid>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandRegisterResult {
    pub command: CommandView,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandRemoveParams {
    pub command_id: Uuid,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandRemoveResult {
    pub command_id: Uuid,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AppCommandListParams {}

pub use crate::domain::InvokedBy;

/// One invocation, as the owning app receives it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Invocation {
    pub invocation_id: Uuid,
    pub command_id: Uuid,
    pub command_name: String,
    pub conversation_id: Uuid,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<Uuid>,
    pub invoked_by: InvokedBy,
    /// The options as given, checked against the declaration.
    pub options: Map<String, Value>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandInvokedPayload {
    pub invocation: Invocation,
}

/// The hub asks the owning app for choices (never stored).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutocompleteCallback {
    /// Answer later with `app/autocomplete/answer` under this id.
    pub request_id: Uuid,
    pub command_id: Uuid,
    pub command_name: String,
    pub option: String,
    pub value: String,
    pub options: Map<String, Value>,
    pub conversation_id: Uuid,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<Uuid>,
    pub invoked_by: InvokedBy,
    /// Milliseconds left to answer, here or later.
    pub deadline_ms: u64,
}

/// `{choices}` now, or `{deferred: true}` and `app/autocomplete/answer`
/// before the deadline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutocompleteCallbackAnswer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choices: Option<Vec<Choice>>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deferred: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AutocompleteAnswerParams {
    pub request_id: Uuid,
    pub choices: Vec<Choice>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutocompleteAnswerResult {
    /// True: the asker is answered with these choices (as checked).
    pub accepted: bool,
}

macro_rules! method {
    ($ty:ident, $action:ident, $class:ident, $name:literal, $dir:ident, $caller:ident, $summary:literal, [$($err:ident),*], $params:ty, $result:ty) => {
        pub struct $ty;
        impl Method for $ty {
            const NAME: &'static str = $name;
            const DIRECTION: Direction = Direction::$dir;
            const CALLER: Caller = Caller::$caller;
            const ACTION: Option<Action> = method!(@action $action);
            const RATE_CLASS: RateClass = RateClass::$class;
            const SUMMARY: &'static str = $summary;
            const ERRORS: &'static [ErrorKind] = &[$(ErrorKind::$err),*];
            type Params = $params;
            type Result = $result;
        }
    };
    (@action None) => { None };
    (@action $action:ident) => { Some(Action::$action) };
}

method!(AgentCommandList, CommandRead, Default, "agent/command/list", ToHub, Agent,
    "The commands offered in a channel or conversation the caller reads, whose requiredLevel it holds.",
    [InvalidParams, NotFound, RateLimited], CommandListParams, CommandListResult);
method!(AgentCommandInvoke, CommandInvoke, Trigger, "agent/command/invoke", ToHub, Agent,
    "Invoke a command in a place: the owning app gets app/command/invoked; nothing else happens (no message, no agent event).",
    [InvalidParams, NotFound, Forbidden, RateLimited], CommandInvokeParams, CommandInvokeResult);
method!(AgentCommandAutocomplete, CommandAutocomplete, Trigger, "agent/command/autocomplete", ToHub, Agent,
    "Ask the owning app for choices of an autocomplete option; empty at command.autocomplete_timeout_ms at the latest.",
    [InvalidParams, NotFound, Forbidden, RateLimited], CommandAutocompleteParams, CommandAutocompleteResult);
method!(AppCommandRegister, CommandRegister, Write, "app/command/register", ToHub, App,
    "Register a command of the app (commands:write), hub-wide or in one place where it holds write.",
    [InvalidParams, NotFound, Forbidden, Conflict, RateLimited], CommandRegisterParams, CommandRegisterResult);
method!(
    AppCommandRemove,
    CommandRegister,
    Write,
    "app/command/remove",
    ToHub,
    App,
    "Remove one of the app's commands (commands:write), manifest or API alike.",
    [NotFound, Forbidden, RateLimited],
    CommandRemoveParams,
    CommandRemoveResult
);
method!(
    AppCommandList,
    CommandRegister,
    Default,
    "app/command/list",
    ToHub,
    App,
    "The app's own live commands (commands:write).",
    [Forbidden, RateLimited],
    AppCommandListParams,
    CommandListResult
);
method!(
    AppAutocompleteAnswer,
    CommandAutocompleteRespond,
    AgentRuntime,
    "app/autocomplete/answer",
    ToHub,
    App,
    "Answer a deferred autocomplete request before its deadline (commands:write).",
    [InvalidParams, NotFound, Forbidden, RateLimited],
    AutocompleteAnswerParams,
    AutocompleteAnswerResult
);
method!(AppCommandAutocomplete, None, Default, "app/command/autocomplete", FromHub, App,
    "Autocomplete: answer {choices: [{name, value}]} within deadlineMs, or {deferred: true} and app/autocomplete/answer before it.",
    [], AutocompleteCallback, AutocompleteCallbackAnswer);

super::twin!(PersonCommandList, AgentCommandList, "person/command/list");
super::twin!(
    PersonCommandInvoke,
    AgentCommandInvoke,
    "person/command/invoke"
);
super::twin!(
    PersonCommandAutocomplete,
    AgentCommandAutocomplete,
    "person/command/autocomplete"
);

/// A command was invoked: durable, on the owning app's stream only.
pub struct CommandInvoked;
impl Notification for CommandInvoked {
    const NAME: &'static str = "app/command/invoked";
    const DIRECTION: Direction = Direction::FromHub;
    const AUDIENCE: Caller = Caller::App;
    const SUMMARY: &'static str = "One of the app's commands was invoked; payload: {invocation: {invocationId, commandId, commandName, conversationId, threadId?, invokedBy, options}}.";
    const EPHEMERAL: bool = false;
    type Params = Envelope<CommandInvokedPayload>;
}
