//! The deliveries of `app_command_dispatch` and `app_interaction_dispatch`
//! to an app's verified URL (ADR 0032 §3, §4): the way the app takes, the
//! re-check of the actor's rights, the one signed POST of the stored
//! event, and a 200's reply written as the app through the app's own
//! handlers, so every rule of the API binds it.

use std::sync::{Arc, OnceLock};

use uuid::Uuid;

use crate::access::{self, Target};
use crate::app_url::{record, Delivered};
use crate::domain::app_reply::{decode_reply, AppReply, Reason};
use crate::domain::authz::Action;
use crate::domain::component::Interaction;
use crate::domain::{Principal, PrincipalKind};
use crate::hub::{ConnectionInfo, Hub, RequestContext};
use crate::identity::Authenticated;
use crate::protocol::conversations::MessageSendParams;
use crate::protocol::interactions::{InteractionReply, InteractionRespondParams, RespondState};
use crate::rpc::{ErrorKind, Peer, RpcError};
use crate::store::{InvocationRecord, Job, StoreError};
use crate::webhooks::interactions::{status_reason, Sent, Signing};

/// A person, agent or app as the subject of a re-check.
fn actor(id: Uuid, kind: PrincipalKind) -> Principal {
    Principal { id, kind }
}

/// The requests one delivery's job may send (ADR 0032 §3, "One
/// attempt"): the first, and one repeat with the same `webhook-id` when
/// the process that sent the first one died before it recorded the answer.
pub const SEND_ALLOWANCE: u32 = 2;

/// This process as a job's sender: a rerun that finds its own mark knows
/// the request left and only the store failed after it.
fn this_process() -> &'static str {
    static SENDER: OnceLock<String> = OnceLock::new();
    SENDER.get_or_init(|| Uuid::new_v4().to_string())
}

/// An invocation to its app's URL: the re-check, the request, the reply.
pub async fn command(
    hub: &Arc<Hub>,
    job: &Job,
    invocation: &InvocationRecord,
    actor_kind: PrincipalKind,
    url: &str,
) -> Result<Delivered, StoreError> {
    let target = Target::command(invocation.command_id, invocation.conversation_id);
    let who = actor(invocation.actor_id, actor_kind);
    let outcome = if !access::recheck(hub, who, Action::CommandInvoke, target).await? {
        Delivered::NotSent(refusal(hub, invocation.app_id).await?)
    } else {
        match hub.store.invocation_event(invocation.id).await? {
            None => Delivered::NotSent(Reason::Inactive),
            Some(event) => match post(hub, job, invocation.app_id, event, url).await? {
                Posted::Reply(reply) => command_reply(hub, invocation, reply).await?,
                Posted::Other(outcome) => outcome,
            },
        }
    };
    record(invocation.app_id, "command", url, outcome);
    Ok(outcome)
}

/// An interaction to its app's URL, once the job moved it to
/// `dispatched`: the request and the reply. The re-check is the job's,
/// before the move.
pub async fn interaction(
    hub: &Arc<Hub>,
    job: &Job,
    interaction: &Interaction,
    event_id: Uuid,
    url: &str,
) -> Result<Delivered, StoreError> {
    let outcome = match post(hub, job, interaction.app_id, event_id, url).await? {
        Posted::Reply(reply) => interaction_reply(hub, interaction, reply).await?,
        Posted::Other(outcome) => outcome,
    };
    record(interaction.app_id, "interaction", url, outcome);
    Ok(outcome)
}

/// The rights of this moment for the press being delivered: Filter mode,
/// never audited, the component's state left out (the press used it).
/// `None` when allowed, else the delivery's reason.
pub async fn recheck_press(
    hub: &Hub,
    interaction: &Interaction,
) -> Result<Option<Reason>, StoreError> {
    let by = interaction.invoked_by;
    let target = Target::component(interaction.message_id, interaction.component_id).delivering();
    let action = Action::InteractionCreate;
    if access::recheck(hub, actor(by.principal_id, by.kind), action, target).await? {
        return Ok(None);
    }
    refusal(hub, interaction.app_id).await.map(Some)
}

/// Why a re-check refused: the app's installation stopped being active
/// since the job began (`inactive`, as the way's own step says it), or the
/// actor's rights (`denied`).
async fn refusal(hub: &Hub, app_id: Uuid) -> Result<Reason, StoreError> {
    Ok(refusal_of(crate::app_url::active(hub, app_id).await?))
}

/// The refusal's reason once the installation was read: still active, the
/// actor's rights refused; not, the installation did.
fn refusal_of(installation_active: bool) -> Reason {
    match installation_active {
        true => Reason::Denied,
        false => Reason::Inactive,
    }
}

enum Posted {
    /// A 200 whose body decoded as a reply.
    Reply(AppReply),
    Other(Delivered),
}

