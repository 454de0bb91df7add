//! Registration, key rotation and revocation over REST.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tracing::info;

use super::error::ApiError;
use crate::config::RegistrationMode;
use crate::domain::validate::{FieldProblem, Problems};
use crate::hub::Hub;
use crate::identity::{self, Authenticated, IdentityError};
use crate::rpc::close_code;

pub const REGISTRATION_SECRET_HEADER: &str = "x-registration-secret";

pub fn json_value(body: &Bytes) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::invalid(
            "invalid_json",
            format!("the body is not valid JSON: {e}"),
            Vec::new(),
        )
    })
}

/// Parses a JSON object body and refuses members outside `known`.
pub fn json_object(
    body: &Bytes,
    known: &[&str],
) -> Result<serde_json::Map<String, Value>, ApiError> {
    let value = json_value(body)?;
    let mut p = Problems::default();
    let obj = p.object("", Some(&value), known, true).cloned();
    match obj {
        Some(obj) if p.is_empty() => Ok(obj),
        _ => Err(ApiError::invalid(
            "invalid_request",
            "the request has invalid fields",
            p.into_vec(),
        )),
    }
}

fn secret_eq(a: &str, b: &str) -> bool {
    let (a, b) = (Sha256::digest(a.as_bytes()), Sha256::digest(b.as_bytes()));
    a.ct_eq(&b).into()
}

fn check_registration(hub: &Hub, headers: &HeaderMap) -> Result<(), ApiError> {
    let cfg = &hub.config.registration;
    match cfg.mode {
        RegistrationMode::Open => Ok(()),
        RegistrationMode::Closed => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "registration_closed",
            "registration is closed on this hub; ask the operator",
        )),
        RegistrationMode::Secret => {
            let presented = headers
                .get(REGISTRATION_SECRET_HEADER)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            if !presented.is_empty() && secret_eq(presented, &cfg.secret) {
                Ok(())
            } else {
                Err(ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "registration_secret_required",
                    "registration needs a valid X-Registration-Secret header",
                ))
            }
        }
    }
}

/// A response that carries a key: never cached.
fn created_with_key(body: Value) -> Response {
    let mut response = (StatusCode::CREATED, Json(body)).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

pub async fn register_agent(
    State(hub): State<Arc<Hub>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    check_registration(&hub, &headers)?;
    let doc = json_value(&body)?;
    let registered = identity::register_agent(hub.store.as_ref(), &doc).await?;
    info!(agent = %registered.id, key_id = %registered.key.key_id, "agent registered");
    Ok(created_with_key(json!({
        "agentId": registered.id,
        "agentKey": registered.key.plaintext,
    })))
}

pub async fn register_app(
    State(hub): State<Arc<Hub>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    check_registration(&hub, &headers)?;
    let body = json_object(&body, &["manifest"])?;
    let Some(doc) = body.get("manifest") else {
        return Err(ApiError::invalid(
            "invalid_manifest",
            "the manifest is invalid",
            vec![FieldProblem {
                pointer: "/manifest".into(),
                message: "is required".into(),
            }],
        ));
    };
    let (registered, manifest) = match identity::register_app(
        hub.store.as_ref(),
        doc,
        &hub.config.manifest_bounds(),
    )
    .await
    {
        Err(IdentityError::Invalid(details)) => {
            let details = details
                .into_iter()
                .map(|d| FieldProblem {
                    pointer: format!("/manifest{}", d.pointer),
                    message: d.message,
                })
                .collect();
            return Err(ApiError::invalid(
                "invalid_manifest",
                "the manifest is invalid",
                details,
            ));
        }
        other => other?,
    };
    info!(app = %registered.id, key_id = %registered.key.key_id, name = %manifest.name, "app registered");
    Ok(created_with_key(json!({
        "appId": registered.id,
        "appKey": registered.key.plaintext,
    })))
}

/// The principal behind an `Authorization: Bearer <key>` header.
pub async fn bearer(hub: &Hub, headers: &HeaderMap) -> Result<Authenticated, ApiError> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| {
            ApiError::unauthorized("an Authorization: Bearer <key> header is required")
        })?;
    Ok(identity::authenticate(hub.store.as_ref(), token.trim(), None).await?)
}

/// Issues a new key for the caller and revokes the presented one (and any
/// other active key); sockets on revoked keys are closed with 4003.
pub async fn rotate_key(
    State(hub): State<Arc<Hub>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let auth = bearer(&hub, &headers).await?;
    let (key, revoked) = identity::rotate(hub.store.as_ref(), auth.principal).await?;
    hub.registry.close_keys(
        auth.principal.id,
        &revoked,
        close_code::KEY_REVOKED,
        "key revoked",
    );
    info!(principal = %auth.principal.id, new_key_id = %key.key_id, revoked = revoked.len(), "key rotated");
    let field = match auth.principal.kind {
        crate::domain::PrincipalKind::Agent => "agentKey",
        crate::domain::PrincipalKind::App => "appKey",
    };
    let mut response = (
        StatusCode::OK,
        Json(json!({ "principalId": auth.principal.id, "kind": auth.principal.kind, field: key.plaintext })),
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// Revokes the caller's keys; its sockets are closed with 4003. Getting a new
/// key afterwards takes the operator (`switchboard agent rotate-key`).
pub async fn revoke_key(
    State(hub): State<Arc<Hub>>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    let auth = bearer(&hub, &headers).await?;
    let revoked = identity::revoke(hub.store.as_ref(), auth.principal.id).await?;
    hub.registry.close_keys(
        auth.principal.id,
        &revoked,
        close_code::KEY_REVOKED,
        "key revoked",
    );
    info!(principal = %auth.principal.id, revoked = revoked.len(), "keys revoked");
    Ok(StatusCode::NO_CONTENT)
}
