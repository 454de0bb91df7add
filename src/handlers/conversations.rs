//! Conversations and messages between agents (outside apps: no gates, every
//! participant but the sender receives).

use serde::Serialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::channel_audience::wakes_of;
use super::fanout::{channel_forward, forward};
use super::{check_others, invalid, people_among, store_failure, threads};
use crate::access::{self, Target};
use crate::config::MessagesConfig;
use crate::domain::authz::{Action, Facts, Resource, ResourceKind};
use crate::domain::conversation::{direct_key, Conversation, ConversationKind};
use crate::domain::event::NewEvent;
use crate::domain::message::{self, Message, Origin, PartLimits};
use crate::domain::task::{TaskHead, TaskState};
use crate::domain::{now_millis, PrincipalKind};
use crate::gates;
use crate::hub::{Membership, RequestContext};
use crate::protocol::conversations::*;
use crate::rpc::RpcError;
use crate::store::{
    AppRecord, CreatedConversation, Fanout, InsertedMessage, JobKind, MessagePage, NewConversation,
    NewMessage, Verdict,
};

/// `agent/conversation/create`: check the participants and the kind, then
/// store the conversation (a direct one once per pair) and publish.
pub async fn create(
    ctx: RequestContext,
    p: ConversationCreateParams,
) -> Result<ConversationCreateResult, RpcError> {
    let me = ctx.principal().id;
    check_others(me, &p.participants, "participants", "the caller is added")?;
    let kind = checked_kind(&p, ctx.hub.config.messages.max_group_participants)?;
    access::check(
        &ctx,
        Action::ConversationCreate,
        Target::hub().naming(&p.participants),
    )
    .await?;
    let people = people_among(&ctx, &p.participants).await?;
    let mut participants = vec![me];
    participants.extend(p.participants.iter().copied());
    let new = NewConversation {
        id: Uuid::now_v7(),
        kind,
        name: p.name,
        task_id: None,
        direct_key: (kind == ConversationKind::Direct).then(|| direct_key(me, p.participants[0])),
        template_key: None,
        created_by: me,
        participants,
        created_at: now_millis(),
    };
    let events = created_events_by_kind(new.view(), &p.participants, &people);
    let (conversation, created) = write_conversation(&ctx, &new, &events).await?;
    Ok(ConversationCreateResult {
        conversation,
        created,
    })
}

/// Stores a new conversation with its events and publishes them; an
/// existing one (the pair's direct conversation) is returned unchanged,
/// with `false`. No cache invalidation: the id is new and misses are never
/// cached.
pub(super) async fn write_conversation(
    ctx: &RequestContext,
    new: &NewConversation,
    events: &[NewEvent],
) -> Result<(Conversation, bool), RpcError> {
    let created = ctx.hub.store.create_conversation(new, events).await;
    match created.map_err(store_failure)? {
        CreatedConversation::Created(conversation, stored) => {
            ctx.hub.events.publish(&stored);
            Ok((conversation, true))
        }
        CreatedConversation::Existing(conversation) => Ok((conversation, false)),
    }
}

/// A direct conversation has one other agent and no name; a group has 1 to
/// `messages.max_group_participants - 1` others and perhaps a valid name.
fn checked_kind(
    p: &ConversationCreateParams,
    max_group_participants: usize,
) -> Result<ConversationKind, RpcError> {
    match p.kind {
        NewConversationKind::Direct => {
            if p.participants.len() != 1 {
                return Err(invalid(
                    "participants",
                    "a direct conversation has exactly one other agent",
                ));
            }
            if p.name.is_some() {
                return Err(invalid("name", "only group conversations have a name"));
            }
            Ok(ConversationKind::Direct)
        }
        NewConversationKind::Group => {
            if p.participants.is_empty() || p.participants.len() + 1 > max_group_participants {
                return Err(invalid(
                    "participants",
                    format!(
                        "a group has 1 to {} other agents (messages.max_group_participants)",
                        max_group_participants - 1
                    ),
                ));
            }
            if let Some(name) = &p.name {
                if name.is_empty()
                    || name.chars().count() > 100
                    || name.chars().any(char::is_control)
                {
                    return Err(invalid(
                        "name",
                        "must be 1 to 100 characters without control characters",
                    ));
                }
            }
            Ok(ConversationKind::Group)
        }
    }
}

