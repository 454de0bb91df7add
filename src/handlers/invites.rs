//! Redeeming an invite link (ADR 0031 §6): `agent/invite/accept`,
//! `person/invite/accept`, and a hosted app's `invite_accept` and
//! `rooms_join`, one path. The redeemer is decided by `access`
//! (`invite.accept`: its kind, that it is active, an app's installation);
//! the link lends its maker's right to the room, which is decided again
//! now (`message.create` of the maker, Filter mode, to refuse early), and
//! once more by the store inside the joining transaction, under the rows a
//! change of it takes (ADR 0031, 2026-12-02 third pass), so a link whose
//! app was suspended or lost the room is as dead as an expired one, even
//! racing the change. Every link that does not let its holder in answers
//! the same `Conflict`.

use std::sync::Arc;

use serde_json::json;

use super::store_failure;
use crate::access::{self, Target};
use crate::domain::authz::{Action, Level};
use crate::domain::conversation::{Conversation, ConversationKind};
use crate::domain::event::NewEvent;
use crate::domain::hosted::invite::{self, NOT_VALID};
use crate::domain::task::TaskState;
use crate::domain::{now_millis, Principal, PrincipalKind};
use crate::hub::{Hub, Membership, RequestContext};
use crate::protocol::invites::{InviteAcceptParams, InviteAcceptResult};
use crate::protocol::tasks::{ConversationJoined, ConversationPayload};
use crate::protocol::Notification;
use crate::rpc::RpcError;
use crate::store::{InviteJoin, InviteRecord, InviteRedemption, JoinedEvents, Redeemed};

fn not_valid() -> RpcError {
    RpcError::conflict(NOT_VALID).with_data(json!({"code": "invite_not_valid"}))
}

pub async fn accept(
    ctx: RequestContext,
    p: InviteAcceptParams,
) -> Result<InviteAcceptResult, RpcError> {
    access::check(&ctx, Action::InviteAccept, Target::hub()).await?;
    redeem(&ctx.hub, ctx.principal(), &p.link).await
}

/// The redemption itself, for a caller the decision already admitted.
pub async fn redeem(
    hub: &Arc<Hub>,
    me: Principal,
    link: &str,
) -> Result<InviteAcceptResult, RpcError> {
    let row = live_link(hub, link).await?;
    let room = hub
        .memberships
        .get(&hub.store, row.conversation_id)
        .await
        .map_err(store_failure)?
        .ok_or_else(not_valid)?;
    let Some(join) = join_of(hub, &room, &row, me).await? else {
        return answer(hub, row.conversation_id, false).await;
    };
    let redemption = InviteRedemption {
        invite: row.id,
        conversation_id: row.conversation_id,
        join,
        now: now_millis(),
    };
    let redeemed = hub.store.redeem_invite(&redemption).await;
    // Whatever the outcome: a failed call may still have committed.
    match redemption.join {
        InviteJoin::Task { .. } => hub.memberships.invalidate(row.conversation_id),
        InviteJoin::Channel { .. } => hub.memberships.invalidate_channels(),
    }
    match redeemed.map_err(store_failure)? {
        Redeemed::Joined(joined) => {
            hub.events.publish(&joined.events);
            Ok(InviteAcceptResult {
                conversation: joined.room,
                joined: true,
            })
        }
        Redeemed::Member => answer(hub, row.conversation_id, false).await,
        Redeemed::NotValid => Err(not_valid()),
        Redeemed::Full => Err(task_full()),
    }
}

/// A task room whose task has its app's `limits.maxParticipants`.
fn task_full() -> RpcError {
    RpcError::conflict(
        "the task has its app's limits.maxParticipants participants: no one more may join",
    )
    .with_data(json!({"code": "task_full"}))
}

/// The link's row when the text, the secret, its uses, its expiry and its
/// maker's right all hold; the one refusal otherwise.
async fn live_link(hub: &Arc<Hub>, text: &str) -> Result<InviteRecord, RpcError> {
    let link = invite::parse(text).ok_or_else(not_valid)?;
    let row = hub
        .store
        .invite(link.id)
        .await
        .map_err(store_failure)?
        .ok_or_else(not_valid)?;
    if !invite::matches(&row.secret_hash, &link.secret)
        || !invite::usable(row.uses_left, row.expires_at, now_millis())
    {
        return Err(not_valid());
    }
    let maker = Principal {
        id: row.created_by,
        kind: PrincipalKind::App,
    };
    let lent = access::recheck(
        hub,
        maker,
        Action::MessageCreate,
        Target::conversation(row.conversation_id),
    )
    .await
    .map_err(store_failure)?;
    if !lent {
        return Err(not_valid());
    }
    Ok(row)
}

/// How `me` joins the room, or `None` when it is a member already (no use
/// is spent then).
async fn join_of(
    hub: &Arc<Hub>,
    room: &Membership,
    row: &InviteRecord,
    me: Principal,
) -> Result<Option<InviteJoin>, RpcError> {
    match (room.kind, room.task_id) {
        (ConversationKind::Task, Some(task_id)) => {
            // The task's state first: a closed task's room answers as a
            // dead link to everyone, whatever the redeemer's kind.
            let task = hub
                .store
                .task(task_id)
                .await
                .map_err(store_failure)?
                .ok_or_else(not_valid)?;
            if task.task.state != TaskState::Active {
                return Err(not_valid());
            }
            if me.kind != PrincipalKind::Agent {
                return Err(RpcError::conflict(
                    "this invite is to a task's room, which takes agents only",
                )
                .with_data(json!({"code": "agents_only"})));
            }
            if room.participants.contains(&me.id) {
                return Ok(None);
            }
            let max_participants = hub
                .store
                .app(task.task.app_id)
                .await
                .map_err(store_failure)?
                .ok_or_else(not_valid)?
                .manifest
                .limits
                .max_participants;
            let agent = me.id;
            Ok(Some(InviteJoin::Task {
                task_id,
                agent,
                max_participants,
                joined: JoinedEvents::new(move |room| joined_events(agent, room)),
            }))
        }
        (ConversationKind::Channel, _) => {
            let held = room
                .channel
                .as_ref()
                .and_then(|c| c.levels.get(&me.id))
                .map(|(_, level)| *level);
            if held.is_some_and(|l| l >= Level::Write) {
                return Ok(None);
            }
            Ok(Some(InviteJoin::Channel {
                principal: me.id,
                granted_by: row.created_by,
            }))
        }
        // `invite_create` makes links to task rooms and channels only.
        _ => Err(not_valid()),
    }
}

/// The redeemer's `agent/conversation/joined`, telling the room as the
/// joining transaction left it.
fn joined_events(agent: uuid::Uuid, room: &Conversation) -> Vec<NewEvent> {
    let body = serde_json::to_value(ConversationPayload {
        conversation: room.clone(),
    })
    .expect("event payloads serialize");
    vec![NewEvent::new(agent, ConversationJoined::NAME, body)]
}

async fn answer(
    hub: &Arc<Hub>,
    conversation: uuid::Uuid,
    joined: bool,
) -> Result<InviteAcceptResult, RpcError> {
    let conversation = hub
        .store
        .conversation(conversation)
        .await
        .map_err(store_failure)?
        .ok_or_else(RpcError::internal)?;
    Ok(InviteAcceptResult {
        conversation,
        joined,
    })
}
