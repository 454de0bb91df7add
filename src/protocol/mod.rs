//! The protocol catalogue: every method and notification switchboard speaks,
//! declared once in Rust. The router dispatches from it, `schema export` writes
//! `rpc/` and `schemas/` from it, and the SDK calls through it, so the three
//! cannot disagree.

pub mod callbacks;
pub mod channels;
pub mod commands;
pub mod conversations;
pub mod docs_tables;
pub mod events;
pub mod export;
pub mod installations;
pub mod interactions;
pub mod invites;
pub mod network;
pub mod params;
pub mod router;
pub mod tasks;
pub mod webhooks;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{de::DeserializeOwned, Serialize};

use crate::domain::authz::Action;
use crate::rpc::{ErrorKind, RpcError};
use serde_json::Value;

pub use callbacks::{app_event_types, callback_name};

/// The protocol version this hub speaks. A client may ask for a range.
pub const PROTOCOL_VERSION_MIN: u32 = 1;
pub const PROTOCOL_VERSION_MAX: u32 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// A peer calls the hub.
    ToHub,
    /// The hub calls (or notifies) a peer.
    FromHub,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::ToHub => "peer-to-hub",
            Direction::FromHub => "hub-to-peer",
        }
    }
}

/// Who may call a method (or, for hub-to-peer methods, who receives it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller {
    /// Any socket, before authentication: only the connect methods.
    Unauthenticated,
    Agent,
    App,
    /// A human (ADR 0020 §1): the `person/...` twins of the agents' methods.
    Person,
}

impl Caller {
    pub fn as_str(self) -> &'static str {
        match self {
            Caller::Unauthenticated => "unauthenticated",
            Caller::Agent => "agent",
            Caller::App => "app",
            Caller::Person => "person",
        }
    }
}

/// Which per-principal rate limit a method spends (ADR 0020 §4): one
/// limiter per class, so a flood of one kind of call cannot starve the
/// others. Configured as `ratelimit.<class>.per_second|burst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RateClass {
    /// Sends and typing.
    Message,
    /// Command invokes and autocomplete requests (ADR 0027 §1).
    Trigger,
    /// Issue 16's interactions; no method spends it yet.
    Interaction,
    /// Creations, task requests and closes, an app's conversation changes.
    Write,
    /// What an agent's runtime does in its loop: dispatch and event acks.
    AgentRuntime,
    /// Everything else (reads, identity).
    Default,
}

impl RateClass {
    pub const ALL: [RateClass; 6] = [
        RateClass::Message,
        RateClass::Trigger,
        RateClass::Interaction,
        RateClass::Write,
        RateClass::AgentRuntime,
        RateClass::Default,
    ];

    /// The name in `data.class`, the export and the configuration section.
    pub fn as_str(self) -> &'static str {
        match self {
            RateClass::Message => "message",
            RateClass::Trigger => "trigger",
            RateClass::Interaction => "interaction",
            RateClass::Write => "write",
            RateClass::AgentRuntime => "agent_runtime",
            RateClass::Default => "default",
        }
    }
}

/// A request/response method.
pub trait Method {
    const NAME: &'static str;
    /// The name seed 002 (MoltZap v1) calls this gate by, for apps whose
    /// manifest says `callbackNames: "moltzap-v1"` (ADR 0023 §8). Only the
    /// message and dispatch gates have one; params and results are the same.
    const MOLTZAP_V1_NAME: Option<&'static str> = None;
    const DIRECTION: Direction;
    const CALLER: Caller;
    /// The right a call asks for (ADR 0020 §3), named in a refusal's
    /// `data.action` and in the audit. `None`: the method needs no right
    /// (the connects, reading one's own identity) or the hub calls it.
    const ACTION: Option<Action>;
    /// The rate limit a call spends; the hub's own calls spend none.
    const RATE_CLASS: RateClass;
    const SUMMARY: &'static str;
    /// Application errors a caller can expect beyond the frame-level ones.
    const ERRORS: &'static [ErrorKind];
    type Params: Serialize + DeserializeOwned + JsonSchema + Send + 'static;
    type Result: Serialize + DeserializeOwned + JsonSchema + Send + 'static;
}

