//! The operator API, behind `admin.token`. Disabled (404) when no token is set.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Path, State};
use axum::http::HeaderMap;
use axum::Json;
use rand::RngCore;
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use uuid::Uuid;

use super::body::checked_json;
use super::error::ApiError;
use super::query::QueryParams;
use crate::domain::PrincipalKind;
use crate::hooks::{self, HookOutcome};
use crate::hub::Hub;
use crate::protocol::network::{AppPing, PingParams};

/// The operator token's check. A wrong token spends the source address's
/// budget of refused credentials, shared with keys and the registration
/// secret; while it is spent the token is not compared (429).
/// A NotFound on an operator route: the operator is no principal and
/// nothing is hidden from it, so this is the plain answer for a row that
/// is not there (principals' NotFounds come from `access::reject`).
pub(super) fn operator_not_found(what: &str) -> ApiError {
    ApiError::not_found(format!("{what} not found"))
}

pub(super) async fn check_admin(
    hub: &Hub,
    headers: &HeaderMap,
    remote: SocketAddr,
) -> Result<(), ApiError> {
    let configured = &hub.config.admin.token;
    if configured.is_empty() {
        return Err(ApiError::not_found("no such route"));
    }
    let presented = super::identity::bearer_token(headers).unwrap_or("");
    if presented.is_empty() {
        // Nothing was guessed, so nothing is spent: a web page can send a
        // request here without a preflight, but cannot add the header.
        return Err(ApiError::unauthorized(
            if super::identity::several_authorizations(headers) {
                super::identity::SEVERAL_AUTHORIZATIONS
            } else {
                "a valid operator token is required"
            },
        ));
    }
    let attempt = hub
        .refused_keys
        .begin(remote.ip(), None)
        .await
        .map_err(|wait| super::identity::rate_limited(wait, "refused operator tokens"))?;
    let equal: bool = Sha256::digest(presented.as_bytes())
        .ct_eq(&Sha256::digest(configured.as_bytes()))
        .into();
    if !equal {
        attempt.refused();
        return Err(ApiError::unauthorized("a valid operator token is required"));
    }
    attempt.accepted();
    Ok(())
}

/// Sends `app/network/ping` to the app's callback socket and reports the
/// outcome exactly as a gate hook would see it.
pub async fn ping_app(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(app_id): Path<String>,
    uri: axum::http::Uri,
) -> Result<Json<Value>, ApiError> {
    // The caller first: while the route is hidden, its query is never read.
    check_admin(&hub, &headers, remote).await?;
    let query = QueryParams::parse(&uri)?;
    query.only(&["timeoutMs"])?;
    let timeout_ms = query.number("timeoutMs")?;
    let hidden = || ApiError::not_found("no such app");
    let app_id = Uuid::parse_str(&app_id).map_err(|_| hidden())?;
    let principal = hub.store.principal(app_id).await.map_err(|e| {
        tracing::error!(error = %e, "store failure");
        ApiError::internal()
    })?;
    if principal.map(|p| p.kind) != Some(PrincipalKind::App) {
        return Err(hidden());
    }
    let bounds = &hub.config.hooks;
    let timeout_ms = timeout_ms.unwrap_or(5_000);
    if !(bounds.min_timeout_ms..=bounds.max_timeout_ms).contains(&timeout_ms) {
        return Err(ApiError::invalid(
            "invalid_query",
            format!(
                "timeoutMs must be from {} to {}",
                bounds.min_timeout_ms, bounds.max_timeout_ms
            ),
            Vec::new(),
        ));
    }
    let mut nonce = [0u8; 12];
    rand::rngs::OsRng.fill_bytes(&mut nonce);
    let nonce = hex::encode(nonce);
    let started = Instant::now();
    let outcome = hooks::probe_app::<AppPing>(
        &hub,
        app_id,
        &PingParams {
            nonce: nonce.clone(),
        },
        Duration::from_millis(timeout_ms),
    )
    .await;
    let elapsed = started.elapsed().as_secs_f64() * 1000.0;
    let body = match outcome {
        HookOutcome::Ok(r) if r.nonce == nonce => {
            json!({ "outcome": "ok", "roundTripMs": elapsed })
        }
        HookOutcome::Ok(_) => json!({ "outcome": "bad_result", "reason": "nonce does not match" }),
        HookOutcome::RemoteError(e) => json!({ "outcome": "remote_error", "error": e }),
        HookOutcome::BadResult(reason) => json!({ "outcome": "bad_result", "reason": reason }),
        other => json!({ "outcome": other.label(), "elapsedMs": elapsed }),
    };
    Ok(Json(body))
}

