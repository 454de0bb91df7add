//! The installation routes (ADR 0023 §4, §5): the operator's install, set
//! scopes, suspend, resume and uninstall; the installation's read and the
//! manifest's upgrade, also by the app itself with its key (its own id
//! only: any other id answers as a missing app, without a lookup); and the
//! audit of owner actions. Each is one call of `hub::installations`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use super::admin::check_admin;
use super::body::checked_json;
use super::error::ApiError;
use super::identity::{bearer, bearer_token, created_with_key, json_value, Client, Idempotency};
use super::manage::spend;
use crate::access;
use crate::domain::authz::Action;
use crate::domain::event::rfc3339;
use crate::domain::installation::{Actor, Scope, Transition};
use crate::domain::validate::FieldProblem;
use crate::domain::PrincipalKind;
use crate::hub::installations::{scopes_view, Lifecycle, LifecycleError};
use crate::hub::Hub;
use crate::protocol::RateClass;
use crate::store::{IdempotencyRecord, InstallationRecord};

/// `{installationId, state, scopes: {requested, granted, effective}}`: the
/// registration answer's `installation` (absent, never `null`, when the
/// app waits for the operator).
pub(super) fn installation_summary(r: &InstallationRecord) -> Value {
    json!({
        "installationId": r.id,
        "state": r.state,
        "scopes": scopes_view(r),
    })
}

/// The installation as its routes answer it.
fn installation_view(r: &InstallationRecord) -> Value {
    json!({
        "installationId": r.id,
        "appId": r.app_id,
        "state": r.state,
        "scopes": scopes_view(r),
        "createdAt": rfc3339(r.created_at),
        "updatedAt": rfc3339(r.updated_at),
    })
}

/// The one answer for an app the caller cannot name: missing, not an app,
/// or another app's id with an app key (nothing is read for it).
pub(super) fn app_not_found() -> ApiError {
    ApiError::not_found("app not found")
}

impl From<LifecycleError> for ApiError {
    fn from(e: LifecycleError) -> Self {
        match e {
            LifecycleError::AppNotFound => app_not_found(),
            LifecycleError::NotInstalled => ApiError::not_found("installation not found"),
            LifecycleError::Conflict { message, state } => {
                let mut e = ApiError::new(StatusCode::CONFLICT, "conflict", message);
                if let Some(state) = state {
                    e.extra = Some(Box::new(json!({ "state": state })));
                }
                e
            }
            LifecycleError::Invalid(details) => {
                ApiError::invalid("invalid_request", "the request has invalid fields", details)
            }
            LifecycleError::CommandConflict(problem) => {
                let mut e =
                    ApiError::new(StatusCode::CONFLICT, "conflict", problem.message.clone());
                e.details = vec![problem];
                e
            }
            LifecycleError::IdempotencyTaken => ApiError::new(
                StatusCode::CONFLICT,
                "idempotency_conflict",
                "this Idempotency-Key was used already",
            ),
            LifecycleError::Store(e) => {
                tracing::error!(error = %e, "store failure");
                ApiError::internal()
            }
        }
    }
}

pub(super) fn app_id(raw: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(raw).map_err(|_| app_not_found())
}

/// The operator, or the app `app_id` itself by its key (spending one call
/// of `class`, then deciding `action`, so a suspended or pending app is
/// 403 `app_suspended` / `app_not_installed` like on every other route).
/// Another principal's key is 403; another app's is the missing app's 404.
pub(super) async fn operator_or_app(
    hub: &Hub,
    headers: &HeaderMap,
    remote: SocketAddr,
    app_id: Uuid,
    (class, action): (RateClass, Action),
) -> Result<Actor, ApiError> {
    let is_key = bearer_token(headers).is_some_and(|t| crate::domain::keys::parse(t).is_some());
    if !is_key {
        check_admin(hub, headers, remote).await?;
        return Ok(Actor::Operator);
    }
    let principal = bearer(hub, headers, remote).await?.principal;
    if principal.kind != PrincipalKind::App {
        let mut e = ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "only the operator or the app itself may do this",
        );
        e.extra = Some(Box::new(json!({ "reason": "subject_kind_not_allowed" })));
        return Err(e);
    }
    if principal.id != app_id {
        return Err(app_not_found());
    }
    spend(hub, principal, class)?;
    access::check_rest(hub, principal, action, access::Target::app(app_id)).await?;
    Ok(Actor::App(principal.id))
}

