//! A conversation's messages over REST (ADR 0020 §1's table): `GET|POST
//! /api/v1/conversations/{conversationId}/messages`, the gateway's
//! `*/message/list` and `*/message/send` for a principal's key. The handlers
//! are the gateway's own, run on a request context without a socket, so
//! every decision, limit and fan-out is theirs; their errors are answered
//! as REST errors (404, 403 with `reason`, 400 naming the field, 409, 429).

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{Map, Value};
use uuid::Uuid;

use super::body::checked_json;
use super::error::ApiError;
use super::identity::{bearer, json_value};
use super::manage::{bad_field, path_id, spend};
use super::query::QueryParams;
use crate::access;
use crate::domain::authz::{Action, Reason, ResourceKind};
use crate::domain::validate::FieldProblem;
use crate::domain::{Principal, PrincipalKind};
use crate::handlers::{conversations, task_conversations};
use crate::hub::{ConnectionInfo, Hub, RequestContext};
use crate::protocol::conversations::{MessageListParams, MessageSendParams};
use crate::protocol::RateClass;
use crate::rpc::{ErrorKind, Peer, RpcError};

/// A handler's context for one REST request: the caller's session on a
/// peer no socket drains (the message handlers never call the caller).
pub(super) async fn context(
    hub: &Arc<Hub>,
    headers: &HeaderMap,
    remote: SocketAddr,
    class: RateClass,
) -> Result<RequestContext, ApiError> {
    let auth = bearer(hub, headers, remote).await?;
    spend(hub, auth.principal, class)?;
    let (peer, _unread) = Peer::new("rest-", 1);
    let session = OnceLock::new();
    let _ = session.set(auth);
    Ok(RequestContext {
        hub: hub.clone(),
        conn: Arc::new(ConnectionInfo {
            id: uuid::Uuid::new_v4(),
            peer,
            session,
            event_start: OnceLock::new(),
        }),
    })
}

/// `POST …/messages` with `*/message/send`'s body but `conversationId`
/// (the path's): 201 `{message, delivery, duplicate?}`.
pub async fn send(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(conversation): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let ctx = context(&hub, &headers, remote, RateClass::Message).await?;
    if headers.contains_key("idempotency-key") {
        // Refused, not ignored: a client retrying on the header would
        // otherwise send twice. `clientMsgId` is a send's idempotency here
        // as on the gateway.
        return Err(ApiError::invalid(
            "idempotency_key_not_taken",
            "Idempotency-Key is not taken by a send: give clientMsgId (a retry with the same one returns the original message)",
            Vec::new(),
        ));
    }
    checked_json(&headers, &body)?;
    let Value::Object(mut fields) = json_value(&body)? else {
        return Err(bad_field("", "must be a JSON object"));
    };
    if fields.contains_key("conversationId") {
        return Err(bad_field("/conversationId", "is the path's: leave it out"));
    }
    let id = path_id(&conversation);
    fields.insert("conversationId".into(), Value::String(id.to_string()));
    let params: MessageSendParams = typed(fields)?;
    let sent = match ctx.principal().kind {
        PrincipalKind::App => task_conversations::app_message_send(ctx, params).await,
        PrincipalKind::Agent | PrincipalKind::Person => conversations::send(ctx, params).await,
    };
    let sent = sent.map_err(api_error)?;
    Ok((StatusCode::CREATED, Json(sent)).into_response())
}

/// `GET …/messages?after=|before=&limit=&threadId=`: `{messages, hasMore}`.
pub async fn list(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(conversation): Path<String>,
    uri: Uri,
) -> Result<Response, ApiError> {
    let ctx = context(&hub, &headers, remote, RateClass::Default).await?;
    let id = path_id(&conversation);
    if ctx.principal().kind == PrincipalKind::App {
        return Err(app_has_no_history(&hub, ctx.principal(), id));
    }
    let query = QueryParams::parse(&uri)?;
    query.only(&["after", "before", "limit", "threadId"])?;
    let limit = query.number("limit")?;
    let params = MessageListParams {
        conversation_id: id,
        after: query.cursor("after")?,
        before: query.cursor("before")?,
        limit: limit.map(|l| u32::try_from(l).unwrap_or(u32::MAX)),
        thread_id: query.uuid("threadId")?,
    };
    let page = conversations::history(ctx, params)
        .await
        .map_err(api_error)?;
    Ok(Json(page).into_response())
}