fn page_limit(ctx: &RequestContext, limit: Option<u32>) -> Result<u32, RpcError> {
    let max = ctx.hub.config.messages.page_max;
    match limit {
        None => Ok(max.min(50)),
        Some(l) if (1..=max).contains(&l) => Ok(l),
        Some(_) => Err(invalid(
            "limit",
            format!("must be from 1 to {max} (messages.page_max)"),
        )),
    }
}

pub async fn list(
    ctx: RequestContext,
    p: ConversationListParams,
) -> Result<ConversationListResult, RpcError> {
    let limit = page_limit(&ctx, p.limit)?;
    let mut listed = ctx
        .hub
        .store
        .conversations_of(ctx.principal().id, p.after, limit + 1)
        .await
        .map_err(store_failure)?;
    // The page ends where the index's does: a dropped row ends nothing.
    let more = listed.len() > limit as usize;
    listed.truncate(limit as usize);
    let next_after = if more {
        listed.last().map(|c| c.id)
    } else {
        None
    };
    Ok(ConversationListResult {
        conversations: readable(&ctx, listed).await?,
        next_after,
    })
}

/// Filter mode over listed conversations: the ones the caller may read.
pub(super) async fn readable(
    ctx: &RequestContext,
    listed: Vec<Conversation>,
) -> Result<Vec<Conversation>, RpcError> {
    let me = ctx.principal();
    access::filter(&ctx.hub, me, Action::ConversationRead, listed, |c| {
        let resource = access::place_of_conversation(c).map_or(
            Resource::Missing(ResourceKind::Conversation),
            Resource::Conversation,
        );
        (resource, Facts::default())
    })
    .await
    .map_err(store_failure)
}

pub async fn get(
    ctx: RequestContext,
    p: ConversationGetParams,
) -> Result<ConversationGetResult, RpcError> {
    let target = Target::conversation_row(p.conversation_id);
    let granted = access::check(&ctx, Action::ConversationRead, target).await?;
    Ok(ConversationGetResult {
        conversation: granted.conversation()?,
    })
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HashedSend<'a> {
    conversation_id: Uuid,
    parts: &'a [message::Part],
    reply_to: Option<Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thread_id: Option<Uuid>,
    /// A card's components and use, as posted (absent on other sends, so
    /// their hashes are what they were).
    #[serde(skip_serializing_if = "Option::is_none")]
    card: Option<&'a [crate::domain::component::NewComponent]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    card_use: Option<crate::domain::component::CardUse>,
}

/// What a sender asks for, agent or app.
pub struct Outgoing {
    pub sender: Uuid,
    pub origin: Origin,
    pub parts: Vec<message::Part>,
    pub client_msg_id: Option<String>,
    pub reply_to: Option<Uuid>,
    /// A channel thread's root, checked by [`store_message`].
    pub thread_id: Option<Uuid>,
    /// An app's card (ADR 0027 §5), checked by its handler.
    pub card: Option<super::cards::PostedCard>,
}

/// Stores a message in a conversation the sender may write to and decides
/// its fan-out: in the same transaction outside apps and for app senders;
/// through the task's `message_authorize` gate (a job run at once) for agents
/// inside tasks. The answer carries the verdict when it is ready.
pub async fn store_message(
    ctx: &RequestContext,
    conversation: &Membership,
    out: Outgoing,
) -> Result<MessageSendResult, RpcError> {
    let hub = &ctx.hub;
    check_outgoing(&hub.config.messages, &out)?;
    check_reply_to(ctx, conversation, &out).await?;
    let thread_id = threads::check_root(ctx, conversation, out.thread_id).await?;
    let id = Uuid::now_v7();
    let (fanout, gated) = fanout_of(ctx, conversation, &out).await?;
    let job = gated
        .as_ref()
        .map(|g| gates::inline_job(hub, JobKind::MessageAuthorize, id, g.hook_timeout_ms));
    let mut jobs = wakes_of(&fanout);
    jobs.extend(job.clone());
    let request_hash = request_hash(conversation, &out)?;
    let new = NewMessage {
        id,
        conversation_id: conversation.id,
        sender_id: out.sender,
        origin: out.origin,
        parts: out.parts,
        reply_to: out.reply_to,
        thread_id,
        in_channel: conversation.kind == ConversationKind::Channel,
        client_msg_id: out.client_msg_id.clone(),
        request_hash: Some(request_hash.clone()),
        created_at: now_millis(),
        fanout,
        jobs,
        card: out.card.as_ref().map(|c| c.stored.clone()),
        reply_to_interaction: None,
    };
    let alone = new.writes_alone();
    match hub
        .store
        .insert_message(&new)
        .await
        .map_err(store_failure)?
    {
        // The send's group commit published its events already; a card
        // was written alone, and is published here.
        InsertedMessage::Inserted {
            message,
            verdict,
            events,
        } => {
            if alone {
                hub.events.publish(&events);
            }
            let delivery = gates::message::delivery_of(&verdict, 0);
            let delivery = match (job, gated) {
                (Some(job), Some(gated)) => {
                    let at_send = conversation.conversation_at(message.seq);
                    gate_now(ctx, &message, at_send, gated, job.id)
                        .await
                        .unwrap_or(delivery)
                }
                _ => delivery,
            };
            Ok(MessageSendResult {
                message,
                delivery,
                duplicate: false,
            })
        }
        InsertedMessage::Duplicate {
            message,
            verdict,
            request_hash: stored,
        } => replayed(message, verdict, stored, &request_hash, out.client_msg_id),
    }
}

