//! Threads (ADR 0020 §2): a channel message may name a root, a message of
//! the same channel without a thread; the main thread has no id. Any other
//! `threadId`, hidden or missing alike, is the one InvalidParams naming it.

use uuid::Uuid;

use super::invalid;
use crate::access::{self, Target, THREAD_UNKNOWN};
use crate::domain::authz::Action;
use crate::domain::conversation::ConversationKind;
use crate::hub::{Membership, RequestContext};
use crate::rpc::RpcError;
use crate::store::PagePlace;

/// The root `thread` names in `conversation`, checked: read like a
/// `replyTo` (the same loads, hidden or missing alike), then refused when
/// it is itself a thread's message.
pub async fn check_root(
    ctx: &RequestContext,
    conversation: &Membership,
    thread: Option<Uuid>,
) -> Result<Option<Uuid>, RpcError> {
    let Some(root) = thread else {
        return Ok(None);
    };
    if conversation.kind != ConversationKind::Channel {
        return Err(invalid("threadId", "only channel messages have threads"));
    }
    let target = Target::message(conversation.id, root).field("threadId");
    let (message, _) = access::check(ctx, Action::MessageRead, target)
        .await?
        .message()?;
    if message.thread_id.is_some() {
        return Err(invalid("threadId", THREAD_UNKNOWN));
    }
    Ok(Some(root))
}

/// Which messages `*/message/list` pages: a channel's one thread (the main
/// one without `threadId`), else what the caller sent or received.
pub async fn page_place(
    ctx: &RequestContext,
    conversation: &Membership,
    thread: Option<Uuid>,
) -> Result<PagePlace, RpcError> {
    let thread = check_root(ctx, conversation, thread).await?;
    Ok(match conversation.kind {
        ConversationKind::Channel => PagePlace::Channel { thread },
        _ => PagePlace::Seen,
    })
}
