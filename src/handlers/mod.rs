//! Handlers of the peer-to-hub methods, one module per area of the catalogue.
//! They translate between protocol types and the identity, store and domain
//! layers; the gateway has already checked the caller's kind, and every
//! right is decided by `access::check` (ADR 0020 §3): handlers keep only
//! input validation and the state machines' conflicts.

pub mod autocomplete;
mod cards;
mod channel_audience;
pub mod channels;
pub mod commands;
pub mod conversations;
pub mod events;
mod fanout;
pub mod interactions;
pub mod invites;
pub mod leases;
pub mod network;
pub mod task_conversations;
pub mod tasks;
pub mod threads;
pub mod typing;

use crate::hub::RequestContext;
use crate::protocol::{
    channels as ch, commands as cmd, conversations as c, events as e, interactions as i,
    network as n, router::Router, tasks as t,
};
use crate::rpc::RpcError;
use serde_json::json;
use uuid::Uuid;

pub fn router() -> Router<RequestContext> {
    Router::new()
        .register::<n::AgentConnect, _, _>(network::agent_connect)
        .register::<n::AppConnect, _, _>(network::app_connect)
        .register::<n::PersonConnect, _, _>(network::person_connect)
        .register_twins::<n::AgentIdentityGet, n::PersonIdentityGet, _, _>(network::agent_identity)
        .register::<n::AppIdentityGet, _, _>(network::app_identity)
        .register_twins::<e::AgentEventAck, e::PersonEventAck, _, _>(events::ack)
        .register::<e::AppEventAck, _, _>(events::ack)
        .register_twins::<c::AgentConversationCreate, c::PersonConversationCreate, _, _>(
            conversations::create,
        )
        .register_twins::<c::AgentConversationList, c::PersonConversationList, _, _>(
            conversations::list,
        )
        .register_twins::<c::AgentConversationGet, c::PersonConversationGet, _, _>(
            conversations::get,
        )
        .register_twins::<c::AgentMessageSend, c::PersonMessageSend, _, _>(conversations::send)
        .register_twins::<c::AgentMessageList, c::PersonMessageList, _, _>(conversations::history)
        .register_twins::<c::AgentTypingSend, c::PersonTypingSend, _, _>(typing::send)
        .register_twins::<ch::AgentChannelList, ch::PersonChannelList, _, _>(channels::list)
        .register::<ch::AppChannelList, _, _>(channels::list)
        .register_twins::<crate::protocol::invites::AgentInviteAccept, crate::protocol::invites::PersonInviteAccept, _, _>(
            invites::accept,
        )
        .register::<t::AgentTaskRequest, _, _>(tasks::request)
        .register::<t::AgentTaskGet, _, _>(tasks::get)
        .register::<t::AgentTaskList, _, _>(tasks::list)
        .register::<t::AppTaskGet, _, _>(tasks::app_get)
        .register::<t::AppTaskClose, _, _>(tasks::close)
        .register::<t::AppConversationCreate, _, _>(task_conversations::app_conversation_create)
        .register::<t::AppConversationAdd, _, _>(task_conversations::app_conversation_add)
        .register::<t::AppMessageSend, _, _>(task_conversations::app_message_send)
        .register::<t::AgentDispatchRequest, _, _>(leases::dispatch_request)
        .register::<t::AgentDispatchComplete, _, _>(leases::dispatch_complete)
        .register::<t::AppDispatchResolve, _, _>(leases::dispatch_resolve)
        .register_twins::<cmd::AgentCommandList, cmd::PersonCommandList, _, _>(commands::list)
        .register_twins::<cmd::AgentCommandInvoke, cmd::PersonCommandInvoke, _, _>(commands::invoke)
        .register::<cmd::AppCommandRegister, _, _>(commands::register)
        .register::<cmd::AppCommandRemove, _, _>(commands::remove)
        .register::<cmd::AppCommandList, _, _>(commands::app_list)
        .register_twins::<cmd::AgentCommandAutocomplete, cmd::PersonCommandAutocomplete, _, _>(
            autocomplete::ask,
        )
        .register::<cmd::AppAutocompleteAnswer, _, _>(autocomplete::answer)
        // cards (ADR 0027 §1)
        .register_twins::<i::AgentInteractionCreate, i::PersonInteractionCreate, _, _>(
            interactions::create,
        )
        .register::<i::AppInteractionRespond, _, _>(interactions::respond)
        .register::<i::AppComponentUpdate, _, _>(interactions::update)
}

/// The people among `ids` (which `access::check` found to be active agents
/// or people), whose events are named `person/...` (ADR 0020 §1): one read,
/// at conversation creation only.
pub async fn people_among(ctx: &RequestContext, ids: &[Uuid]) -> Result<Vec<Uuid>, RpcError> {
    Ok(ctx
        .hub
        .store
        .principal_kinds(ids)
        .await
        .map_err(store_failure)?
        .into_iter()
        .filter(|(_, kind, _)| *kind == crate::domain::PrincipalKind::Person)
        .map(|(id, _, _)| id)
        .collect())
}

/// `field` lists the other agents, each once: never the caller, who joins
/// as `caller_joins` says.
pub fn check_others(
    me: Uuid,
    others: &[Uuid],
    field: &str,
    caller_joins: &str,
) -> Result<(), RpcError> {
    let mut seen = std::collections::HashSet::new();
    for id in others {
        if *id == me {
            return Err(invalid(
                field,
                format!("lists the other agents; {caller_joins}"),
            ));
        }
        if !seen.insert(*id) {
            return Err(invalid(field, format!("names agent {id} twice")));
        }
    }
    Ok(())
}

/// Invalid params naming the field, in the message and in `data.field`.
pub fn invalid(field: &str, detail: impl std::fmt::Display) -> RpcError {
    RpcError::invalid_params(format!("{field}: {detail}")).with_data(json!({ "field": field }))
}

/// A store failure is the hub's fault: logged here, answered as Internal.
pub fn store_failure(e: crate::store::StoreError) -> RpcError {
    tracing::error!(error = %e, "store failure");
    RpcError::internal()
}
