//! `GET /api/v1/audit`: the operator reads the audit of denials (ADR 0020
//! §4), filtered by actor, action and reason, paged by record id; and
//! `GET /api/v1/audit/actions`, the owner actions on apps (ADR 0023 §5).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, State};
use axum::http::HeaderMap;
use axum::Json;
use serde_json::{json, Value};

use super::admin::check_admin;
use super::error::ApiError;
use super::query::{invalid, QueryParams};
use crate::domain::authz::{Action, Reason};
use crate::domain::event::rfc3339;
use crate::hub::Hub;
use crate::store::{ActionFilter, ActionRecord, AuditFilter, AuditRecord};

const PARAMS: [&str; 5] = ["after", "limit", "actorId", "action", "reason"];

/// What one page asks for, checked parameter by parameter.
struct PageQuery {
    filter: AuditFilter,
    after: Option<uuid::Uuid>,
    limit: u32,
}

fn page_query(query: &QueryParams, hub: &Hub) -> Result<PageQuery, ApiError> {
    query.only(&PARAMS)?;
    let limit = page_limit(query, hub)?;
    Ok(PageQuery {
        filter: AuditFilter {
            actor: query.uuid("actorId")?,
            action: query.one_of("action", "an action of the catalogue", Action::parse)?,
            reason: query.one_of("reason", "a denial reason", Reason::parse)?,
        },
        after: query.uuid("after")?,
        limit,
    })
}

pub(super) fn record_json(r: &AuditRecord) -> Value {
    let d = &r.denial;
    json!({
        "id": r.id,
        "actorId": d.actor_id,
        "actorKind": d.actor_kind.as_str(),
        "action": d.action.as_str(),
        "reason": d.reason.as_str(),
        "resourceKind": d.resource_kind.as_str(),
        "resourceId": d.resource_id,
        "firstAt": rfc3339(r.first_at),
        "lastAt": rfc3339(r.last_at),
        "count": r.count,
    })
}

/// `GET /api/v1/audit?after=&limit=&actorId=&action=&reason=`, behind
/// `admin.token`: `{records, nextAfter?}`, `nextAfter` present when the
/// page is full.
pub async fn list(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    uri: axum::http::Uri,
) -> Result<Json<Value>, ApiError> {
    // The caller first: while the route is hidden, its query is never read.
    check_admin(&hub, &headers, remote).await?;
    let q = page_query(&QueryParams::parse(&uri)?, &hub)?;
    let records = hub
        .store
        .denials(q.filter, q.after, q.limit)
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "store failure");
            ApiError::internal()
        })?;
    let mut body = json!({ "records": records.iter().map(record_json).collect::<Vec<_>>() });
    if records.len() == q.limit as usize {
        if let Some(last) = records.last() {
            body["nextAfter"] = json!(last.id);
        }
    }
    Ok(Json(body))
}

const ACTION_PARAMS: [&str; 3] = ["after", "limit", "appId"];

fn page_limit(query: &QueryParams, hub: &Hub) -> Result<u32, ApiError> {
    let cfg = &hub.config.audit;
    match query.number("limit")? {
        None => Ok(cfg.page_default),
        Some(n) if (1..=u64::from(cfg.page_max)).contains(&n) => Ok(n as u32),
        Some(_) => Err(invalid(
            "limit",
            format!("must be from 1 to {} (audit.page_max)", cfg.page_max),
        )),
    }
}

/// One owner action; a member the action has no value for (the
/// operator's `actorId`, the scopes and state before an install) is left
/// out, never `null` (docs/protocol.md, `rpc/openapi.json`).
fn action_json(r: &ActionRecord) -> Value {
    let scopes = |s: Option<crate::domain::installation::ScopeSet>| s.map(|s| s.to_vec());
    let mut record = json!({
        "id": r.id,
        "actorKind": r.actor.kind_str(),
        "action": r.action.as_str(),
        "appId": r.app_id,
        "at": rfc3339(r.at),
    });
    let optional = [
        ("actorId", json!(r.actor.id())),
        ("scopesBefore", json!(scopes(r.scopes_before))),
        ("scopesAfter", json!(scopes(r.scopes_after))),
        ("stateBefore", json!(r.state_before)),
        ("stateAfter", json!(r.state_after)),
    ];
    for (name, value) in optional {
        if !value.is_null() {
            record[name] = value;
        }
    }
    if let Some(details) = &r.details {
        record["details"] = json!(details);
    }
    record
}

/// `GET /api/v1/audit/actions?after=&limit=&appId=`, behind `admin.token`:
/// the owner actions on apps (ADR 0023 §5), `{records, nextAfter?}`.
pub async fn list_actions(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    uri: axum::http::Uri,
) -> Result<Json<Value>, ApiError> {
    check_admin(&hub, &headers, remote).await?;
    let query = QueryParams::parse(&uri)?;
    query.only(&ACTION_PARAMS)?;
    let limit = page_limit(&query, &hub)?;
    let filter = ActionFilter {
        app: query.uuid("appId")?,
    };
    let after = query.uuid("after")?;
    let records = hub.store.actions(filter, after, limit).await.map_err(|e| {
        tracing::error!(error = %e, "store failure");
        ApiError::internal()
    })?;
    let mut body = json!({ "records": records.iter().map(action_json).collect::<Vec<_>>() });
    if records.len() == limit as usize {
        if let Some(last) = records.last() {
            body["nextAfter"] = json!(last.id);
        }
    }
    Ok(Json(body))
}