/// A retried send: the stored message, if the retry repeats it.
fn replayed(
    message: Message,
    verdict: Verdict,
    stored_hash: Option<String>,
    request_hash: &str,
    client_msg_id: Option<String>,
) -> Result<MessageSendResult, RpcError> {
    if stored_hash.as_deref() != Some(request_hash) {
        return Err(RpcError::conflict(format!(
            "clientMsgId {:?} was already used for a different message",
            client_msg_id.unwrap_or_default()
        ))
        .with_data(json!({ "field": "clientMsgId", "messageId": message.id })));
    }
    Ok(MessageSendResult {
        message,
        delivery: gates::message::delivery_of(&verdict, 0),
        duplicate: true,
    })
}

/// The parts within `messages.max_parts` and `messages.max_bytes`, and a
/// well-formed `clientMsgId`.
fn check_outgoing(cfg: &MessagesConfig, out: &Outgoing) -> Result<(), RpcError> {
    message::validate_parts(
        &out.parts,
        &PartLimits {
            max_parts: cfg.max_parts,
            max_bytes: cfg.max_bytes,
            max_data_depth: cfg.max_data_depth,
        },
    )
    .map_err(|e| RpcError::invalid_params(e.message).with_data(json!({ "field": e.field })))?;
    if let Some(id) = &out.client_msg_id {
        if id.is_empty() || id.chars().count() > 128 || id.chars().any(char::is_control) {
            return Err(invalid(
                "clientMsgId",
                "must be 1 to 128 characters without control characters",
            ));
        }
    }
    Ok(())
}

/// `replyTo` names a message of this conversation the sender can see (one
/// it sent or received; any in a channel it reads); hidden or missing, the
/// same InvalidParams naming `replyTo`.
async fn check_reply_to(
    ctx: &RequestContext,
    conversation: &Membership,
    out: &Outgoing,
) -> Result<(), RpcError> {
    if let Some(reply) = out.reply_to {
        let target = Target::message(conversation.id, reply).field("replyTo");
        access::check(ctx, Action::MessageRead, target).await?;
    }
    Ok(())
}

/// A message that waits for its task's gate: the hook's timeout (0 for a
/// static policy) and what was read to decide so, which the gate reuses.
struct Gated {
    hook_timeout_ms: u64,
    task: TaskHead,
    app: AppRecord,
}

/// Every other participant receives at once, except an agent's message in a
/// task conversation: that one waits for the gate. The task must be active.
async fn fanout_of(
    ctx: &RequestContext,
    conversation: &Membership,
    out: &Outgoing,
) -> Result<(Fanout, Option<Gated>), RpcError> {
    let hub = &ctx.hub;
    match (conversation.kind, out.origin) {
        (ConversationKind::Direct | ConversationKind::Group, _)
        | (ConversationKind::Task, Origin::App) => Ok((
            forward(conversation, conversation.recipients_but(out.sender)),
            None,
        )),
        (ConversationKind::Channel, _) => Ok((
            channel_forward(hub, conversation, out.sender)
                .await
                .map_err(store_failure)?,
            None,
        )),
        // People never take part in tasks (ADR 0020 §1): `access` refuses
        // a person's send there before it gets here.
        (ConversationKind::Task, Origin::Person) => {
            tracing::error!("a person's send reached a task conversation");
            Err(RpcError::internal())
        }
        (ConversationKind::Task, Origin::Agent) => {
            let task_id = conversation.task_id.ok_or_else(RpcError::internal)?;
            let (task, app) = hub
                .store
                .task_head(task_id)
                .await
                .map_err(store_failure)?
                .ok_or_else(RpcError::internal)?;
            if task.state != TaskState::Active {
                return Err(
                    RpcError::conflict(format!("the task is {}", task.state.as_str()))
                        .with_data(json!({ "taskId": task.id, "state": task.state })),
                );
            }
            let hook_timeout_ms = match app.manifest.hooks.message_authorize {
                crate::domain::manifest::MessagePolicy::Hook { timeout_ms } => timeout_ms,
                _ => 0,
            };
            Ok((
                Fanout::Pending,
                Some(Gated {
                    hook_timeout_ms,
                    task,
                    app,
                }),
            ))
        }
    }
}

