//! Commands over REST (ADR 0027 §1): the gateway's command handlers run on
//! a request context without a socket, so every decision and check is
//! theirs; their errors are answered as REST errors.
//!
//! - `GET /api/v1/conversations/{id}/commands`: `*/command/list`;
//! - `POST /api/v1/commands/{commandId}/invocations`: `*/command/invoke`,
//!   202, with `Idempotency-Key` (the caller's, per command; the record
//!   written in the invoke's transaction, so a replay answers the stored
//!   202 and writes nothing);
//! - `POST /api/v1/commands/{commandId}/autocomplete`;
//! - `GET|POST /api/v1/apps/{appId}/commands`,
//!   `DELETE /api/v1/apps/{appId}/commands/{commandId}`: the app's own.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};

use super::body::checked_json;
use super::error::ApiError;
use super::identity::{json_value, Client, Idempotency};
use super::manage::{bad_field, path_id};
use super::messages::{api_error, context, typed};
use crate::access;
use crate::domain::authz::{Action, Reason, ResourceKind};
use crate::domain::PrincipalKind;
use crate::handlers::{autocomplete, commands};
use crate::hub::{Hub, RequestContext};
use crate::protocol::commands::{
    AppCommandListParams, CommandInvokeParams, CommandListParams, CommandRemoveParams,
};
use crate::protocol::RateClass;

/// The body as an object with the path's ids put in (and refused in it).
fn with_path(
    body: &Bytes,
    headers: &HeaderMap,
    ids: &[(&str, String)],
) -> Result<Map<String, Value>, ApiError> {
    checked_json(headers, body)?;
    let Value::Object(mut fields) = json_value(body)? else {
        return Err(bad_field("", "must be a JSON object"));
    };
    for (name, id) in ids {
        if fields.contains_key(*name) {
            return Err(bad_field(
                &format!("/{name}"),
                "is the path's: leave it out",
            ));
        }
        fields.insert((*name).to_string(), Value::String(id.clone()));
    }
    Ok(fields)
}

/// `GET /api/v1/conversations/{id}/commands`: `{commands}`.
pub async fn list(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(conversation): Path<String>,
) -> Result<Response, ApiError> {
    let ctx = context(&hub, &headers, remote, RateClass::Default).await?;
    let id = path_id(&conversation);
    members_only(&ctx, id)?;
    let params = CommandListParams {
        conversation_id: id,
    };
    let listed = commands::list(ctx, params).await.map_err(api_error)?;
    Ok(Json(listed).into_response())
}

/// `POST /api/v1/commands/{commandId}/invocations`: 202 `{invocationId,
/// commandId, conversationId, threadId?, accepted}`.
pub async fn invoke(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(command): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let ctx = context(&hub, &headers, remote, RateClass::Trigger).await?;
    let client = Client::principal(ctx.principal().id);
    let command = path_id(&command);
    // The key is the caller's for this command: the same key on another
    // command is another request, never this one's replay.
    let idem = Idempotency::from_request("command.invoke", &client, &headers, &body)?
        .map(|i| i.for_target(command));
    if let Some(idem) = &idem {
        if let Some(replay) = idem.replay(&hub).await? {
            return Ok(replay);
        }
    }
    let id = command.to_string();
    let params: CommandInvokeParams = typed(with_path(&body, &headers, &[("commandId", id)])?)?;
    let record = |answer: &crate::protocol::commands::CommandInvokeResult| {
        let idem = idem.as_ref().expect("only called with a key");
        idem.record_status(202, json!(answer))
    };
    let record: Option<commands::InvokeRecord> = match &idem {
        Some(_) => Some(&record),
        None => None,
    };
    match commands::invoke_with(ctx, params, record).await {
        Ok(answer) => Ok((StatusCode::ACCEPTED, Json(answer)).into_response()),
        Err(e)
            if e.data.as_deref().and_then(|d| d.get("reason"))
                == Some(&json!("idempotency_conflict")) =>
        {
            match &idem {
                Some(idem) => idem.replay(&hub).await?.ok_or_else(ApiError::internal),
                None => Err(ApiError::internal()),
            }
        }
        Err(e) => Err(api_error(e)),
    }
}

