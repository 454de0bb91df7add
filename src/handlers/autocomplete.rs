//! Autocomplete (ADR 0027 §8): the invoke's checks (the options typed so
//! far included), then, holding no transaction, the hub asks the owning
//! app and answers the asker by the deadline
//! (`command.autocomplete_timeout_ms`) at the latest. The app answers at
//! once or defers and answers with `app/autocomplete/answer`. Nothing is
//! stored; the value reaches the app only. The open request closes with
//! the asker, however it ends.

use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;

use super::commands::{checked, checked_options};
use super::{invalid, store_failure};
use crate::access::{self, Target};
use crate::app_url::ask::{self, Asked, Bounds};
use crate::app_url::{self, Way};
use crate::domain::app_reply::Reason;
use crate::domain::authz::Action;
use crate::domain::command::{checked_choices, Choice};
use crate::domain::manifest::OptionType;
use crate::hooks::{self, HookOutcome};
use crate::hub::autocomplete::Answered;
use crate::hub::autocomplete::OpenRequest;
use crate::hub::RequestContext;
use crate::protocol::commands::{
    AppCommandAutocomplete, AutocompleteAnswerParams, AutocompleteAnswerResult,
    AutocompleteCallback, CommandAutocompleteParams, CommandAutocompleteResult, InvokedBy,
};
use crate::rpc::RpcError;
use crate::telemetry::names;

/// `*/command/autocomplete`.
pub async fn ask(
    ctx: RequestContext,
    p: CommandAutocompleteParams,
) -> Result<CommandAutocompleteResult, RpcError> {
    let cfg = &ctx.hub.config.command;
    let deadline = Instant::now() + Duration::from_millis(cfg.autocomplete_timeout_ms);
    let value_max = cfg.autocomplete_value_max_chars;
    if p.value.chars().count() > value_max {
        return Err(invalid(
            "value",
            format!("must be at most {value_max} characters"),
        ));
    }
    let action = Action::CommandAutocomplete;
    let (command, _, thread) =
        checked(&ctx, action, p.command_id, p.conversation_id, p.thread_id).await?;
    let Some(option) = command
        .options
        .iter()
        .find(|o| o.name == p.option && o.autocomplete)
    else {
        return Err(invalid(
            "option",
            "is not an autocomplete option of this command",
        ));
    };
    let options = p.options.unwrap_or_default();
    checked_options(&ctx, &command, &options, false).await?;
    let me = ctx.principal();
    let request_id = Uuid::now_v7();
    let max = cfg.autocomplete_max_choices;
    // Closed when this drops, whichever way the ask ends.
    let mut open = ctx
        .hub
        .autocomplete
        .open(request_id, command.owner_id, option.kind, max);
    let call = AutocompleteCallback {
        request_id,
        command_id: command.id,
        command_name: command.name.clone(),
        option: option.name.clone(),
        value: p.value,
        options,
        conversation_id: p.conversation_id,
        thread_id: thread,
        invoked_by: InvokedBy {
            principal_id: me.id,
            kind: me.kind,
        },
        deadline_ms: cfg.autocomplete_timeout_ms,
    };
    let left = deadline.saturating_duration_since(Instant::now());
    let way = app_url::way(&ctx.hub, command.owner_id)
        .await
        .map_err(store_failure)?;
    let (choices, label) = match way {
        Way::Url(url) => {
            let bounds = Bounds {
                kind: option.kind,
                max,
            };
            let payload = serde_json::to_value(&call).expect("params serialize");
            let owner = (command.owner_id, url.as_str());
            match ask::ask(&ctx.hub, owner, request_id, payload, bounds, left).await {
                Asked::Choices(c) => (c, "answered"),
                Asked::Deferred => late(deadline, &mut open).await,
                Asked::Failed(Reason::Timeout) => (Vec::new(), "timeout"),
                Asked::Failed(Reason::InvalidReply) => (Vec::new(), "invalid"),
                Asked::Failed(_) => (Vec::new(), "unavailable"),
            }
        }
        // Nothing goes to an unverified URL: no choices, at once.
        Way::Unverified => (Vec::new(), "unavailable"),
        Way::Gateway | Way::Inactive(_) => {
            by_socket(
                &ctx,
                command.owner_id,
                &call,
                left,
                (option.kind, max),
                deadline,
                &mut open,
            )
            .await
        }
    };
    metrics::counter!(names::AUTOCOMPLETES, "outcome" => label).increment(1);
    Ok(CommandAutocompleteResult { choices })
}

/// A deferred request's late answer, by the asker's deadline.
async fn late(deadline: Instant, open: &mut OpenRequest<'_>) -> (Vec<Choice>, &'static str) {
    match tokio::time::timeout_at(deadline, &mut open.late).await {
        Ok(Ok(choices)) => (choices, "deferred_answered"),
        _ => (Vec::new(), "timeout"),
    }
}

/// The owner's callback socket (ADR 0027 §8).
async fn by_socket(
    ctx: &RequestContext,
    owner: Uuid,
    call: &AutocompleteCallback,
    left: Duration,
    (kind, max): (OptionType, usize),
    deadline: Instant,
    open: &mut OpenRequest<'_>,
) -> (Vec<Choice>, &'static str) {
    let outcome = hooks::call_app::<AppCommandAutocomplete>(&ctx.hub, owner, call, left).await;
    match outcome {
        HookOutcome::Ok(answer) => match (answer.choices, answer.deferred) {
            (Some(choices), false) => match checked_choices(kind, &choices, max) {
                Some(c) => (c, "answered"),
                None => (Vec::new(), "invalid"),
            },
            (None, true) => late(deadline, open).await,
            _ => (Vec::new(), "invalid"),
        },
        HookOutcome::Timeout => (Vec::new(), "timeout"),
        HookOutcome::Unavailable | HookOutcome::Disconnected => (Vec::new(), "unavailable"),
        HookOutcome::BadResult(_) => (Vec::new(), "invalid"),
        HookOutcome::RemoteError(_) => (Vec::new(), "error"),
    }
}

/// `app/autocomplete/answer`: the late answer of a deferred request, the
/// app's own and still open; any other is unknown.
pub async fn answer(
    ctx: RequestContext,
    p: AutocompleteAnswerParams,
) -> Result<AutocompleteAnswerResult, RpcError> {
    access::check(&ctx, Action::CommandAutocompleteRespond, Target::hub()).await?;
    let me = ctx.principal().id;
    let choices: &[Choice] = &p.choices;
    match ctx.hub.autocomplete.answer(p.request_id, me, choices) {
        Answered::Accepted => Ok(AutocompleteAnswerResult { accepted: true }),
        Answered::Invalid => Ok(AutocompleteAnswerResult { accepted: false }),
        Answered::Unknown => Err(access::unknown_autocomplete_request(p.request_id)),
    }
}
