//! Channels (ADR 0020 §2): listing the channels one reads. Sending, history
//! and typing in a channel use the conversation methods, since a channel is
//! a conversation.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{Caller, Direction, Method, RateClass};
use crate::domain::authz::Action;
use crate::domain::conversation::Conversation;
use crate::rpc::ErrorKind;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChannelListParams {
    /// Only the channels of this space.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub space_id: Option<Uuid>,
    /// Channels with a greater id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Uuid>,
    /// 1 to `messages.page_max` (the schema carries its default, 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = super::params::DEFAULT_PAGE_MAX))]
    pub limit: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChannelListResult {
    /// Conversations of kind `channel`, with `spaceId` and `state`.
    pub channels: Vec<Conversation>,
    /// Present when more may follow: pass it as `after`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after: Option<Uuid>,
}

const LIST_ERRORS: &[ErrorKind] = &[ErrorKind::InvalidParams, ErrorKind::RateLimited];
const LIST_SUMMARY: &str =
    "The channels the caller reads (a grant on the channel or its space, direct or by a group), by id.";

pub struct AgentChannelList;
impl Method for AgentChannelList {
    const NAME: &'static str = "agent/channel/list";
    const DIRECTION: Direction = Direction::ToHub;
    const CALLER: Caller = Caller::Agent;
    const ACTION: Option<Action> = Some(Action::ChannelList);
    const RATE_CLASS: RateClass = RateClass::Default;
    const SUMMARY: &'static str = LIST_SUMMARY;
    const ERRORS: &'static [ErrorKind] = LIST_ERRORS;
    type Params = ChannelListParams;
    type Result = ChannelListResult;
}

pub struct AppChannelList;
impl Method for AppChannelList {
    const NAME: &'static str = "app/channel/list";
    const DIRECTION: Direction = Direction::ToHub;
    const CALLER: Caller = Caller::App;
    const ACTION: Option<Action> = Some(Action::ChannelList);
    const RATE_CLASS: RateClass = RateClass::Default;
    const SUMMARY: &'static str = LIST_SUMMARY;
    const ERRORS: &'static [ErrorKind] = LIST_ERRORS;
    type Params = ChannelListParams;
    type Result = ChannelListResult;
}

super::twin!(PersonChannelList, AgentChannelList, "person/channel/list");