/// `POST /api/v1/commands/{commandId}/autocomplete`: `{choices}`.
pub async fn autocomplete(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(command): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let ctx = context(&hub, &headers, remote, RateClass::Trigger).await?;
    let id = path_id(&command).to_string();
    let params = typed(with_path(&body, &headers, &[("commandId", id)])?)?;
    let answered = autocomplete::ask(ctx, params).await.map_err(api_error)?;
    Ok(Json(answered).into_response())
}

/// `POST /api/v1/autocomplete/{requestId}/answer` `{choices}`: an app's
/// late answer to a request it deferred (202 at its `interactionsUrl`, or
/// `{deferred: true}` on its socket), as `app/autocomplete/answer`.
pub async fn autocomplete_answer(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(request): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let ctx = context(&hub, &headers, remote, RateClass::AgentRuntime).await?;
    let id = path_id(&request).to_string();
    let params = typed(with_path(&body, &headers, &[("requestId", id)])?)?;
    let answered = autocomplete::answer(ctx, params).await.map_err(api_error)?;
    Ok(Json(answered).into_response())
}

/// `GET /api/v1/apps/{appId}/commands`: the app's own, `{commands}`.
pub async fn app_list(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(app): Path<String>,
) -> Result<Response, ApiError> {
    let ctx = app_context(&hub, &headers, remote, &app, RateClass::Default).await?;
    let listed = commands::app_list(ctx, AppCommandListParams {})
        .await
        .map_err(api_error)?;
    Ok(Json(listed).into_response())
}

/// `POST /api/v1/apps/{appId}/commands`: 201 `{command}`.
pub async fn register(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(app): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let ctx = app_context(&hub, &headers, remote, &app, RateClass::Write).await?;
    let params = typed(with_path(&body, &headers, &[])?)?;
    let registered = commands::register(ctx, params).await.map_err(api_error)?;
    Ok((StatusCode::CREATED, Json(registered)).into_response())
}

/// `DELETE /api/v1/apps/{appId}/commands/{commandId}`: 204.
pub async fn remove(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path((app, command)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let ctx = app_context(&hub, &headers, remote, &app, RateClass::Write).await?;
    let params = CommandRemoveParams {
        command_id: path_id(&command),
    };
    commands::remove(ctx, params).await.map_err(api_error)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// People and agents list a place's commands; an app is refused as on
/// the gateway, where the method is not its own, counted and audited as
/// `access` does every denial. (Invoke and autocomplete are refused by
/// their decision, `command.invoke` and `command.autocomplete` admitting
/// no app.)
fn members_only(ctx: &RequestContext, conversation: uuid::Uuid) -> Result<(), ApiError> {
    let me = ctx.principal();
    if me.kind != PrincipalKind::App {
        return Ok(());
    }
    let (action, reason) = (Action::CommandRead, Reason::SubjectKindNotAllowed);
    let subject = access::subject_of(me);
    let kind = ResourceKind::Conversation;
    access::record_denial(&ctx.hub, &subject, action, kind, conversation, reason);
    let mut e = ApiError::new(
        StatusCode::FORBIDDEN,
        "forbidden",
        format!("{action} refused: {}", reason.as_str()),
    );
    e.extra = Some(Box::new(json!({ "reason": reason.as_str() })));
    Err(e)
}

/// The app's own routes: its key, and its own id in the path (any other
/// is the route's not-found, as for an app's installation).
async fn app_context(
    hub: &Arc<Hub>,
    headers: &HeaderMap,
    remote: SocketAddr,
    app: &str,
    class: RateClass,
) -> Result<RequestContext, ApiError> {
    let ctx = context(hub, headers, remote, class).await?;
    let me = ctx.principal();
    if me.kind != PrincipalKind::App || path_id(app) != me.id {
        return Err(super::installations::app_not_found());
    }
    Ok(ctx)
}