/// The stored event `event_id` of `app_id`'s stream, POSTed once with
/// `webhook-id` = its id. An event no longer in the log (pruned while the
/// hub was down) is `inactive`: nothing can be sent. The job is marked
/// sent first, in its own write: a rerun after the store failed past this
/// point sends nothing (`unrecorded`), one after a crash repeats the
/// request once.
async fn post(
    hub: &Hub,
    job: &Job,
    app_id: Uuid,
    event_id: Uuid,
    url: &str,
) -> Result<Posted, StoreError> {
    let Some(event) = hub.store.stream_event(app_id, event_id).await? else {
        return Ok(Posted::Other(Delivered::NotSent(Reason::Inactive)));
    };
    let body = crate::events::webhook_body(&event, &hub.sync_epoch);
    let id = event.id.to_string();
    if !hub
        .store
        .mark_job_sent(job.id, this_process(), SEND_ALLOWANCE)
        .await?
    {
        return Ok(Posted::Other(Delivered::NotSent(Reason::Unrecorded)));
    }
    let sent = hub
        .interactions
        .post(hub.store.as_ref(), url, &id, body, Signing::Hub, None)
        .await;
    Ok(Posted::Other(match sent {
        Sent::Answer(body) => match decode_reply(&body) {
            Ok(reply) => return Ok(Posted::Reply(reply)),
            Err(reason) => Delivered::Failed(reason),
        },
        Sent::Deferred => Delivered::Deferred,
        Sent::Status(status) => Delivered::Failed(status_reason(status)),
        Sent::Failed(reason) => Delivered::Failed(reason),
    }))
}

/// The app's handlers' context: the app as the authenticated principal,
/// on a peer no socket drains (as a REST request's).
fn app_context(hub: &Arc<Hub>, app_id: Uuid) -> RequestContext {
    let (peer, _unread) = Peer::new("url-", 1);
    let session = OnceLock::new();
    let _ = session.set(Authenticated {
        principal: actor(app_id, PrincipalKind::App),
        key_id: String::new(),
    });
    RequestContext {
        hub: hub.clone(),
        conn: Arc::new(ConnectionInfo {
            id: Uuid::new_v4(),
            peer,
            session,
            event_start: OnceLock::new(),
        }),
    }
}

/// A refusal of the app's own handler: the reply broke a rule of the
/// message or conflicts with what is stored (`invalid_reply`: a reused
/// `clientMsgId`, an interaction answered meanwhile), or the app may not
/// write it (`denied`). The hub's own fault is the store's: the job runs
/// again, with the same `webhook-id`.
fn refused(e: &RpcError) -> Result<Delivered, StoreError> {
    Ok(Delivered::Failed(match e.kind() {
        Some(ErrorKind::InvalidParams | ErrorKind::Conflict) => Reason::InvalidReply,
        Some(ErrorKind::Internal) | None => {
            return Err(StoreError::Conflict(
                "the app's reply could not be written".into(),
            ))
        }
        _ => Reason::Denied,
    }))
}

/// `app/message/send` as the app into the invocation's conversation and
/// thread; `clientMsgId` makes a rerun answer the first message.
async fn command_reply(
    hub: &Arc<Hub>,
    invocation: &InvocationRecord,
    reply: AppReply,
) -> Result<Delivered, StoreError> {
    let params = MessageSendParams {
        conversation_id: invocation.conversation_id,
        parts: reply.parts,
        client_msg_id: Some(reply.client_msg_id),
        reply_to: None,
        thread_id: invocation.thread_id,
        components: None,
        card_use: None,
    };
    let ctx = app_context(hub, invocation.app_id);
    Ok(
        match crate::handlers::task_conversations::app_message_send(ctx, params).await {
            Ok(_) => Delivered::Answered,
            Err(e) => refused(&e)?,
        },
    )
}

/// `app/interaction/respond` as the app: `acknowledged` with the reply in
/// the card's thread, in one transaction, so a rerun finds the end state
/// and sends nothing.
async fn interaction_reply(
    hub: &Arc<Hub>,
    interaction: &Interaction,
    reply: AppReply,
) -> Result<Delivered, StoreError> {
    let params = InteractionRespondParams {
        interaction_id: interaction.interaction_id,
        state: RespondState::Acknowledged,
        reply: Some(InteractionReply { parts: reply.parts }),
    };
    let ctx = app_context(hub, interaction.app_id);
    Ok(
        match crate::handlers::interactions::respond(ctx, params).await {
            Ok(_) => Delivered::Answered,
            Err(e) => refused(&e)?,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_installation_before_the_rights() {
        assert_eq!(refusal_of(false), Reason::Inactive);
        assert_eq!(refusal_of(true), Reason::Denied);
    }
}
