//! An app's webhook subscriptions over REST (ADR 0033), with its own key:
//!
//! - `POST /api/v1/webhooks/subscriptions` `{url, eventTypes, hmac?}`: 201
//!   `{subscription, secret?}`, the `whsec_` secret shown this once; an
//!   `Idempotency-Key` replays the first answer, the secret withheld;
//! - `GET /api/v1/webhooks/subscriptions`: `{subscriptions}`;
//! - `GET|DELETE /api/v1/webhooks/subscriptions/{subscriptionId}`;
//! - `GET /api/v1/webhooks/subscriptions/{subscriptionId}/attempts`: the
//!   delivery log, newest first.
//!
//! The decision is `event.read` on the app's own stream, the rule of its
//! catch-up: an active installation holding `events:subscribe`. People and
//! agents are refused; another app's subscription is a missing one.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use uuid::Uuid;

use super::body::checked_json;
use super::error::ApiError;
use super::identity::{json_value, Client, Idempotency};
use super::manage::path_id;
use super::messages::context;
use super::query::QueryParams;
use crate::access::{self, Target};
use crate::domain::authz::{Action, Reason, ResourceKind};
use crate::domain::event::rfc3339;
use crate::domain::webhook::{validate_request, Source};
use crate::domain::{now_millis, PrincipalKind};
use crate::hub::Hub;
use crate::protocol::RateClass;
use crate::store::{Attempt, NewSubscription, StoreError, SubscriptionRecord};
use crate::webhooks::{keys, subscription_secret};

/// Attempts answered by default and at most.
const ATTEMPTS_DEFAULT: u32 = 50;
const ATTEMPTS_MAX: u32 = 500;

fn store_failure(e: StoreError) -> ApiError {
    tracing::error!(error = %e, "store failure");
    ApiError::internal()
}

fn not_found() -> ApiError {
    ApiError::not_found("subscription not found")
}

/// The calling app, admitted by `event.read` on its own stream.
async fn the_app(
    hub: &Arc<Hub>,
    headers: &HeaderMap,
    remote: SocketAddr,
    class: RateClass,
) -> Result<Uuid, ApiError> {
    let ctx = context(hub, headers, remote, class).await?;
    let me = ctx.principal();
    if me.kind != PrincipalKind::App {
        let (action, reason) = (Action::EventRead, Reason::SubjectKindNotAllowed);
        let subject = access::subject_of(me);
        access::record_denial(hub, &subject, action, ResourceKind::Stream, me.id, reason);
        let mut e = ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "webhook subscriptions are an app's: use an app key",
        );
        e.extra = Some(Box::new(json!({ "reason": reason.as_str() })));
        return Err(e);
    }
    access::check_rest(hub, me, Action::EventRead, Target::stream(me.id)).await?;
    Ok(me.id)
}

/// The app's own subscription, or the answer a missing one gets.
async fn own(hub: &Hub, app: Uuid, id: &str) -> Result<SubscriptionRecord, ApiError> {
    match hub.store.subscription(path_id(id)).await {
        Ok(Some(s)) if s.app_id == app => Ok(s),
        Ok(_) => Err(not_found()),
        Err(e) => Err(store_failure(e)),
    }
}

pub fn subscription_view(s: &SubscriptionRecord) -> Value {
    let mut v = json!({
        "id": s.id,
        "url": s.url,
        "eventTypes": s.event_types,
        "source": s.source.as_str(),
        "hmac": s.hmac,
        "state": if s.disabled.is_some() { "disabled" } else { "active" },
        "cursor": s.cursor,
        "attempts": s.attempts,
        "nextAttemptAt": rfc3339(s.next_attempt_at),
        "createdAt": rfc3339(s.created_at),
    });
    if let Some(reason) = s.disabled {
        v["disabledReason"] = json!(reason.as_str());
    }
    if let Some(since) = s.failing_since {
        v["failingSince"] = json!(rfc3339(since));
    }
    v
}

pub fn attempt_view(a: &Attempt) -> Value {
    let mut v = json!({
        "seq": a.seq,
        "attempt": a.attempt,
        "at": rfc3339(a.at),
        "durationMs": a.duration_ms,
        "outcome": a.outcome.as_str(),
    });
    if let Some(id) = a.event_id {
        v["eventId"] = json!(id);
    }
    if let Some(status) = a.status {
        v["status"] = json!(status);
    }
    if let Some(next) = a.next_attempt_at {
        v["nextAttemptAt"] = json!(rfc3339(next));
    }
    v
}

