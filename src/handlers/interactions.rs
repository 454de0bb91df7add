//! Operating a component, the app's answer, and the app's changes to its
//! card (ADR 0027 §3, §5, §6). Every right is `access::check`; the store
//! re-checks the component with the card locked and the installation held,
//! and its refusals answer as the decision's would
//! ([`access::refused_in_store`]).

use serde_json::json;
use uuid::Uuid;

use super::cards::invalid_at;
use super::fanout::app_message;
use super::{invalid, store_failure};
use crate::access::{self, Target};
use crate::config::MessagesConfig;
use crate::domain::authz::{Action, Reason};
use crate::domain::component::{
    check_label, validate_values, ComponentKind, ComponentState, InvokedBy,
};
use crate::domain::message::{self, Origin, PartLimits};
use crate::domain::now_millis;
use crate::hub::RequestContext;
use crate::protocol::interactions::*;
use crate::rpc::RpcError;
use crate::store::{
    ComponentChange, ComponentChanged, InteractionCreated, InteractionResponse, JobKind, NewJob,
    NewMessage, Responded,
};

/// `agent|person/interaction/create`.
pub async fn create(
    ctx: RequestContext,
    p: InteractionCreateParams,
) -> Result<InteractionResult, RpcError> {
    let target = Target::component(p.message_id, p.component_id);
    let granted = access::check(&ctx, Action::InteractionCreate, target.clone())
        .await?
        .component()?;
    let Some(component) = granted.component else {
        return Err(invalid("componentId", "names no component of this card"));
    };
    let limits = ctx.hub.config.component.limits();
    let values = validate_values(&component, p.values.as_ref(), &limits).map_err(invalid_at)?;
    let hub = &ctx.hub;
    let me = ctx.principal();
    let app = granted.message.sender_id;
    let id = Uuid::now_v7();
    let now = now_millis();
    let new = crate::store::NewInteraction {
        id,
        message_id: p.message_id,
        component_id: p.component_id,
        app_id: app,
        actor: InvokedBy {
            principal_id: me.id,
            kind: me.kind,
        },
        values,
        job: NewJob::new(JobKind::AppInteractionDispatch, id, now),
        now,
    };
    match hub
        .store
        .create_interaction(&new)
        .await
        .map_err(store_failure)?
    {
        InteractionCreated::Created {
            interaction,
            events,
            ..
        } => {
            hub.events.publish(&events);
            Ok(InteractionResult { interaction })
        }
        // Used meanwhile, or its app no longer answering: the decision's
        // `component_inactive`, one 409 `component_used`.
        InteractionCreated::Used | InteractionCreated::NotFound => Err(access::refused_in_store(
            &ctx,
            Action::InteractionCreate,
            &target,
            Reason::ComponentInactive,
        )),
    }
}

/// `app/interaction/respond`: an end state once, and the reply with it.
pub async fn respond(
    ctx: RequestContext,
    p: InteractionRespondParams,
) -> Result<InteractionRespondResult, RpcError> {
    let target = Target::interaction(p.interaction_id);
    let interaction = access::check(&ctx, Action::InteractionRespond, target.clone())
        .await?
        .interaction()?;
    let app = ctx.principal().id;
    let reply = match p.reply {
        Some(reply) => {
            check_reply(&ctx.hub.config.messages, &reply)?;
            let place = Target::conversation(interaction.conversation_id);
            let conversation = access::check(&ctx, Action::MessageCreate, place)
                .await?
                .membership()?;
            // A send's audience: a channel's app readers hear the reply too.
            let (fanout, jobs) = app_message(&ctx.hub, &conversation, app)
                .await
                .map_err(store_failure)?;
            Some(NewMessage {
                id: Uuid::now_v7(),
                conversation_id: conversation.id,
                sender_id: app,
                origin: Origin::App,
                parts: reply.parts,
                reply_to: None,
                thread_id: interaction.thread_id,
                in_channel: conversation.kind
                    == crate::domain::conversation::ConversationKind::Channel,
                client_msg_id: None,
                request_hash: None,
                created_at: now_millis(),
                fanout,
                jobs,
                card: None,
                reply_to_interaction: Some(interaction.interaction_id),
            })
        }
        None => None,
    };
    let response = InteractionResponse {
        interaction_id: p.interaction_id,
        app_id: app,
        state: p.state.state(),
        reply,
        now: now_millis(),
    };
    match ctx
        .hub
        .store
        .respond_interaction(&response)
        .await
        .map_err(store_failure)?
    {
        Responded::Done {
            interaction,
            reply,
            events,
        } => {
            ctx.hub.events.publish(&events);
            Ok(InteractionRespondResult {
                interaction,
                message: reply,
            })
        }
        Responded::Conflict(state) => Err(RpcError::conflict(format!(
            "the interaction is {} already",
            state.as_str()
        ))
        .with_data(json!({ "interactionId": p.interaction_id, "state": state }))),
        Responded::NotFound => Err(RpcError::internal()),
        Responded::Refused(reason) => Err(access::refused_in_store(
            &ctx,
            Action::InteractionRespond,
            &target,
            reason,
        )),
    }
}

fn check_reply(cfg: &MessagesConfig, reply: &InteractionReply) -> Result<(), RpcError> {
    let limits = PartLimits {
        max_parts: cfg.max_parts,
        max_bytes: cfg.max_bytes,
        max_data_depth: cfg.max_data_depth,
    };
    message::validate_parts(&reply.parts, &limits).map_err(|e| {
        invalid_at(message::PartError {
            message: format!("reply.{}", e.message),
            field: format!("reply.{}", e.field),
        })
    })
}

/// `app/component/update`: the state and/or a button's label.
pub async fn update(
    ctx: RequestContext,
    p: ComponentUpdateParams,
) -> Result<MessageResult, RpcError> {
    if p.state.is_none() && p.label.is_none() {
        return Err(invalid("state", "give state, label or both"));
    }
    let target = Target::component(p.message_id, p.component_id);
    let granted = access::check(&ctx, Action::ComponentUpdate, target.clone())
        .await?
        .component()?;
    let Some(component) = granted.component else {
        return Err(invalid("componentId", "names no component of this card"));
    };
    if let Some(label) = &p.label {
        if component.kind != ComponentKind::Button {
            return Err(invalid("label", "only a button has a label"));
        }
        check_label("label".into(), label, &ctx.hub.config.component.limits())
            .map_err(invalid_at)?;
    }
    let change = ComponentChange {
        app_id: ctx.principal().id,
        message_id: p.message_id,
        component_id: p.component_id,
        state: p.state.map(|s| match s {
            ComponentSetState::Active => ComponentState::Active,
            ComponentSetState::Disabled => ComponentState::Disabled,
        }),
        label: p.label,
        now: now_millis(),
    };
    match ctx
        .hub
        .store
        .update_component(&change)
        .await
        .map_err(store_failure)?
    {
        ComponentChanged::Changed(message, events) => {
            ctx.hub.events.publish(&events);
            Ok(MessageResult { message })
        }
        ComponentChanged::NotFound => Err(RpcError::internal()),
        ComponentChanged::Refused(reason) => Err(access::refused_in_store(
            &ctx,
            Action::ComponentUpdate,
            &target,
            reason,
        )),
    }
}