/// As on the gateway, where apps have no `*/message/list`: the 403 of any
/// refusal, counted and audited as `access` does with every denial.
fn app_has_no_history(hub: &Hub, app: Principal, conversation: Uuid) -> ApiError {
    let (action, reason) = (Action::MessageRead, Reason::SubjectKindNotAllowed);
    let subject = access::subject_of(app);
    let kind = ResourceKind::Conversation;
    access::record_denial(hub, &subject, action, kind, conversation, reason);
    let mut e = ApiError::new(
        StatusCode::FORBIDDEN,
        "forbidden",
        format!(
            "apps have no message history: {action} refused: {}",
            reason.as_str()
        ),
    );
    e.extra = Some(Box::new(serde_json::json!({ "reason": reason.as_str() })));
    e
}

/// The body decoded as the gateway decodes params, so a bad field is named
/// (`parts`, `threadId`, ...) in the 400's pointer.
pub(super) fn typed<T: serde::de::DeserializeOwned>(
    fields: Map<String, Value>,
) -> Result<T, ApiError> {
    crate::protocol::params::decode(Some(Value::Object(fields))).map_err(api_error)
}

/// A gateway error as its REST answer.
pub(super) fn api_error(e: RpcError) -> ApiError {
    let data = e.data.as_deref().cloned().unwrap_or(Value::Null);
    let text = |k: &str| data.get(k).and_then(Value::as_str).map(str::to_string);
    let (status, code) = match e.kind() {
        Some(ErrorKind::InvalidParams) => (StatusCode::BAD_REQUEST, "invalid_request"),
        Some(ErrorKind::NotFound) => (StatusCode::NOT_FOUND, "not_found"),
        Some(ErrorKind::Forbidden) => (StatusCode::FORBIDDEN, "forbidden"),
        Some(ErrorKind::Conflict) if text("reason").as_deref() == Some(access::COMPONENT_USED) => {
            (StatusCode::CONFLICT, access::COMPONENT_USED)
        }
        Some(ErrorKind::Conflict) => (StatusCode::CONFLICT, "conflict"),
        Some(ErrorKind::RateLimited) => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
        _ => return ApiError::internal(),
    };
    let mut api = match text("field") {
        Some(field) if e.kind() == Some(ErrorKind::InvalidParams) => ApiError::invalid(
            code,
            "the request has invalid fields",
            vec![FieldProblem {
                pointer: pointer_of(&field),
                message: problem_of(&e.message, &field),
            }],
        ),
        Some(field) => {
            let mut api = ApiError::new(status, code, e.message.clone());
            api.details = vec![FieldProblem {
                pointer: pointer_of(&field),
                message: e.message,
            }];
            api
        }
        None if e.kind() == Some(ErrorKind::InvalidParams) => {
            ApiError::new(status, code, problem_of(&e.message, ""))
        }
        None => ApiError::new(status, code, e.message),
    };
    if let Some(reason) = text("reason") {
        api.extra = Some(Box::new(serde_json::json!({ "reason": reason })));
    }
    api
}

/// A gateway params message in REST's words: without the JSON-RPC
/// "Invalid params: " label, and without the field's name where the
/// detail's pointer already names it (`parts is required` → `is required`).
fn problem_of(message: &str, field: &str) -> String {
    let text = message.strip_prefix("Invalid params: ").unwrap_or(message);
    let named = |sep: &str| text.strip_prefix(field)?.strip_prefix(sep);
    match (field.is_empty(), named(": ").or_else(|| named(" "))) {
        (false, Some(rest)) if !rest.is_empty() => rest.to_string(),
        _ => text.to_string(),
    }
}

/// A gateway field path (`parts[0].text`) as a JSON pointer
/// (`/parts/0/text`).
fn pointer_of(field: &str) -> String {
    let mut pointer = String::with_capacity(field.len() + 1);
    for segment in field.split(['.', '[']) {
        let segment = segment.trim_end_matches(']');
        if !segment.is_empty() {
            pointer.push('/');
            pointer.push_str(segment);
        }
    }
    pointer
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_field_path_is_a_json_pointer() {
        assert_eq!(super::pointer_of("threadId"), "/threadId");
        assert_eq!(super::pointer_of("parts[0].text"), "/parts/0/text");
    }

    #[test]
    fn a_params_message_loses_its_json_rpc_label_and_the_pointers_name() {
        let problem = super::problem_of;
        assert_eq!(
            problem("Invalid params: parts is required", "parts"),
            "is required"
        );
        assert_eq!(
            problem("Invalid params: state: unknown variant `x`", "state"),
            "unknown variant `x`"
        );
        assert_eq!(
            problem("Invalid params: the body is empty", ""),
            "the body is empty"
        );
        assert_eq!(
            problem("Invalid params: threadIdx is bad", "threadId"),
            "threadIdx is bad"
        );
    }
}
