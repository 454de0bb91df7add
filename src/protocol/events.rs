//! The event log on the wire: resuming, acknowledging, and the envelope every
//! event notification carries.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{Caller, Direction, Method, RateClass};
use crate::domain::authz::Action;
use crate::rpc::ErrorKind;

/// Where to resume: everything after `after`, if the log's epoch is still
/// `syncEpoch`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Resume {
    #[serde(deserialize_with = "super::params::cursor")]
    #[schemars(range(max = 9223372036854775807u64))]
    pub after: u64,
    pub sync_epoch: String,
}

/// The state of the caller's log at connect.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventStreamInfo {
    /// Changes only when the log can no longer serve old cursors.
    pub sync_epoch: String,
    /// Delivery on this socket starts after this seq.
    pub start_after: u64,
    pub latest_seq: u64,
    pub acked_seq: u64,
}

/// What a ResyncRequiredError's `data` holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResyncInfo {
    pub sync_epoch: String,
    /// Oldest seq still stored (`latestSeq + 1` when none is).
    pub oldest_seq: u64,
    pub latest_seq: u64,
    pub acked_seq: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AckParams {
    /// Highest seq the client has processed.
    #[serde(deserialize_with = "super::params::cursor")]
    #[schemars(range(max = 9223372036854775807u64))]
    pub seq: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AckResult {
    pub acked_seq: u64,
}

/// The envelope of every event notification (`params`), documented once per
/// payload type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Envelope<P> {
    /// Stable id (UUIDv7): deduplicate on it.
    pub id: Uuid,
    /// Position in the audience's log; absent on ephemeral events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    #[serde(rename = "type")]
    pub event_type: String,
    /// RFC 3339, UTC, milliseconds.
    pub occurred_at: String,
    pub audience: Uuid,
    /// Present (true) only on ephemeral events.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ephemeral: bool,
    pub payload: P,
}

pub struct AgentEventAck;
impl Method for AgentEventAck {
    const NAME: &'static str = "agent/event/ack";
    const DIRECTION: Direction = Direction::ToHub;
    const CALLER: Caller = Caller::Agent;
    const ACTION: Option<Action> = Some(Action::EventAck);
    const RATE_CLASS: RateClass = RateClass::AgentRuntime;
    const SUMMARY: &'static str =
        "Record the highest processed seq; a connect without resume starts after it. It never moves back; a seq beyond the latest is InvalidParams.";
    const ERRORS: &'static [ErrorKind] = &[ErrorKind::InvalidParams];
    type Params = AckParams;
    type Result = AckResult;
}

pub struct AppEventAck;
impl Method for AppEventAck {
    const NAME: &'static str = "app/event/ack";
    const DIRECTION: Direction = Direction::ToHub;
    const CALLER: Caller = Caller::App;
    const ACTION: Option<Action> = Some(Action::EventAck);
    const RATE_CLASS: RateClass = RateClass::AgentRuntime;
    const SUMMARY: &'static str =
        "Record the highest processed seq; a connect without resume starts after it. It never moves back; a seq beyond the latest is InvalidParams.";
    const ERRORS: &'static [ErrorKind] = &[ErrorKind::InvalidParams];
    type Params = AckParams;
    type Result = AckResult;
}

super::twin!(PersonEventAck, AgentEventAck, "person/event/ack");
