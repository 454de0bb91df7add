//! An app's `interactionsUrl` (ADR 0032 §2): its state, and the check run
//! again on demand, synchronously through this hub. The operator's token
//! or the app's own key; another app's id answers as a missing app.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde_json::Value;
use uuid::Uuid;

use super::error::ApiError;
use super::installations::{app_id, app_not_found, operator_or_app};
use super::manage::store_failure;
use crate::app_url::verify;
use crate::domain::authz::Action;
use crate::hub::Hub;
use crate::protocol::RateClass;

/// 409 `no_interactions_url`: the app is reached over its socket, so its
/// state has no URL to show or check.
fn no_url() -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "no_interactions_url",
        "the app's manifest names no interactionsUrl (delivery.mode is gateway)",
    )
}

/// The app's URL state now; `None` without a URL.
async fn state(hub: &Hub, app: Uuid) -> Result<Value, ApiError> {
    let record = hub
        .store
        .app(app)
        .await
        .map_err(store_failure)?
        .ok_or_else(app_not_found)?;
    let check = hub
        .store
        .url_check(app)
        .await
        .map_err(store_failure)?
        .unwrap_or_default();
    check.view(&record.manifest).ok_or_else(no_url)
}

/// `GET /api/v1/apps/{appId}/interactions-url`: `{state, reason?,
/// checkedAt?}`.
pub async fn read(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(raw): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let app = app_id(&raw)?;
    let grant = (RateClass::Default, Action::InstallationRead);
    operator_or_app(&hub, &headers, remote, app, grant).await?;
    Ok(Json(state(&hub, app).await?))
}

/// `POST /api/v1/apps/{appId}/interactions-url/verify`: the check, now;
/// answers the state it left.
pub async fn verify(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(raw): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let app = app_id(&raw)?;
    let grant = (RateClass::Write, Action::AppUpgrade);
    operator_or_app(&hub, &headers, remote, app, grant).await?;
    if hub.store.app(app).await.map_err(store_failure)?.is_none() {
        return Err(app_not_found());
    }
    verify::run(hub.store.as_ref(), &hub.interactions, &hub.sync_epoch, app)
        .await
        .map_err(store_failure)?
        .ok_or_else(no_url)?;
    Ok(Json(state(&hub, app).await?))
}
