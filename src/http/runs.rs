//! Hosted App Card runs over REST (ADR 0031 §3), the operator's routes:
//! `POST /api/v1/cards/{cardId}/runs` starts a hub-managed run,
//! `GET /api/v1/runs` lists, `GET /api/v1/runs/{runId}` shows one with its
//! log, `POST /api/v1/runs/{runId}/stop` stops it.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::admin::check_admin;
use super::error::ApiError;
use super::identity::json_object;
use super::manage::path_id;
use super::query::QueryParams;
use crate::domain::event::rfc3339;
use crate::domain::hosted::RunRefusal;
use crate::hosted::{self, Source, StartError};
use crate::hub::Hub;
use crate::store::{RunRecord, StoreError};

/// Most runs one list answers (`limit`'s bound).
pub const RUNS_PAGE_MAX: u64 = 500;

/// A run as the routes answer it; `log` only when asked for.
pub fn run_json(r: &RunRecord, with_log: bool) -> Value {
    let mut v = json!({
        "runId": r.id,
        "cardId": r.card_id,
        "version": r.version,
        "appId": r.app_id,
        "state": r.state.as_str(),
        "isolated": r.isolated,
        "createdAt": rfc3339(r.created_at),
    });
    if let Some(reason) = &r.reason {
        v["reason"] = json!(reason);
    }
    if let Some(code) = r.exit_code {
        v["exitCode"] = json!(code);
    }
    if let Some(at) = r.ended_at {
        v["endedAt"] = json!(rfc3339(at));
    }
    if with_log {
        v["log"] = json!(String::from_utf8_lossy(
            r.log.as_deref().unwrap_or_default()
        ));
    }
    v
}

fn store_failure(e: StoreError) -> ApiError {
    tracing::error!(error = %e, "store failure");
    ApiError::internal()
}

fn refusal(r: RunRefusal, run: Option<uuid::Uuid>) -> ApiError {
    // The operator's route: an unknown card is a plain 404, nothing is
    // hidden from the operator.
    let status = match r {
        RunRefusal::CardNotFound(_) => StatusCode::NOT_FOUND,
        RunRefusal::TooManyRuns => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::CONFLICT,
    };
    let mut e = ApiError::new(status, r.code(), r.to_string());
    if let Some(id) = run {
        e.extra = Some(Box::new(json!({ "runId": id })));
    }
    e
}

/// `POST /api/v1/cards/{cardId}/runs` (empty body or `{}`): 201 the run.
pub async fn start(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(card_id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    check_admin(&hub, &headers, remote).await?;
    if !body.is_empty() {
        super::body::checked_json(&headers, &body)?;
        json_object(&body, &[])?;
    }
    match hosted::start(&hub, &Source::Card(card_id)).await {
        Ok(started) => {
            Ok((StatusCode::CREATED, Json(run_json(&started.run, false))).into_response())
        }
        Err(StartError::Refused { refusal: r, run }) => Err(refusal(r, run)),
        Err(StartError::Internal(m)) => {
            tracing::error!(error = %m, "hosted run failed to start");
            Err(ApiError::internal())
        }
    }
}

/// `GET /api/v1/runs?cardId=&limit=`: the newest runs first.
pub async fn list(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    query: QueryParams,
) -> Result<Json<Value>, ApiError> {
    check_admin(&hub, &headers, remote).await?;
    query.only(&["cardId", "limit"])?;
    let limit = match query.number("limit")? {
        None => 100,
        Some(n) if (1..=RUNS_PAGE_MAX).contains(&n) => n,
        Some(_) => {
            return Err(ApiError::invalid(
                "invalid_query",
                format!("limit must be from 1 to {RUNS_PAGE_MAX}"),
                Vec::new(),
            ))
        }
    };
    let card = query.0.get("cardId").map(String::as_str);
    let runs = hub
        .store
        .runs(card, limit as u32)
        .await
        .map_err(store_failure)?;
    let list: Vec<Value> = runs.iter().map(|r| run_json(r, false)).collect();
    Ok(Json(json!({ "runs": list })))
}

/// `GET /api/v1/runs/{runId}`: the run with its log.
pub async fn show(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(run): Path<String>,
) -> Result<Json<Value>, ApiError> {
    check_admin(&hub, &headers, remote).await?;
    match hub.store.run(path_id(&run)).await.map_err(store_failure)? {
        Some(r) => Ok(Json(run_json(&r, true))),
        None => Err(ApiError::not_found("no such run")),
    }
}

/// `POST /api/v1/runs/{runId}/stop`: 202 while it stops; 409 `run_not_live`
/// when it has ended.
pub async fn stop(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(run): Path<String>,
) -> Result<Response, ApiError> {
    check_admin(&hub, &headers, remote).await?;
    let id = path_id(&run);
    let Some(record) = hub.store.run(id).await.map_err(store_failure)? else {
        return Err(ApiError::not_found("no such run"));
    };
    if !hosted::stop(&hub, id).await.map_err(store_failure)? {
        let mut e = ApiError::new(
            StatusCode::CONFLICT,
            "run_not_live",
            format!("the run has ended ({})", record.state.as_str()),
        );
        e.extra = Some(Box::new(json!({ "state": record.state.as_str() })));
        return Err(e);
    }
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "runId": id, "stopping": true })),
    )
        .into_response())
}
