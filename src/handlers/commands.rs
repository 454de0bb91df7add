//! Commands (ADR 0027 §1-§4): what a place offers, the invoke, and the
//! app's own register, remove and list. Every right is `access::check`;
//! here are the input checks (options against the declaration, the thread)
//! and the one transaction of an invoke.

use std::sync::Arc;

use serde_json::{Map, Value};
use uuid::Uuid;

use super::{invalid, store_failure, threads};
use crate::access::unknown_command;
use crate::access::{self, Target};
use crate::domain::authz::{Action, Reason};
use crate::domain::command::{validate_options, OptionRules};
use crate::domain::event::NewEvent;
use crate::domain::installation::{InstallationFacts, InstallationState};
use crate::domain::manifest::validate_command;
use crate::domain::now_millis;
use crate::hub::{Membership, RequestContext};
use crate::protocol::commands::{
    AppCommandListParams, CommandInvokeParams, CommandInvokeResult, CommandInvoked,
    CommandInvokedPayload, CommandListParams, CommandListResult, CommandRegisterParams,
    CommandRegisterResult, CommandRemoveParams, CommandRemoveResult, CommandView, Invocation,
    InvokedBy,
};
use crate::protocol::Notification;
use crate::rpc::RpcError;
use crate::store::{
    CommandRecord, IdempotencyRecord, InvocationRecord, Invoked, NewCommand, NewInvocation,
    Registered, StoreError, COMMAND_LIMIT,
};

pub fn view(c: &CommandRecord) -> CommandView {
    CommandView {
        command_id: c.id,
        app_id: c.owner_id,
        name: c.name.clone(),
        description: c.description.clone(),
        required_level: c.required_level,
        options: c.options.clone(),
        conversation_id: c.conversation_id,
        version: c.version,
    }
}

/// `*/command/list`: the place is read as a conversation (its own
/// not-found), then each offered command is judged in Filter mode.
pub async fn list(
    ctx: RequestContext,
    p: CommandListParams,
) -> Result<CommandListResult, RpcError> {
    let target = Target::conversation(p.conversation_id);
    let membership = access::check(&ctx, Action::ConversationRead, target)
        .await?
        .membership()?;
    let offered = access::offered_commands(&ctx.hub, ctx.principal(), &membership)
        .await
        .map_err(store_failure)?;
    Ok(CommandListResult {
        commands: offered.iter().map(view).collect(),
    })
}

/// The command checked for `action` in the place asked, with the place's
/// membership and the thread the invoke targets.
pub async fn checked(
    ctx: &RequestContext,
    action: Action,
    command: Uuid,
    conversation: Uuid,
    thread: Option<Uuid>,
) -> Result<(CommandRecord, Arc<Membership>, Option<Uuid>), RpcError> {
    let target = Target::command(command, conversation);
    let (command, membership) = access::check(ctx, action, target).await?.command()?;
    let thread = threads::check_root(ctx, &membership, thread).await?;
    Ok((command, membership, thread))
}

/// `*/command/invoke` (ADR 0027 §4): decide, check the options, then one
/// transaction writes the invocation, the app's event and the job. Nothing
/// else: no message, no agent event, no lease.
pub async fn invoke(
    ctx: RequestContext,
    p: CommandInvokeParams,
) -> Result<CommandInvokeResult, RpcError> {
    invoke_with(ctx, p, None).await
}

/// The replayable record of an invoke's answer (REST `Idempotency-Key`),
/// built from the answer before it is written.
pub type InvokeRecord<'a> = &'a (dyn Fn(&CommandInvokeResult) -> IdempotencyRecord + Sync);

/// [`invoke`], with the record of a REST `Idempotency-Key` written in the
/// invoke's transaction.
pub async fn invoke_with(
    ctx: RequestContext,
    p: CommandInvokeParams,
    idem: Option<InvokeRecord<'_>>,
) -> Result<CommandInvokeResult, RpcError> {
    let cfg = &ctx.hub.config.command;
    check_client_id(
        p.client_invocation_id.as_deref(),
        cfg.client_invocation_id_max_chars,
    )?;
    let (command, _, thread) = checked(
        &ctx,
        Action::CommandInvoke,
        p.command_id,
        p.conversation_id,
        p.thread_id,
    )
    .await?;
    let options = p.options.unwrap_or_default();
    checked_options(&ctx, &command, &options, true).await?;
    let me = ctx.principal();
    let invocation = InvocationRecord {
        id: Uuid::now_v7(),
        command_id: command.id,
        app_id: command.owner_id,
        actor_id: me.id,
        conversation_id: p.conversation_id,
        thread_id: thread,
        client_invocation_id: p.client_invocation_id,
        created_at: now_millis(),
    };
    let event = invoked_event(&command, &invocation, me.kind, options);
    let idem = idem.map(|record| record(&result_of(&invocation, false)));
    let new = NewInvocation {
        invocation,
        event,
        idem,
    };
    let invoked = match ctx.hub.store.invoke(&new).await {
        Err(StoreError::IdempotencyTaken) => return Err(replayed()),
        other => other.map_err(store_failure)?,
    };
    answer(&ctx, invoked, p.command_id, p.conversation_id)
}

