//! Connecting a socket, and the hub's liveness probe of an app.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{Caller, Direction, Method, RateClass};
use crate::domain::authz::Action;
use crate::rpc::ErrorKind;

/// A protocol version range a client can speak; both ends inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VersionRange {
    pub min: u32,
    pub max: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentConnectParams {
    /// The key returned by `POST /api/v1/agents/register`.
    pub agent_key: String,
    /// Versions the client speaks; the hub picks the highest it shares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<VersionRange>,
    /// Replay events after this cursor. Without it delivery starts after the
    /// last acknowledged event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<super::events::Resume>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AppConnectParams {
    /// The key returned by `POST /api/v1/apps/register`.
    pub app_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<VersionRange>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<super::events::Resume>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PersonConnectParams {
    /// The key returned by `POST /api/v1/people` or `switchboard person create`.
    pub person_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<VersionRange>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<super::events::Resume>,
}

/// The limits in force on this connection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionLimits {
    /// Frames longer than this are answered with an InvalidRequest error.
    pub max_frame_bytes: u64,
    /// Frames longer than this close the socket (1009).
    pub transport_max_frame_bytes: u64,
    pub max_in_flight_requests: u32,
    pub outbound_queue_capacity: u32,
    pub rate_limit: RateLimit,
    pub heartbeat: Heartbeat,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RateLimit {
    /// Sustained calls per second per principal (all its sockets together)
    /// of the `default` rate class; each method's class is in the
    /// catalogue (`x-rate-class`).
    pub per_second: u32,
    pub burst: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Heartbeat {
    /// The hub sends a WebSocket ping this often.
    pub interval_ms: u64,
    /// A socket silent for this long (no frame, no pong) is closed (4000).
    pub timeout_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentConnectResult {
    pub agent_id: Uuid,
    pub connection_id: Uuid,
    pub protocol_version: u32,
    pub limits: ConnectionLimits,
    pub events: super::events::EventStreamInfo,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppConnectResult {
    pub app_id: Uuid,
    pub connection_id: Uuid,
    pub protocol_version: u32,
    pub limits: ConnectionLimits,
    pub events: super::events::EventStreamInfo,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PersonConnectResult {
    pub person_id: Uuid,
    pub connection_id: Uuid,
    pub protocol_version: u32,
    pub limits: ConnectionLimits,
    pub events: super::events::EventStreamInfo,
}

pub struct AgentConnect;
impl Method for AgentConnect {
    const NAME: &'static str = "agent/network/connect";
    const DIRECTION: Direction = Direction::ToHub;
    const CALLER: Caller = Caller::Unauthenticated;
    const ACTION: Option<Action> = None;
    const RATE_CLASS: RateClass = RateClass::Default;
    const SUMMARY: &'static str =
        "Authenticate this socket as an agent. Must be the first call, within gateway.auth_timeout_ms.";
    const ERRORS: &'static [ErrorKind] = &[
        ErrorKind::Unauthorized,
        ErrorKind::Conflict,
        ErrorKind::UnsupportedVersion,
        ErrorKind::ResyncRequired,
    ];
    type Params = AgentConnectParams;
    type Result = AgentConnectResult;
}

pub struct AppConnect;
impl Method for AppConnect {
    const NAME: &'static str = "app/network/connect";
    const DIRECTION: Direction = Direction::ToHub;
    const CALLER: Caller = Caller::Unauthenticated;
    const ACTION: Option<Action> = None;
    const RATE_CLASS: RateClass = RateClass::Default;
    const SUMMARY: &'static str =
        "Authenticate this socket as an app. The newest open app socket receives the app's callbacks.";
    const ERRORS: &'static [ErrorKind] = &[
        ErrorKind::Unauthorized,
        ErrorKind::Conflict,
        ErrorKind::UnsupportedVersion,
        ErrorKind::ResyncRequired,
    ];
    type Params = AppConnectParams;
    type Result = AppConnectResult;
}

/// Not a twin of `agent/network/connect`: its params and result name the
/// person (`personKey`, `personId`).
pub struct PersonConnect;
impl Method for PersonConnect {
    const NAME: &'static str = "person/network/connect";
    const DIRECTION: Direction = Direction::ToHub;
    const CALLER: Caller = Caller::Unauthenticated;
    const ACTION: Option<Action> = None;
    const RATE_CLASS: RateClass = RateClass::Default;
    const SUMMARY: &'static str =
        "Authenticate this socket as a person. Must be the first call, within gateway.auth_timeout_ms.";
    const ERRORS: &'static [ErrorKind] = &[
        ErrorKind::Unauthorized,
        ErrorKind::Conflict,
        ErrorKind::UnsupportedVersion,
        ErrorKind::ResyncRequired,
    ];
    type Params = PersonConnectParams;
    type Result = PersonConnectResult;
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PingParams {
    /// Echo this value back.
    pub nonce: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PingResult {
    pub nonce: String,
}

/// The hub's probe of an app's callback path, used by operators
/// (`POST /api/v1/apps/{appId}/ping`) to see whether an app answers callbacks
/// and how fast, through exactly the machinery every gate hook uses.
pub struct AppPing;
impl Method for AppPing {
    const NAME: &'static str = "app/network/ping";
    const DIRECTION: Direction = Direction::FromHub;
    const CALLER: Caller = Caller::App;
    const ACTION: Option<Action> = None;
    const RATE_CLASS: RateClass = RateClass::Default;
    const SUMMARY: &'static str =
        "The hub checks that the app answers callbacks; the app echoes the nonce.";
    const ERRORS: &'static [ErrorKind] = &[];
    type Params = PingParams;
    type Result = PingResult;
}

/// Params of methods that take none. Members are still refused.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentIdentity {
    /// The caller, agent or person (`person/identity/get` is the twin).
    pub principal_id: Uuid,
    /// Set when the caller is an agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<Uuid>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// RFC 3339.
    pub created_at: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppIdentity {
    pub app_id: Uuid,
    pub name: String,
    pub description: String,
    /// The manifest as the hub stored it.
    pub manifest: crate::domain::manifest::Manifest,
    /// RFC 3339.
    pub created_at: String,
}

pub struct AgentIdentityGet;
impl Method for AgentIdentityGet {
    const NAME: &'static str = "agent/identity/get";
    const DIRECTION: Direction = Direction::ToHub;
    const CALLER: Caller = Caller::Agent;
    const ACTION: Option<Action> = None;
    const RATE_CLASS: RateClass = RateClass::Default;
    const SUMMARY: &'static str =
        "The caller's own registration record (an agent's or a person's).";
    const ERRORS: &'static [ErrorKind] = &[
        ErrorKind::Unauthorized,
        ErrorKind::Forbidden,
        ErrorKind::RateLimited,
    ];
    type Params = NoParams;
    type Result = AgentIdentity;
}

super::twin!(PersonIdentityGet, AgentIdentityGet, "person/identity/get");

pub struct AppIdentityGet;
impl Method for AppIdentityGet {
    const NAME: &'static str = "app/identity/get";
    const DIRECTION: Direction = Direction::ToHub;
    const CALLER: Caller = Caller::App;
    const ACTION: Option<Action> = None;
    const RATE_CLASS: RateClass = RateClass::Default;
    const SUMMARY: &'static str =
        "The calling app's own registration record, with the manifest the hub enforces.";
    const ERRORS: &'static [ErrorKind] = &[
        ErrorKind::Unauthorized,
        ErrorKind::Forbidden,
        ErrorKind::RateLimited,
    ];
    type Params = NoParams;
    type Result = AppIdentity;
}