/// What a retried send must repeat for its `clientMsgId` to count as the
/// same message.
fn request_hash(conversation: &Membership, out: &Outgoing) -> Result<String, RpcError> {
    Ok(hex::encode(Sha256::digest(
        serde_json::to_vec(&HashedSend {
            conversation_id: conversation.id,
            parts: &out.parts,
            reply_to: out.reply_to,
            thread_id: out.thread_id,
            card: out.card.as_ref().map(|c| c.posted.as_slice()),
            card_use: out.card.as_ref().map(|c| c.stored.card.card_use),
        })
        .map_err(|_| RpcError::internal())?,
    )))
}

/// Runs the gate now: the job was stored claimed for us. If this fails the
/// runner retries it, and the sender learns the verdict from
/// agent/message/delivery. `None` leaves the pending delivery as it is.
async fn gate_now(
    ctx: &RequestContext,
    message: &Message,
    conversation: Conversation,
    gated: Gated,
    job_id: Uuid,
) -> Option<Delivery> {
    let hub = &ctx.hub;
    let id = message.id;
    let preloaded = gates::message::Preloaded {
        message: message.clone(),
        conversation,
        task: gated.task,
        app: gated.app,
    };
    match gates::message::decide_preloaded(hub, preloaded, job_id).await {
        Ok(Some(d)) => Some(d),
        Ok(None) => None,
        Err(e) => {
            tracing::warn!(message = %id, error = %e, "message gate failed; the job runner retries it");
            let _ = hub.store.retry_job(job_id, now_millis()).await;
            None
        }
    }
}

pub async fn send(
    ctx: RequestContext,
    p: MessageSendParams,
) -> Result<MessageSendResult, RpcError> {
    if p.components.is_some() || p.card_use.is_some() {
        let field = if p.components.is_some() {
            "components"
        } else {
            "cardUse"
        };
        return Err(invalid(field, "only apps post cards"));
    }
    let target = Target::conversation(p.conversation_id);
    let conversation = access::check(&ctx, Action::MessageCreate, target)
        .await?
        .membership()?;
    let out = Outgoing {
        sender: ctx.principal().id,
        origin: match ctx.principal().kind {
            PrincipalKind::Person => Origin::Person,
            _ => Origin::Agent,
        },
        parts: p.parts,
        client_msg_id: p.client_msg_id,
        reply_to: p.reply_to,
        thread_id: p.thread_id,
        card: None,
    };
    store_message(&ctx, &conversation, out).await
}

pub async fn history(
    ctx: RequestContext,
    p: MessageListParams,
) -> Result<MessageListResult, RpcError> {
    if p.after.is_some() && p.before.is_some() {
        return Err(invalid("before", "give after or before, not both"));
    }
    let limit = page_limit(&ctx, p.limit)?;
    let target = Target::conversation(p.conversation_id);
    let conversation = access::check(&ctx, Action::ConversationRead, target)
        .await?
        .membership()?;
    let page = MessagePage {
        viewer: ctx.principal().id,
        after: p.after,
        before: p.before,
        limit: limit + 1,
        place: threads::page_place(&ctx, &conversation, p.thread_id).await?,
    };
    let mut messages = ctx
        .hub
        .store
        .messages(conversation.id, page)
        .await
        .map_err(store_failure)?;
    let has_more = messages.len() > limit as usize;
    if has_more {
        if p.before.is_some() {
            messages.remove(0);
        } else {
            messages.truncate(limit as usize);
        }
    }
    Ok(MessageListResult { messages, has_more })
}
