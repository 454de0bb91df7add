//! `agent/typing/send`, `person/typing/send`: tell a conversation's other
//! readers that the caller is composing. An ephemeral event (never stored
//! or replayed), one for all readers: one cluster message per send
//! (`EventBus::publish_ephemeral_many`), not one per reader.

use uuid::Uuid;

use super::channel_audience::channel_readers;
use crate::access::{self, Target};
use crate::domain::authz::Action;
use crate::domain::conversation::ConversationKind;
use crate::hub::RequestContext;
use crate::protocol::conversations::{
    Empty, PersonTypingReceived, TypingPayload, TypingReceived, TypingSendParams,
};
use crate::protocol::Notification;
use crate::rpc::RpcError;

pub async fn send(ctx: RequestContext, p: TypingSendParams) -> Result<Empty, RpcError> {
    let me = ctx.principal().id;
    let target = Target::conversation(p.conversation_id);
    let conversation = access::check(&ctx, Action::TypingSend, target)
        .await?
        .membership()?;
    let payload = serde_json::to_value(TypingPayload {
        conversation_id: conversation.id,
        principal_id: me,
        agent_id: (!conversation.is_person(me)).then_some(me),
    })
    .map_err(|_| RpcError::internal())?;
    let others: Vec<Uuid> = match conversation.kind {
        ConversationKind::Channel => channel_readers(&conversation, me),
        _ => conversation.recipients_but(me),
    };
    let audiences: Vec<(Uuid, &'static str)> = others
        .into_iter()
        .map(|other| {
            let name = if conversation.is_person(other) {
                PersonTypingReceived::NAME
            } else {
                TypingReceived::NAME
            };
            (other, name)
        })
        .collect();
    ctx.hub.events.publish_ephemeral_many(&audiences, payload);
    Ok(Empty {})
}