/// The options against the command's declaration (complete for an invoke,
/// typed so far for an autocomplete), bounded by
/// `command.option_value_max_chars`. A channel the caller cannot read is
/// hidden as everywhere: the app is never handed a place the caller could
/// not name.
pub async fn checked_options(
    ctx: &RequestContext,
    command: &CommandRecord,
    options: &Map<String, Value>,
    complete: bool,
) -> Result<(), RpcError> {
    let rules = OptionRules {
        value_max_chars: ctx.hub.config.command.option_value_max_chars,
        complete,
    };
    let referenced = validate_options(&command.options, options, rules)
        .map_err(|e| invalid(&e.field, e.message))?;
    for channel in referenced.channels {
        let target = Target::conversation(channel).called("channel");
        access::check(ctx, Action::ConversationRead, target).await?;
    }
    Ok(())
}

/// A concurrent request with the same `Idempotency-Key` won: the caller
/// answers the stored replay (REST only).
fn replayed() -> RpcError {
    RpcError::new(
        crate::rpc::ErrorKind::Conflict,
        "idempotency_conflict: this Idempotency-Key is being used",
    )
    .with_data(serde_json::json!({"reason": "idempotency_conflict"}))
}

fn result_of(i: &InvocationRecord, duplicate: bool) -> CommandInvokeResult {
    CommandInvokeResult {
        invocation_id: i.id,
        command_id: i.command_id,
        conversation_id: i.conversation_id,
        thread_id: i.thread_id,
        accepted: true,
        duplicate,
    }
}

fn check_client_id(id: Option<&str>, max: usize) -> Result<(), RpcError> {
    match id {
        Some(id) if id.is_empty() || id.chars().count() > max => Err(invalid(
            "clientInvocationId",
            format!("must be 1 to {max} characters"),
        )),
        _ => Ok(()),
    }
}

/// `app/command/invoked` to the owning app: the options go there only.
fn invoked_event(
    command: &CommandRecord,
    i: &InvocationRecord,
    kind: crate::domain::PrincipalKind,
    options: Map<String, Value>,
) -> NewEvent {
    let payload = CommandInvokedPayload {
        invocation: Invocation {
            invocation_id: i.id,
            command_id: command.id,
            command_name: command.name.clone(),
            conversation_id: i.conversation_id,
            thread_id: i.thread_id,
            invoked_by: InvokedBy {
                principal_id: i.actor_id,
                kind,
            },
            options,
        },
    };
    let payload = serde_json::to_value(payload).expect("event payloads serialize");
    NewEvent::new(command.owner_id, CommandInvoked::NAME, payload)
}

/// Publishes what the invoke wrote and answers it.
fn answer(
    ctx: &RequestContext,
    invoked: Invoked,
    command: Uuid,
    conversation: Uuid,
) -> Result<CommandInvokeResult, RpcError> {
    let (invocation, duplicate) = match invoked {
        Invoked::Written { invocation, events } => {
            ctx.hub.events.publish(&events);
            (invocation, false)
        }
        Invoked::Duplicate(first) => (first, true),
        Invoked::Unreachable => return Err(unreachable(ctx, command, conversation)),
    };
    Ok(result_of(&invocation, duplicate))
}

/// A command out of reach by the time the invoke's transaction held its
/// owner's installation: refused, counted and audited as the decision
/// refuses a hidden command, and answered as an unknown one.
fn unreachable(ctx: &RequestContext, command: Uuid, conversation: Uuid) -> RpcError {
    let action = Action::CommandInvoke;
    let refusal = unknown_command(command, conversation, action);
    let target = Target::command(command, conversation);
    let subject = access::subject_of(ctx.principal());
    let (kind, id) = (target.kind(), target.requested_id());
    access::record_denial(&ctx.hub, &subject, action, kind, id, refusal.reason);
    refusal.rpc()
}

