//! Who calls a place-management route (ADR 0020 §1's REST table): the
//! operator by its token, or a principal by its key, told apart by whether
//! the Bearer parses as a key. Both are decided by `access`, so a place the
//! caller may not see answers like a missing one; a principal's management
//! call spends its `write` rate class, as the gateway's creates do, and a
//! read (`GET /grants`) its `default` one.

use std::net::SocketAddr;

use axum::http::{HeaderMap, StatusCode};
use serde_json::json;

use super::admin::check_admin;
use super::error::ApiError;
use super::identity::{bearer, bearer_token};
use crate::access::{self, Granted, Target};
use crate::domain::authz::Action;
use crate::domain::place_names;
use crate::domain::validate::FieldProblem;
use crate::domain::Principal;
use crate::hub::Hub;
use crate::protocol::RateClass;

/// The caller of a management route.
#[derive(Clone, Copy, Debug)]
pub enum Manager {
    /// The admin token.
    Operator,
    Principal(Principal),
}

impl Manager {
    /// Who the store records as granting (`None`: the operator).
    pub fn principal_id(&self) -> Option<uuid::Uuid> {
        match self {
            Manager::Operator => None,
            Manager::Principal(p) => Some(p.id),
        }
    }
}

/// The operator or a principal; a principal spends one `write` call.
pub async fn manager(
    hub: &Hub,
    headers: &HeaderMap,
    remote: SocketAddr,
) -> Result<Manager, ApiError> {
    manager_spending(hub, headers, remote, RateClass::Write).await
}

/// [`manager`] for a management route that only reads (`GET /grants`): a
/// principal spends one `default` call, as every read does.
pub async fn manager_reading(
    hub: &Hub,
    headers: &HeaderMap,
    remote: SocketAddr,
) -> Result<Manager, ApiError> {
    manager_spending(hub, headers, remote, RateClass::Default).await
}

async fn manager_spending(
    hub: &Hub,
    headers: &HeaderMap,
    remote: SocketAddr,
    class: RateClass,
) -> Result<Manager, ApiError> {
    let is_key = bearer_token(headers).is_some_and(|t| crate::domain::keys::parse(t).is_some());
    if !is_key {
        check_admin(hub, headers, remote).await?;
        return Ok(Manager::Operator);
    }
    let principal = bearer(hub, headers, remote).await?.principal;
    spend(hub, principal, class)?;
    Ok(Manager::Principal(principal))
}

/// A principal by its key (the read routes: any Bearer).
pub async fn reader(
    hub: &Hub,
    headers: &HeaderMap,
    remote: SocketAddr,
) -> Result<Principal, ApiError> {
    let principal = bearer(hub, headers, remote).await?.principal;
    spend(hub, principal, RateClass::Default)?;
    Ok(principal)
}

/// One call of `class` (`ratelimit.<class>`); 429 with `retryAfterMs` and
/// `class` when it is spent.
pub fn spend(hub: &Hub, principal: Principal, class: RateClass) -> Result<(), ApiError> {
    hub.limiters.check(class, principal.id).map_err(|wait| {
        let class = class.as_str();
        let mut e = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            format!(
                "rate limit of class {class} exceeded (ratelimit.{class}.per_second, ratelimit.{class}.burst)"
            ),
        );
        let wait_ms = (wait.as_millis() as u64).max(1);
        e.extra = Some(Box::new(json!({ "retryAfterMs": wait_ms, "class": class })));
        e
    })
}

/// Decides `action` on `target` for the caller.
pub async fn decide(
    hub: &Hub,
    caller: &Manager,
    action: Action,
    target: Target,
) -> Result<Granted, ApiError> {
    let granted = match caller {
        Manager::Operator => access::check_operator(hub, action, target).await,
        Manager::Principal(p) => access::check_rest(hub, *p, action, target).await,
    };
    Ok(granted?)
}

pub fn store_failure(e: crate::store::StoreError) -> ApiError {
    tracing::error!(error = %e, "store failure");
    ApiError::internal()
}

/// A 400 naming one field.
pub fn bad_field(pointer: &str, message: impl Into<String>) -> ApiError {
    ApiError::invalid(
        "invalid_request",
        "the request has invalid fields",
        vec![FieldProblem {
            pointer: pointer.into(),
            message: message.into(),
        }],
    )
}

/// 409 for a name its place has already.
pub fn name_taken(message: String) -> ApiError {
    ApiError {
        details: vec![FieldProblem {
            pointer: "/name".into(),
            message: message.clone(),
        }],
        ..ApiError::new(StatusCode::CONFLICT, "conflict", message)
    }
}

/// A channel's name (ADR 0020 §2), at `/name`.
pub fn channel_name(value: Option<&serde_json::Value>) -> Result<String, ApiError> {
    match value.and_then(|v| v.as_str()) {
        Some(name) if place_names::is_channel_name(name) => Ok(name.to_string()),
        _ => Err(bad_field(
            "/name",
            format!("is required: {}", place_names::CHANNEL_NAME_RULE),
        )),
    }
}

/// A space's or group's name, at `/name`.
pub fn display_name(value: Option<&serde_json::Value>) -> Result<String, ApiError> {
    match value.and_then(|v| v.as_str()) {
        Some(name) if place_names::is_display_name(name) => Ok(name.to_string()),
        _ => Err(bad_field(
            "/name",
            format!("is required: {}", place_names::DISPLAY_NAME_RULE),
        )),
    }
}

/// A path id; a malformed one names nothing and is decided as the nil id,
/// so it answers like an unknown one.
pub fn path_id(raw: &str) -> uuid::Uuid {
    uuid::Uuid::parse_str(raw).unwrap_or(uuid::Uuid::nil())
}