/// `POST /api/v1/webhooks/subscriptions`.
pub async fn create(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let app = the_app(&hub, &headers, remote, RateClass::Write).await?;
    let idem = Idempotency::from_request(
        "webhook.subscribe",
        &Client::principal(app),
        &headers,
        &body,
    )?;
    if let Some(replayed) = replay(&hub, idem.as_ref()).await? {
        return Ok(replayed);
    }
    checked_json(&headers, &body)?;
    let bounds = hub.config.manifest_bounds();
    let request = validate_request(
        &json_value(&body)?,
        &bounds.egress_allowlist,
        &bounds.app_event_types,
    )
    .map_err(|p| ApiError::invalid("invalid_request", "the request has invalid fields", p))?;
    ready_to_sign(&hub).await?;
    let id = Uuid::now_v7();
    let minted = match request.hmac {
        true => Some(
            subscription_secret::mint(&hub.config.webhooks, id).map_err(|_| {
                ApiError::new(
                    StatusCode::CONFLICT,
                    "hmac_unavailable",
                    "this hub has no webhooks.key_encryption_key to keep a v1 secret",
                )
            })?,
        ),
        false => None,
    };
    let new = NewSubscription {
        id,
        app_id: app,
        source: Source::Api,
        url: &request.url,
        event_types: &request.event_types,
        sealed_secret: minted.as_ref().map(|m| m.sealed.as_slice()),
        limit: hub.config.webhooks.max_subscriptions_per_app,
        now: now_millis(),
        idem: None,
    };
    // The replay withholds the secret: it is shown once, as keys are.
    let record = |s: &SubscriptionRecord| {
        let mut answer = json!({ "subscription": subscription_view(s) });
        if s.hmac {
            answer["secretWithheld"] = json!(true);
        }
        idem.as_ref()
            .expect("only with a key")
            .record_answer(answer)
    };
    let new = NewSubscription {
        idem: idem.as_ref().map(|_| &record as _),
        ..new
    };
    let created = match hub.store.create_subscription(&new).await {
        Ok(s) => s,
        Err(StoreError::IdempotencyTaken) => {
            return match replay(&hub, idem.as_ref()).await? {
                Some(replayed) => Ok(replayed),
                None => Err(store_failure(StoreError::IdempotencyTaken)),
            }
        }
        Err(StoreError::Conflict(_)) => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "subscription_limit",
                format!(
                    "the app holds {} subscriptions already (webhooks.max_subscriptions_per_app)",
                    hub.config.webhooks.max_subscriptions_per_app
                ),
            ))
        }
        Err(e) => return Err(store_failure(e)),
    };
    tracing::info!(subscription = %created.id, app = %app, hmac = created.hmac, "webhook subscription created");
    let mut answer = json!({ "subscription": subscription_view(&created) });
    if let Some(m) = minted {
        answer["secret"] = json!(m.shown);
    }
    let mut response = (StatusCode::CREATED, Json(answer)).into_response();
    // The secret is shown this once: no cache keeps a copy.
    response.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    Ok(response)
}

/// A retry of a create with the same `Idempotency-Key` gets the first
/// answer (its secret withheld); a reuse with another body is 409.
async fn replay(hub: &Hub, idem: Option<&Idempotency>) -> Result<Option<Response>, ApiError> {
    match idem {
        Some(idem) => idem.replay(hub).await,
        None => Ok(None),
    }
}

/// A subscription nobody can sign for is refused now, not failed later.
async fn ready_to_sign(hub: &Hub) -> Result<(), ApiError> {
    match keys::signers(hub.store.as_ref(), &hub.config.webhooks, now_millis()).await {
        Ok(s) if !s.is_empty() => Ok(()),
        Ok(_) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "no_signing_key",
            "this hub has no webhook signing key yet; the operator runs `switchboard keys rotate`",
        )),
        Err(e) => {
            tracing::error!(error = %e, "webhook signing keys do not open");
            Err(ApiError::internal())
        }
    }
}

/// `GET /api/v1/webhooks/subscriptions`.
pub async fn list(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let app = the_app(&hub, &headers, remote, RateClass::Default).await?;
    let subs = hub
        .store
        .subscriptions_of(app)
        .await
        .map_err(store_failure)?;
    let views: Vec<Value> = subs.iter().map(subscription_view).collect();
    Ok(Json(json!({ "subscriptions": views })).into_response())
}

/// `GET /api/v1/webhooks/subscriptions/{subscriptionId}`.
pub async fn read(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let app = the_app(&hub, &headers, remote, RateClass::Default).await?;
    let sub = own(&hub, app, &id).await?;
    Ok(Json(json!({ "subscription": subscription_view(&sub) })).into_response())
}

/// `DELETE /api/v1/webhooks/subscriptions/{subscriptionId}`: 204; a
/// manifest's subscription follows its manifest (409).
pub async fn delete(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let app = the_app(&hub, &headers, remote, RateClass::Write).await?;
    match hub.store.delete_subscription(app, path_id(&id)).await {
        Ok(true) => Ok(StatusCode::NO_CONTENT.into_response()),
        Ok(false) => Err(not_found()),
        Err(StoreError::Conflict(_)) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "manifest_subscription",
            "this subscription comes from the app's manifest: upgrade the manifest to change it",
        )),
        Err(e) => Err(store_failure(e)),
    }
}

/// `GET /api/v1/webhooks/subscriptions/{subscriptionId}/attempts?limit=`.
pub async fn attempts(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(id): Path<String>,
    QueryParams(query): QueryParams,
) -> Result<Response, ApiError> {
    let app = the_app(&hub, &headers, remote, RateClass::Default).await?;
    let limit = attempts_limit(&query)?;
    let sub = own(&hub, app, &id).await?;
    let log = hub
        .store
        .attempts(sub.id, limit)
        .await
        .map_err(store_failure)?;
    let views: Vec<Value> = log.iter().map(attempt_view).collect();
    Ok(Json(json!({ "attempts": views })).into_response())
}

fn attempts_limit(query: &HashMap<String, String>) -> Result<u32, ApiError> {
    let bad = || {
        ApiError::invalid(
            "invalid_limit",
            format!("limit must be an integer from 1 to {ATTEMPTS_MAX}"),
            Vec::new(),
        )
    };
    if query.keys().any(|k| k.as_str() != "limit") {
        return Err(ApiError::invalid(
            "invalid_query",
            "the only query parameter is limit",
            Vec::new(),
        ));
    }
    match query.get("limit") {
        None => Ok(ATTEMPTS_DEFAULT),
        Some(v) => match v.parse::<u32>() {
            Ok(n) if (1..=ATTEMPTS_MAX).contains(&n) => Ok(n),
            _ => Err(bad()),
        },
    }
}
