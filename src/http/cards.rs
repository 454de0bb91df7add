//! The App Card catalogue over REST: operators install, anyone reads.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::{json, Value};

use super::admin::check_admin;
use super::body::checked_json;
use super::error::ApiError;
use super::identity::json_object;
use crate::cards::{self, InstallError};
use crate::hub::Hub;

/// `POST /api/v1/cards` `{card, files: {path: base64}, forceAuthor?}`.
pub async fn install(
    State(hub): State<Arc<Hub>>,
    axum::extract::ConnectInfo(remote): axum::extract::ConnectInfo<std::net::SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    check_admin(&hub, &headers, remote).await?;
    checked_json(&headers, &body)?;
    // Strict: a duplicate key anywhere in the card is refused here too.
    let doc = crate::domain::card::strict::parse(&body)
        .map_err(|e| ApiError::invalid(e.code(), e.to_string(), Vec::new()))?;
    let body = json_object(
        &serde_json::to_vec(&doc).expect("serializes").into(),
        &["card", "files", "forceAuthor"],
    )?;
    let card = body
        .get("card")
        .ok_or_else(|| bad("invalid_request", "card is required"))?;
    let mut files = BTreeMap::new();
    if let Some(map) = body.get("files") {
        let map = map.as_object().ok_or_else(|| {
            bad(
                "invalid_request",
                "files must be an object of base64 strings",
            )
        })?;
        for (path, b64) in map {
            let bytes = b64
                .as_str()
                .and_then(|s| STANDARD.decode(s).ok())
                .ok_or_else(|| bad("invalid_request", &format!("files.{path} must be base64")))?;
            files.insert(path.clone(), bytes);
        }
    }
    let force = match body.get("forceAuthor") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(bad("invalid_request", "forceAuthor must be a boolean")),
    };
    let app_json = serde_json::to_vec(card).expect("serializes");
    match cards::install(hub.store.as_ref(), &app_json, &files, &[], force).await {
        Ok(c) => Ok((
            StatusCode::CREATED,
            Json(json!({ "id": c.id, "version": c.version, "author": c.author })),
        )
            .into_response()),
        Err(InstallError::Card(e)) => Err(ApiError::invalid(e.code(), e.to_string(), Vec::new())),
        Err(InstallError::Conflict(m)) => {
            Err(ApiError::new(StatusCode::CONFLICT, "card_conflict", m))
        }
        Err(InstallError::Store(e)) => {
            tracing::error!(error = %e, "store failure");
            Err(ApiError::internal())
        }
    }
}

fn bad(code: &'static str, message: &str) -> ApiError {
    ApiError::invalid(code, message, Vec::new())
}

/// `GET /api/v1/cards`: the installed cards.
/// Takes no query: an unknown parameter is refused, as on every route
/// that reads one, rather than silently ignored.
pub async fn list(
    State(hub): State<Arc<Hub>>,
    query: super::query::QueryParams,
) -> Result<Json<Value>, ApiError> {
    query.only(&[])?;
    let cards = hub.store.cards().await.map_err(|e| {
        tracing::error!(error = %e, "store failure");
        ApiError::internal()
    })?;
    let list: Vec<Value> = cards
        .iter()
        .map(|c| {
            json!({
                "id": c.id,
                "version": c.version,
                "author": c.author,
                "primitives": c.primitives,
                "integrity": c.integrity,
                "installedAt": crate::domain::event::rfc3339(c.installed_at),
            })
        })
        .collect();
    Ok(Json(json!({ "cards": list })))
}
