//! The conversations and messages an app opens inside its tasks.

use std::collections::HashSet;

use uuid::Uuid;

use super::conversations::{store_message, Outgoing};
use super::store_failure;
use super::tasks::{check_name, invalid, require_active};
use crate::access::{self, Target};
use crate::domain::authz::Action;
use crate::domain::conversation::ConversationKind;
use crate::domain::event::NewEvent;
use crate::domain::message::Origin;
use crate::domain::now_millis;
use crate::domain::task::Task;
use crate::hub::RequestContext;
use crate::protocol::conversations::{created_events, MessageSendParams, MessageSendResult};
use crate::protocol::tasks::*;
use crate::protocol::Notification;
use crate::rpc::RpcError;
use crate::store::NewConversation;

/// Each agent once (that each takes part in the task is the access
/// check's rule, `not_task_participant`).
fn named_once(agents: &[Uuid]) -> Result<(), RpcError> {
    let mut seen = HashSet::new();
    match agents.iter().find(|a| !seen.insert(**a)) {
        Some(a) => Err(invalid("participants", format!("names agent {a} twice"))),
        None => Ok(()),
    }
}

/// The calling app's task, with every named agent one of its participants.
async fn managed_task(
    ctx: &RequestContext,
    task_id: Uuid,
    agents: &[Uuid],
) -> Result<Task, RpcError> {
    let target = Target::task(task_id).naming(agents);
    access::check(ctx, Action::TaskManage, target).await?.task()
}

pub async fn app_conversation_create(
    ctx: RequestContext,
    p: AppConversationCreateParams,
) -> Result<ConversationResult, RpcError> {
    let task = managed_task(&ctx, p.task_id, &p.participants).await?;
    require_active(&task)?;
    check_name("name", &p.name)?;
    named_once(&p.participants)?;
    let new = NewConversation {
        id: Uuid::now_v7(),
        kind: ConversationKind::Task,
        name: Some(p.name),
        task_id: Some(task.id),
        direct_key: None,
        template_key: None,
        created_by: task.app_id,
        participants: p.participants,
        created_at: now_millis(),
    };
    let events = created_events(new.view(), &new.participants);
    let (conversation, _) = super::conversations::write_conversation(&ctx, &new, &events).await?;
    Ok(ConversationResult { conversation })
}

pub async fn app_conversation_add(
    ctx: RequestContext,
    p: AppConversationAddParams,
) -> Result<ConversationResult, RpcError> {
    let target = Target::conversation_row(p.conversation_id);
    let conversation = access::check(&ctx, Action::ConversationRead, target)
        .await?
        .conversation()?;
    // An app reads its tasks' conversations and the channels granted to
    // it; only the former take participants.
    let Some(task_id) = conversation.task_id else {
        return Err(invalid(
            "conversationId",
            "names a channel; participants join task conversations only",
        ));
    };
    let task = managed_task(&ctx, task_id, &p.participants).await?;
    require_active(&task)?;
    named_once(&p.participants)?;
    let added: Vec<Uuid> = p
        .participants
        .iter()
        .copied()
        .filter(|a| !conversation.participants.contains(a))
        .collect();
    let mut after = conversation.clone();
    after.participants.extend(added.iter().copied());
    let body = serde_json::to_value(crate::protocol::tasks::ConversationPayload {
        conversation: after,
    })
    .map_err(|_| RpcError::internal())?;
    let events: Vec<NewEvent> = added
        .iter()
        .map(|a| NewEvent::new(*a, ConversationJoined::NAME, body.clone()))
        .collect();
    let added = ctx
        .hub
        .store
        .add_participants(conversation.id, &added, &events, now_millis())
        .await;
    // Whatever the outcome: a failed call may still have committed.
    ctx.hub.memberships.invalidate(conversation.id);
    let stored = added.map_err(store_failure)?;
    ctx.hub.events.publish(&stored);
    let conversation = ctx
        .hub
        .store
        .conversation(conversation.id)
        .await
        .map_err(store_failure)?
        .ok_or_else(RpcError::internal)?;
    Ok(ConversationResult { conversation })
}

pub async fn app_message_send(
    ctx: RequestContext,
    p: MessageSendParams,
) -> Result<MessageSendResult, RpcError> {
    let target = Target::conversation(p.conversation_id);
    let conversation = access::check(&ctx, Action::MessageCreate, target)
        .await?
        .membership()?;
    if let Some(task_id) = conversation.task_id {
        let task = ctx
            .hub
            .store
            .task(task_id)
            .await
            .map_err(store_failure)?
            .ok_or_else(RpcError::internal)?;
        require_active(&task.task)?;
    }
    let card = super::cards::posted(&ctx, p.components, p.card_use)?;
    let out = Outgoing {
        sender: ctx.principal().id,
        origin: Origin::App,
        parts: p.parts,
        client_msg_id: p.client_msg_id,
        reply_to: p.reply_to,
        thread_id: p.thread_id,
        card,
    };
    store_message(&ctx, &conversation, out).await
}
