//! The conversations and messages an app opens inside its tasks.

use std::collections::HashSet;

use serde_json::json;
use uuid::Uuid;

use super::conversations::{store_message, Outgoing};
use super::store_failure;
use super::tasks::{app_task, check_name, invalid, require_active};
use crate::domain::conversation::{Conversation, ConversationKind};
use crate::domain::event::NewEvent;
use crate::domain::message::Origin;
use crate::domain::now_millis;
use crate::domain::task::Task;
use crate::hub::{Membership, RequestContext};
use crate::protocol::conversations::{created_events, MessageSendParams, MessageSendResult};
use crate::protocol::tasks::*;
use crate::protocol::Notification;
use crate::rpc::RpcError;
use crate::store::NewConversation;

/// Checks that every agent is a participant of the task.
fn only_task_participants(task: &Task, agents: &[Uuid]) -> Result<(), RpcError> {
    let mut seen = HashSet::new();
    for a in agents {
        if !task.has_participant(*a) {
            return Err(RpcError::forbidden(format!(
                "agent {a} is not a participant of task {}",
                task.id
            ))
            .with_data(json!({ "agentId": a, "taskId": task.id })));
        }
        if !seen.insert(*a) {
            return Err(invalid("participants", format!("names agent {a} twice")));
        }
    }
    Ok(())
}

pub async fn app_conversation_create(
    ctx: RequestContext,
    p: AppConversationCreateParams,
) -> Result<ConversationResult, RpcError> {
    let task = app_task(&ctx, p.task_id).await?;
    require_active(&task)?;
    check_name("name", &p.name)?;
    only_task_participants(&task, &p.participants)?;
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

/// A conversation of one of the calling app's tasks, with that task.
pub(super) async fn app_conversation(
    ctx: &RequestContext,
    id: Uuid,
) -> Result<(Conversation, Task), RpcError> {
    let hidden =
        || RpcError::not_found("conversation not found").with_data(json!({ "conversationId": id }));
    let conversation = ctx
        .hub
        .store
        .conversation(id)
        .await
        .map_err(store_failure)?
        .ok_or_else(hidden)?;
    let task_id = conversation.task_id.ok_or_else(hidden)?;
    let task = app_task(ctx, task_id).await.map_err(|_| hidden())?;
    Ok((conversation, task))
}

pub async fn app_conversation_add(
    ctx: RequestContext,
    p: AppConversationAddParams,
) -> Result<ConversationResult, RpcError> {
    let (conversation, task) = app_conversation(&ctx, p.conversation_id).await?;
    require_active(&task)?;
    only_task_participants(&task, &p.participants)?;
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
    let (conversation, task) = app_conversation(&ctx, p.conversation_id).await?;
    require_active(&task)?;
    let out = Outgoing {
        sender: ctx.principal().id,
        origin: Origin::App,
        parts: p.parts,
        client_msg_id: p.client_msg_id,
        reply_to: p.reply_to,
    };
    // A task conversation holds agents only: no person's copy to name.
    store_message(&ctx, &Membership::of(&conversation, Vec::new()), out).await
}