/// Declares `$person`, the `person/...` twin of the agents' `$agent` (ADR
/// 0020 §1, "twins, not reuse"): the same params, result, summary and
/// errors under the person's name, so the two cannot drift. The router
/// registers one handler under both (`Router::register_twins`).
macro_rules! twin {
    ($person:ident, $agent:ident, $name:literal) => {
        pub struct $person;
        impl $crate::protocol::Method for $person {
            const NAME: &'static str = $name;
            const DIRECTION: $crate::protocol::Direction =
                <$agent as $crate::protocol::Method>::DIRECTION;
            const CALLER: $crate::protocol::Caller = $crate::protocol::Caller::Person;
            const ACTION: Option<$crate::domain::authz::Action> =
                <$agent as $crate::protocol::Method>::ACTION;
            const RATE_CLASS: $crate::protocol::RateClass =
                <$agent as $crate::protocol::Method>::RATE_CLASS;
            const SUMMARY: &'static str = <$agent as $crate::protocol::Method>::SUMMARY;
            const ERRORS: &'static [$crate::rpc::ErrorKind] =
                <$agent as $crate::protocol::Method>::ERRORS;
            type Params = <$agent as $crate::protocol::Method>::Params;
            type Result = <$agent as $crate::protocol::Method>::Result;
        }
    };
    (notification $person:ident, $agent:ident, $name:literal) => {
        pub struct $person;
        impl $crate::protocol::Notification for $person {
            const NAME: &'static str = $name;
            const DIRECTION: $crate::protocol::Direction =
                <$agent as $crate::protocol::Notification>::DIRECTION;
            const AUDIENCE: $crate::protocol::Caller = $crate::protocol::Caller::Person;
            const SUMMARY: &'static str = <$agent as $crate::protocol::Notification>::SUMMARY;
            const EPHEMERAL: bool = <$agent as $crate::protocol::Notification>::EPHEMERAL;
            type Params = <$agent as $crate::protocol::Notification>::Params;
        }
    };
}
pub(crate) use twin;

/// A notification (no answer).
pub trait Notification {
    const NAME: &'static str;
    const DIRECTION: Direction;
    const AUDIENCE: Caller;
    const SUMMARY: &'static str;
    /// Ephemeral notifications are delivered live only and never stored.
    const EPHEMERAL: bool;
    type Params: Serialize + DeserializeOwned + JsonSchema + Send + 'static;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecKind {
    Request,
    Notification { ephemeral: bool },
}

/// The catalogue entry of one method or notification.
#[derive(Clone, Copy)]
pub struct MethodSpec {
    pub name: &'static str,
    /// The seed-002 alias the hub calls a `moltzap-v1` app by.
    pub moltzap_v1_name: Option<&'static str>,
    pub kind: SpecKind,
    pub direction: Direction,
    pub caller: Caller,
    /// `None` for notifications and methods without one.
    pub action: Option<Action>,
    pub rate_class: RateClass,
    pub summary: &'static str,
    pub errors: &'static [ErrorKind],
    pub params_schema: fn(&mut SchemaGenerator) -> Schema,
    pub params_type: fn() -> String,
    pub result_schema: Option<fn(&mut SchemaGenerator) -> Schema>,
    pub result_type: Option<fn() -> String>,
    /// Decodes params exactly as the router does before a handler runs
    /// (`params::decode` into the method's params type), dropping the value:
    /// it lets code that only has the catalogue (the fuzz targets) drive
    /// every method's decoding without naming its type.
    pub decode_params: fn(Option<Value>) -> Result<(), RpcError>,
}

fn decode_as<T: DeserializeOwned>(raw: Option<Value>) -> Result<(), RpcError> {
    params::decode::<T>(raw).map(drop)
}

impl std::fmt::Debug for MethodSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MethodSpec")
            .field("name", &self.name)
            .finish()
    }
}

fn schema_of<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

/// The params type's own schema (not a reference), so the export can list its
/// members as OpenRPC by-name params.
fn inline_schema_of<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    T::json_schema(g)
}

fn name_of<T: JsonSchema>() -> String {
    T::schema_name().into_owned()
}

pub fn method_spec<M: Method>() -> MethodSpec {
    MethodSpec {
        name: M::NAME,
        moltzap_v1_name: M::MOLTZAP_V1_NAME,
        kind: SpecKind::Request,
        direction: M::DIRECTION,
        caller: M::CALLER,
        action: M::ACTION,
        rate_class: M::RATE_CLASS,
        summary: M::SUMMARY,
        errors: M::ERRORS,
        params_schema: inline_schema_of::<M::Params>,
        params_type: name_of::<M::Params>,
        result_schema: Some(schema_of::<M::Result>),
        result_type: Some(name_of::<M::Result>),
        decode_params: decode_as::<M::Params>,
    }
}

pub fn notification_spec<N: Notification>() -> MethodSpec {
    MethodSpec {
        name: N::NAME,
        moltzap_v1_name: None,
        kind: SpecKind::Notification {
            ephemeral: N::EPHEMERAL,
        },
        direction: N::DIRECTION,
        caller: N::AUDIENCE,
        action: None,
        rate_class: RateClass::Default,
        summary: N::SUMMARY,
        errors: &[],
        params_schema: inline_schema_of::<N::Params>,
        params_type: name_of::<N::Params>,
        result_schema: None,
        result_type: None,
        decode_params: decode_as::<N::Params>,
    }
}