/// The rules a URL must meet whatever the allowlist says (an https URL
/// without user info, naming a host), checked before anything else so that
/// a malformed URL is reported as such. The allowlist and the addresses are
/// the send's outcome (`blocked`), as for a real delivery.
fn check_url_form(url: &str) -> Result<(), ApiError> {
    use crate::webhooks::egress_policy::{check_url, BlockReason};
    match check_url(url, &[], &[]) {
        Ok(_) | Err(BlockReason::NotAllowed) => Ok(()),
        Err(reason) => {
            let mut e = ApiError::invalid(
                "invalid_url",
                format!("url cannot be sent to: {}", reason.label()),
                vec![crate::domain::validate::FieldProblem {
                    pointer: "/url".into(),
                    message: format!("is refused ({})", reason.label()),
                }],
            );
            e.extra = Some(Box::new(json!({ "reason": reason.label() })));
            Err(e)
        }
    }
}

/// A typed body, decoded as the gateway decodes params so the member at
/// fault is named in the pointer (`/url` when it is missing, not the
/// body's root with serde's "at line 1 column 2").
fn decode_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::invalid(
            "invalid_json",
            format!("the body is not valid JSON: {e}"),
            Vec::new(),
        )
    })?;
    crate::protocol::params::decode(Some(value)).map_err(|e| {
        let mut detail = e.message.trim_start_matches("Invalid params: ").to_string();
        let field = e
            .data
            .as_deref()
            .and_then(|d| d["field"].as_str())
            .unwrap_or("params")
            .to_string();
        let (pointer, message) = if field == "params" {
            detail = "the body must be a JSON object".into();
            (String::new(), "must be an object".to_string())
        } else {
            let rest = detail.strip_prefix(field.as_str()).unwrap_or(&detail);
            let message = rest.trim_start_matches(':').trim_start().to_string();
            (format!("/{}", field.replace('.', "/")), message)
        };
        ApiError::invalid(
            "invalid_body",
            format!("the body is invalid: {detail}"),
            vec![crate::domain::validate::FieldProblem { pointer, message }],
        )
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestWebhookBody {
    url: String,
}

/// Sends a signed `webhook.test` event to `url` through the webhook egress
/// client and reports the outcome, so an operator can check the allowlist,
/// TLS trust and a receiver's verification before real deliveries depend
/// on them.
pub async fn send_test_webhook(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    check_admin(&hub, &headers, remote).await?;
    checked_json(&headers, &body)?;
    let body: TestWebhookBody = decode_body(&body)?;
    check_url_form(&body.url)?;
    let now = crate::domain::now_millis();
    let payload = json!({
        "type": "webhook.test",
        "timestamp": crate::domain::event::rfc3339(now),
        "data": { "hub": "switchboard" },
    });
    let sent = crate::webhooks::sender::post_signed(
        hub.store.as_ref(),
        &hub.config.webhooks,
        &hub.webhook_egress,
        &body.url,
        serde_json::to_vec(&payload).expect("json"),
        now,
    )
    .await
    .map_err(|e| match e {
        crate::webhooks::sender::SendError::NoSigningKey => ApiError::new(
            axum::http::StatusCode::CONFLICT,
            "no_signing_key",
            e.to_string(),
        ),
        crate::webhooks::sender::SendError::Keys(e) => {
            tracing::error!(error = %e, "loading webhook signing keys failed");
            ApiError::internal()
        }
    })?;
    let mut answer = serde_json::to_value(&sent.outcome).expect("outcome serializes");
    answer["webhookId"] = json!(sent.webhook_id);
    Ok(Json(answer))
}
