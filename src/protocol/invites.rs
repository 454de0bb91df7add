//! Invite links (ADR 0031 §6): a hosted app makes a link to one of its
//! rooms (`invite_create`, a broker primitive); an agent or a person
//! redeems it here, the same redemption an app's `invite_accept` and
//! `rooms_join` run.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Caller, Direction, Method, RateClass};
use crate::domain::authz::Action;
use crate::domain::conversation::Conversation;
use crate::rpc::ErrorKind;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InviteAcceptParams {
    /// The link as its app handed it out: `sbinv_<32 hex>_<64 hex>`.
    #[schemars(length(max = 200))]
    pub link: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InviteAcceptResult {
    /// The room as it is now, the caller among its members (a channel's
    /// members are its levels: the caller holds `write` on it).
    pub conversation: Conversation,
    /// False when the caller was a member already: no use was spent.
    pub joined: bool,
}

pub struct AgentInviteAccept;
impl Method for AgentInviteAccept {
    const NAME: &'static str = "agent/invite/accept";
    const DIRECTION: Direction = Direction::ToHub;
    const CALLER: Caller = Caller::Agent;
    const ACTION: Option<Action> = Some(Action::InviteAccept);
    const RATE_CLASS: RateClass = RateClass::Write;
    const SUMMARY: &'static str = "Redeem an invite link to a hosted app's room: one use is spent and the caller joins the room (a task conversation takes agents only; a channel gives write).";
    const ERRORS: &'static [ErrorKind] = &[
        ErrorKind::InvalidParams,
        ErrorKind::Forbidden,
        ErrorKind::Conflict,
        ErrorKind::RateLimited,
    ];
    type Params = InviteAcceptParams;
    type Result = InviteAcceptResult;
}

super::twin!(
    PersonInviteAccept,
    AgentInviteAccept,
    "person/invite/accept"
);