/// A JSON object body with only `known` members; an empty body is `{}`.
pub(super) fn object_body(
    headers: &HeaderMap,
    body: &Bytes,
    known: &[&str],
) -> Result<Map<String, Value>, ApiError> {
    if body.is_empty() {
        return Ok(Map::new());
    }
    checked_json(headers, body)?;
    super::identity::json_object(body, known)
}

/// `scopes`: an array of scope names, each problem at `/scopes/<i>`.
fn scopes_member(body: &Map<String, Value>) -> Result<Option<Vec<Scope>>, ApiError> {
    let Some(value) = body.get("scopes") else {
        return Ok(None);
    };
    let problem = |pointer: String, message: &str| {
        ApiError::invalid(
            "invalid_request",
            "the request has invalid fields",
            vec![FieldProblem {
                pointer,
                message: message.into(),
            }],
        )
    };
    let Some(items) = value.as_array() else {
        return Err(problem("/scopes".into(), "must be an array of scope names"));
    };
    let mut scopes = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        match item.as_str().and_then(Scope::parse) {
            Some(scope) => scopes.push(scope),
            None => return Err(problem(
                format!("/scopes/{i}"),
                "must be one of messages:write, commands:write, components:write, events:subscribe",
            )),
        }
    }
    Ok(Some(scopes))
}

/// `POST /api/v1/apps/{appId}/installation {scopes?}` (operator): 201
/// `{installation, appKey?}`, the key only when the app had none.
pub async fn install(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    check_admin(&hub, &headers, remote).await?;
    let app = app_id(&raw)?;
    let idem = Idempotency::from_request("install", &Client::operator(), &headers, &body)?
        .map(|i| i.for_target(app));
    if let Some(replayed) = replay(&hub, idem.as_ref()).await? {
        return Ok(replayed);
    }
    let scopes = scopes_member(&object_body(&headers, &body, &["scopes"])?)?;
    let record = |r: &InstallationRecord| -> IdempotencyRecord {
        let answer = json!({ "installation": installation_view(r), "keyWithheld": true });
        idem.as_ref()
            .expect("only with a key")
            .record_answer(answer)
    };
    let installed = Lifecycle::of(&hub)
        .install(
            app,
            scopes.as_deref(),
            Actor::Operator,
            idem.as_ref().map(|_| &record as _),
        )
        .await;
    let installed = match installed {
        Err(LifecycleError::IdempotencyTaken) => {
            return match replay(&hub, idem.as_ref()).await? {
                Some(replayed) => Ok(replayed),
                None => Err(LifecycleError::IdempotencyTaken.into()),
            }
        }
        other => other?,
    };
    tracing::info!(app = %app, installation = %installed.installation.id, key_issued = installed.key.is_some(), "app installed");
    let mut answer = json!({ "installation": installation_view(&installed.installation) });
    match installed.key {
        Some(key) => {
            answer["appKey"] = json!(key.plaintext);
            Ok(created_with_key(answer))
        }
        None => Ok((StatusCode::CREATED, Json(answer)).into_response()),
    }
}

async fn replay(hub: &Hub, idem: Option<&Idempotency>) -> Result<Option<Response>, ApiError> {
    match idem {
        Some(idem) => idem.replay(hub).await,
        None => Ok(None),
    }
}

/// `GET /api/v1/apps/{appId}/installation` (operator, or the app).
pub async fn read(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(raw): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let app = app_id(&raw)?;
    operator_or_app(
        &hub,
        &headers,
        remote,
        app,
        (RateClass::Default, Action::InstallationRead),
    )
    .await?;
    let installation = Lifecycle::of(&hub).live(app).await?;
    Ok(Json(installation_view(&installation)))
}