/// The whole protocol, in documentation order. Adding a method means adding
/// its line here; the router refuses to start when a peer-to-hub method has no
/// handler, and the drift test fails until `rpc/` is exported again.
pub fn catalogue() -> Vec<MethodSpec> {
    vec![
        method_spec::<network::AgentConnect>(),
        method_spec::<network::AppConnect>(),
        method_spec::<network::AgentIdentityGet>(),
        method_spec::<network::AppIdentityGet>(),
        method_spec::<network::AppPing>(),
        method_spec::<events::AgentEventAck>(),
        method_spec::<events::AppEventAck>(),
        method_spec::<conversations::AgentConversationCreate>(),
        method_spec::<conversations::AgentConversationList>(),
        method_spec::<conversations::AgentConversationGet>(),
        method_spec::<conversations::AgentMessageSend>(),
        method_spec::<conversations::AgentMessageList>(),
        method_spec::<conversations::AgentTypingSend>(),
        method_spec::<channels::AgentChannelList>(),
        method_spec::<network::PersonConnect>(),
        method_spec::<network::PersonIdentityGet>(),
        method_spec::<events::PersonEventAck>(),
        method_spec::<conversations::PersonConversationCreate>(),
        method_spec::<conversations::PersonConversationList>(),
        method_spec::<conversations::PersonConversationGet>(),
        method_spec::<conversations::PersonMessageSend>(),
        method_spec::<conversations::PersonMessageList>(),
        method_spec::<conversations::PersonTypingSend>(),
        method_spec::<channels::PersonChannelList>(),
        method_spec::<tasks::AgentTaskRequest>(),
        method_spec::<tasks::AgentTaskGet>(),
        method_spec::<tasks::AgentTaskList>(),
        method_spec::<tasks::AppTaskGet>(),
        method_spec::<tasks::AppTaskClose>(),
        method_spec::<tasks::AppConversationCreate>(),
        method_spec::<tasks::AppConversationAdd>(),
        method_spec::<tasks::AppMessageSend>(),
        method_spec::<channels::AppChannelList>(),
        method_spec::<tasks::AgentDispatchRequest>(),
        method_spec::<tasks::AgentDispatchComplete>(),
        method_spec::<tasks::AppDispatchResolve>(),
        method_spec::<tasks::AppTaskCreate>(),
        method_spec::<tasks::AppMessageAuthorize>(),
        method_spec::<tasks::AppDispatchAuthorize>(),
        method_spec::<commands::AgentCommandList>(),
        method_spec::<commands::AgentCommandInvoke>(),
        method_spec::<commands::AgentCommandAutocomplete>(),
        method_spec::<commands::PersonCommandList>(),
        method_spec::<commands::PersonCommandInvoke>(),
        method_spec::<commands::PersonCommandAutocomplete>(),
        method_spec::<commands::AppCommandRegister>(),
        method_spec::<commands::AppCommandRemove>(),
        method_spec::<commands::AppCommandList>(),
        method_spec::<commands::AppAutocompleteAnswer>(),
        method_spec::<commands::AppCommandAutocomplete>(),
        // cards (ADR 0027 §1)
        method_spec::<interactions::AgentInteractionCreate>(),
        method_spec::<interactions::PersonInteractionCreate>(),
        method_spec::<interactions::AppInteractionRespond>(),
        method_spec::<interactions::AppComponentUpdate>(),
        // invite links (ADR 0031 §6)
        method_spec::<invites::AgentInviteAccept>(),
        method_spec::<invites::PersonInviteAccept>(),
        notification_spec::<conversations::MessageReceived>(),
        notification_spec::<conversations::ConversationCreated>(),
        notification_spec::<conversations::TypingReceived>(),
        notification_spec::<conversations::PersonMessageReceived>(),
        notification_spec::<conversations::PersonConversationCreated>(),
        notification_spec::<conversations::PersonTypingReceived>(),
        notification_spec::<tasks::TaskInvited>(),
        notification_spec::<tasks::TaskActivated>(),
        notification_spec::<tasks::TaskAccepted>(),
        notification_spec::<tasks::TaskFailed>(),
        notification_spec::<tasks::TaskClosed>(),
        notification_spec::<tasks::ConversationJoined>(),
        notification_spec::<tasks::MessageDelivery>(),
        notification_spec::<tasks::DispatchReleased>(),
        notification_spec::<tasks::DispatchHeld>(),
        notification_spec::<tasks::DispatchExpired>(),
        notification_spec::<installations::InstallationChanged>(),
        notification_spec::<commands::CommandInvoked>(),
        // cards (ADR 0027 §1)
        notification_spec::<interactions::MessageUpdated>(),
        notification_spec::<interactions::PersonMessageUpdated>(),
        notification_spec::<interactions::InteractionCreated>(),
        // webhook subscriptions (ADR 0033)
        notification_spec::<webhooks::WebhookDisabled>(),
        // hosted apps (ADR 0031 §8)
        notification_spec::<conversations::AppMessageReceived>(),
    ]
}

pub fn find(name: &str) -> Option<MethodSpec> {
    catalogue().into_iter().find(|s| s.name == name)
}

#[cfg(test)]
mod tests;
