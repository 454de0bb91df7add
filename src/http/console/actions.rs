//! The console's actions: suspend or resume an app, revoke an agent's keys,
//! run an app's check. Each needs a live session and its CSRF header, then
//! takes the very path of the operator's REST route (the same
//! `hub::installations` transition with its audit row, the same revoke
//! with its closed sockets, the same check), never a side door.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::{Extension, Json};
use serde_json::{json, Value};
use uuid::Uuid;

use super::login::operator;
use super::Console;
use crate::domain::installation::Transition;
use crate::http::error::ApiError;
use crate::http::installations::{app_id, object_body, operator_transition};
use crate::hub::Hub;

/// The session, its CSRF header and an empty (or `{}`) body.
async fn admitted(
    hub: &Hub,
    console: &Console,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<(), ApiError> {
    operator(hub, console, headers, true).await?;
    object_body(headers, body, &[])?;
    Ok(())
}

async fn transition(
    hub: Arc<Hub>,
    console: Arc<Console>,
    headers: HeaderMap,
    raw: String,
    body: Bytes,
    transition: Transition,
) -> Result<Json<Value>, ApiError> {
    admitted(&hub, &console, &headers, &body).await?;
    let app = app_id(&raw)?;
    let answer = operator_transition(&hub, app, transition).await?;
    tracing::info!(app = %app, ?transition, "installation changed from the console");
    Ok(Json(answer))
}

/// `POST /console/api/apps/{appId}/suspend`: the app's sockets close.
pub async fn suspend(
    State(hub): State<Arc<Hub>>,
    Extension(console): Extension<Arc<Console>>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    transition(hub, console, headers, raw, body, Transition::Suspend).await
}

/// `POST /console/api/apps/{appId}/resume`.
pub async fn resume(
    State(hub): State<Arc<Hub>>,
    Extension(console): Extension<Arc<Console>>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    transition(hub, console, headers, raw, body, Transition::Resume).await
}

/// `POST /console/api/apps/{appId}/check`: `{appId, ok, gates}`, as
/// `POST /api/v1/apps/{appId}/check` answers it.
pub async fn check(
    State(hub): State<Arc<Hub>>,
    Extension(console): Extension<Arc<Console>>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    admitted(&hub, &console, &headers, &body).await?;
    let app = app_id(&raw)?;
    Ok(Json(
        crate::http::app_health::check_answer(&hub, app).await?,
    ))
}

/// `POST /console/api/agents/{agentId}/keys/revoke`: `{revoked}`, the
/// number of keys revoked; the agent's sockets close with 4003.
pub async fn revoke_keys(
    State(hub): State<Arc<Hub>>,
    Extension(console): Extension<Arc<Console>>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    admitted(&hub, &console, &headers, &body).await?;
    // A malformed id names no agent: the nil id, which none has.
    let agent = Uuid::parse_str(&raw).unwrap_or(Uuid::nil());
    let revoked = crate::http::people::revoke_as_operator(&hub, agent).await?;
    Ok(Json(json!({ "revoked": revoked.len() })))
}