/// `PUT /api/v1/apps/{appId}/installation/scopes {scopes}` (operator).
pub async fn set_scopes(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    check_admin(&hub, &headers, remote).await?;
    let app = app_id(&raw)?;
    checked_json(&headers, &body)?;
    let body = super::identity::json_object(&body, &["scopes"])?;
    let scopes = scopes_member(&body)?.ok_or_else(|| {
        ApiError::invalid(
            "invalid_request",
            "the request has invalid fields",
            vec![FieldProblem {
                pointer: "/scopes".into(),
                message: "is required".into(),
            }],
        )
    })?;
    let installation = Lifecycle::of(&hub)
        .set_scopes(app, &scopes, Actor::Operator)
        .await?;
    Ok(Json(
        json!({ "installation": installation_view(&installation) }),
    ))
}

async fn transition(
    hub: Arc<Hub>,
    remote: SocketAddr,
    headers: HeaderMap,
    raw: String,
    body: Bytes,
    transition: Transition,
) -> Result<Json<Value>, ApiError> {
    check_admin(&hub, &headers, remote).await?;
    let app = app_id(&raw)?;
    object_body(&headers, &body, &[])?;
    Ok(Json(operator_transition(&hub, app, transition).await?))
}

/// The operator's suspend or resume, `{installation}`: the REST routes'
/// and the console's, one path with its audit row.
pub(super) async fn operator_transition(
    hub: &Hub,
    app: Uuid,
    transition: Transition,
) -> Result<Value, ApiError> {
    let installation = Lifecycle::of(hub)
        .transition(app, transition, Actor::Operator)
        .await?;
    Ok(json!({ "installation": installation_view(&installation) }))
}

/// `POST /api/v1/apps/{appId}/installation/suspend` (operator): the app's
/// sockets close with 4012.
pub async fn suspend(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    transition(hub, remote, headers, raw, body, Transition::Suspend).await
}

/// `POST /api/v1/apps/{appId}/installation/resume` (operator).
pub async fn resume(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    transition(hub, remote, headers, raw, body, Transition::Resume).await
}

/// `DELETE /api/v1/apps/{appId}/installation` (operator): 204.
pub async fn uninstall(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(raw): Path<String>,
) -> Result<StatusCode, ApiError> {
    check_admin(&hub, &headers, remote).await?;
    let app = app_id(&raw)?;
    Lifecycle::of(&hub).uninstall(app, Actor::Operator).await?;
    tracing::info!(app = %app, "app uninstalled");
    Ok(StatusCode::NO_CONTENT)
}

/// `PUT /api/v1/apps/{appId}/manifest` (the app's key, spending `write`,
/// or the operator): `{appId, changed, scopes {requested, granted,
/// awaitingConsent}}`.
pub async fn upgrade(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let app = app_id(&raw)?;
    let actor = operator_or_app(
        &hub,
        &headers,
        remote,
        app,
        (RateClass::Write, Action::AppUpgrade),
    )
    .await?;
    checked_json(&headers, &body)?;
    let doc = json_value(&body)?;
    let upgraded = match Lifecycle::of(&hub).upgrade(app, &doc, actor).await {
        Err(LifecycleError::Invalid(details)) => {
            return Err(ApiError::invalid(
                "invalid_manifest",
                "the manifest is invalid",
                details,
            ))
        }
        other => other?,
    };
    let mut answer = json!({
        "appId": app,
        "changed": upgraded.changed,
        "scopes": {
            "requested": upgraded.requested.to_vec(),
            "granted": upgraded.granted.to_vec(),
            "awaitingConsent": upgraded.awaiting_consent().to_vec(),
        },
        "commands": {
            "added": upgraded.commands.added,
            "changed": upgraded.commands.changed,
            "removed": upgraded.commands.removed,
        },
    });
    if let Some(url) = upgraded.interactions_url {
        answer["interactionsUrl"] = url;
    }
    Ok(Json(answer))
}
