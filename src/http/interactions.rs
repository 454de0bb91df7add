//! Cards over REST (ADR 0027 §1's table): operating a component, the app's
//! answer and its changes to a component. The handlers are the gateway's
//! own, run on a request context without a socket (as `http::messages`
//! does), so every decision and limit is theirs.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{Map, Value};

use super::body::checked_json;
use super::error::ApiError;
use super::identity::json_value;
use super::manage::{bad_field, path_id};
use super::messages::{api_error, context, typed};
use crate::handlers::interactions;
use crate::hub::Hub;
use crate::protocol::RateClass;

/// The body as an object, with the members the path names refused.
fn body_of(
    headers: &HeaderMap,
    body: &Bytes,
    path_members: &[&str],
) -> Result<Map<String, Value>, ApiError> {
    checked_json(headers, body)?;
    let Value::Object(fields) = json_value(body)? else {
        return Err(bad_field("", "must be a JSON object"));
    };
    if let Some(m) = path_members.iter().find(|m| fields.contains_key(**m)) {
        return Err(bad_field(&format!("/{m}"), "is the path's: leave it out"));
    }
    Ok(fields)
}

/// `POST /api/v1/messages/{messageId}/interactions` `{componentId,
/// values?}`: 201 `{interaction}`.
pub async fn create(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(message): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let ctx = context(&hub, &headers, remote, RateClass::Interaction).await?;
    let mut fields = body_of(&headers, &body, &["messageId"])?;
    fields.insert(
        "messageId".into(),
        Value::String(path_id(&message).to_string()),
    );
    let params = typed(fields)?;
    let created = interactions::create(ctx, params).await.map_err(api_error)?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

/// `POST /api/v1/interactions/{interactionId}/response` `{state, reply?}`.
pub async fn respond(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(interaction): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let ctx = context(&hub, &headers, remote, RateClass::AgentRuntime).await?;
    let mut fields = body_of(&headers, &body, &["interactionId"])?;
    fields.insert(
        "interactionId".into(),
        Value::String(path_id(&interaction).to_string()),
    );
    let params = typed(fields)?;
    let answered = interactions::respond(ctx, params)
        .await
        .map_err(api_error)?;
    Ok(Json(answered).into_response())
}

/// `PATCH /api/v1/messages/{messageId}/components/{componentId}` `{state?,
/// label?}`: `{message}`.
pub async fn update(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path((message, component)): Path<(String, String)>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let ctx = context(&hub, &headers, remote, RateClass::Write).await?;
    let mut fields = body_of(&headers, &body, &["messageId", "componentId"])?;
    fields.insert(
        "messageId".into(),
        Value::String(path_id(&message).to_string()),
    );
    fields.insert(
        "componentId".into(),
        Value::String(path_id(&component).to_string()),
    );
    let params = typed(fields)?;
    let updated = interactions::update(ctx, params).await.map_err(api_error)?;
    Ok(Json(updated).into_response())
}