/// `app/command/register`: the manifest's rules for one command, the
/// scope (and write on the place, for a scoped one), then the row.
pub async fn register(
    ctx: RequestContext,
    p: CommandRegisterParams,
) -> Result<CommandRegisterResult, RpcError> {
    let bounds = ctx.hub.config.manifest_bounds();
    let value = serde_json::to_value(&p.command).map_err(|_| RpcError::internal())?;
    if let Err(problems) = validate_command(&value, &bounds) {
        let first = &problems[0];
        let field = first.pointer.trim_start_matches('/').replace('/', ".");
        return Err(invalid(&field, &first.message));
    }
    let target = match p.conversation_id {
        Some(id) => Target::conversation(id),
        None => Target::hub(),
    };
    access::check(&ctx, Action::CommandRegister, target).await?;
    let new = NewCommand {
        owner_id: ctx.principal().id,
        decl: p.command,
        conversation_id: p.conversation_id,
        max: ctx.hub.config.command.max_per_principal,
        now: now_millis(),
    };
    let command = match ctx.hub.store.register_command(&new).await {
        Ok(Registered::Written(c)) => c,
        // The installation changed since the decision: refused as the
        // decision would refuse it now.
        Ok(Registered::Refused(facts)) => return Err(register_refused(&ctx, facts)),
        Err(StoreError::Conflict(m)) if m == COMMAND_LIMIT => {
            return Err(RpcError::new(
                crate::rpc::ErrorKind::Conflict,
                "command_limit: the app has command.max_per_principal commands",
            )
            .with_data(serde_json::json!({"reason": COMMAND_LIMIT})))
        }
        Err(StoreError::Conflict(m)) => {
            return Err(RpcError::new(crate::rpc::ErrorKind::Conflict, m)
                .with_data(serde_json::json!({"field": "command.name"})))
        }
        Err(e) => return Err(store_failure(e)),
    };
    Ok(CommandRegisterResult {
        command: view(&command),
    })
}

/// A register whose transaction found the app's installation not active
/// with `commands:write`: the decision's reason for it, counted and
/// audited, in the decision's 403.
fn register_refused(ctx: &RequestContext, facts: Option<InstallationFacts>) -> RpcError {
    let reason = match facts {
        Some(f) if f.state == InstallationState::Active => Reason::ScopeMissing,
        Some(f) if f.state == InstallationState::Suspended => Reason::AppSuspended,
        _ => Reason::AppNotInstalled,
    };
    let action = Action::CommandRegister;
    let target = Target::hub();
    let subject = access::subject_of(ctx.principal());
    let (kind, id) = (target.kind(), target.requested_id());
    access::record_denial(&ctx.hub, &subject, action, kind, id, reason);
    RpcError::new(
        crate::rpc::ErrorKind::Forbidden,
        format!("{action} refused: {}", reason.as_str()),
    )
    .with_data(serde_json::json!({"reason": reason.as_str(), "action": action.as_str()}))
}

/// `app/command/remove`: one of the app's own; another's is unknown.
pub async fn remove(
    ctx: RequestContext,
    p: CommandRemoveParams,
) -> Result<CommandRemoveResult, RpcError> {
    access::check(&ctx, Action::CommandRegister, Target::hub()).await?;
    let me = ctx.principal().id;
    match ctx
        .hub
        .store
        .remove_command(me, p.command_id, now_millis())
        .await
    {
        Ok(()) => Ok(CommandRemoveResult {
            command_id: p.command_id,
        }),
        Err(StoreError::NotFound) => {
            Err(unknown_command(p.command_id, Uuid::nil(), Action::CommandRegister).rpc())
        }
        Err(e) => Err(store_failure(e)),
    }
}

/// `app/command/list`: the app's own live commands.
pub async fn app_list(
    ctx: RequestContext,
    _: AppCommandListParams,
) -> Result<CommandListResult, RpcError> {
    access::check(&ctx, Action::CommandRegister, Target::hub()).await?;
    let commands = ctx
        .hub
        .store
        .commands_of(ctx.principal().id)
        .await
        .map_err(store_failure)?;
    Ok(CommandListResult {
        commands: commands.iter().map(view).collect(),
    })
}
