//! Registration, key rotation and revocation over REST.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tracing::info;

use super::body::checked_json;
use super::error::ApiError;
use super::installations::installation_summary;
use crate::config::RegistrationMode;
use crate::domain::authz::Action;
use crate::domain::validate::{FieldProblem, Problems};
use crate::hub::Hub;
use crate::identity::{self, Authenticated, IdentityError};
use crate::store::{IdempotencyRecord, IdempotentResponse, InstallationRecord};

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

/// The registration mode's check, before any body work. A wrong secret
/// spends the source address's budget of refused credentials, shared with
/// keys and the operator token; while it is spent the secret is not
/// compared (429).
async fn check_registration(
    hub: &Hub,
    headers: &HeaderMap,
    remote: SocketAddr,
) -> Result<(), ApiError> {
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
            if presented.is_empty() {
                // Nothing was guessed, so nothing is spent: a web page can
                // post here without a preflight, but cannot add the header.
                return Err(secret_required());
            }
            let attempt = hub
                .refused_keys
                .begin(remote.ip(), None)
                .await
                .map_err(|wait| rate_limited(wait, "refused registration secrets"))?;
            if secret_eq(presented, &cfg.secret) {
                attempt.accepted();
                Ok(())
            } else {
                attempt.refused();
                Err(secret_required())
            }
        }
    }
}

fn secret_required() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "registration_secret_required",
        "registration needs a valid X-Registration-Secret header",
    )
}

/// A response that carries a key: never cached.
pub(super) fn created_with_key(body: Value) -> Response {
    let mut response = (StatusCode::CREATED, Json(body)).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

const IDEMPOTENCY_HEADER: &str = "idempotency-key";

/// Who made an anonymous create, as far as the hub can tell: the source
/// address. (There is one registration secret, so it tells no clients
/// apart; a digest of it in the scope could be guessed offline from a
/// database dump, ADR 0008.)
pub(super) struct Client(String);

impl Client {
    fn of(remote: SocketAddr) -> Client {
        Client(format!("addr:{}", remote.ip()))
    }

    /// The operator: one token, so one client.
    pub(super) fn operator() -> Client {
        Client("operator".to_string())
    }

    /// A principal that authenticated with its key.
    pub(super) fn principal(id: uuid::Uuid) -> Client {
        Client(format!("principal:{id}"))
    }
}

/// The `Idempotency-Key` of a create, with the hash of the body it came with.
/// Keys are the client's own: the scope names the client, so one client's
/// key never answers another's request (ADR 0008).
pub(super) struct Idempotency {
    scope: String,
    key: String,
    request_hash: String,
}

impl Idempotency {
    pub(super) fn from_request(
        create: &'static str,
        client: &Client,
        headers: &HeaderMap,
        body: &Bytes,
    ) -> Result<Option<Idempotency>, ApiError> {
        let Some(value) = headers.get(IDEMPOTENCY_HEADER) else {
            return Ok(None);
        };
        let key = value
            .to_str()
            .ok()
            .filter(|k| !k.is_empty() && k.len() <= 255 && k.bytes().all(|b| b.is_ascii_graphic()))
            .ok_or_else(|| {
                ApiError::invalid(
                    "invalid_idempotency_key",
                    "Idempotency-Key must be 1 to 255 printable ASCII characters",
                    Vec::new(),
                )
            })?;
        Ok(Some(Idempotency {
            scope: format!("{create}|{}", client.0),
            key: key.to_string(),
            request_hash: hex::encode(Sha256::digest(body)),
        }))
    }

    /// The key's scope narrowed to one target (an install's app), so a key
    /// reused for another target is another request, never its replay.
    pub(super) fn for_target(mut self, target: uuid::Uuid) -> Idempotency {
        self.scope = format!("{}|{target}", self.scope);
        self
    }

    /// The replay body stores ids only: keys are shown once, so a replay
    /// withholds the key (`keyWithheld: true`).
    pub(super) fn record(
        &self,
        id_field: &'static str,
    ) -> impl Fn(uuid::Uuid) -> IdempotencyRecord + Send + Sync + '_ {
        self.record_with(id_field, Value::Null)
    }

    /// [`Idempotency::record`] with more members of the answer (an owned
    /// agent's `ownerId`); `Null` adds none.
    pub(super) fn record_with(
        &self,
        id_field: &'static str,
        more: Value,
    ) -> impl Fn(uuid::Uuid) -> IdempotencyRecord + Send + Sync + '_ {
        move |id| {
            let mut response = json!({ id_field: id, "keyWithheld": true });
            if let (Value::Object(r), Value::Object(more)) = (&mut response, &more) {
                r.extend(more.clone());
            }
            IdempotencyRecord {
                scope: self.scope.clone(),
                key: self.key.clone(),
                result: IdempotentResponse {
                    request_hash: self.request_hash.clone(),
                    status: 201,
                    response: response.to_string(),
                },
            }
        }
    }

    /// [`Idempotency::record`] of an app's registration: the replay
    /// carries the installation it got, as the first answer did.
    pub(super) fn record_app(
        &self,
    ) -> impl Fn(uuid::Uuid, Option<&InstallationRecord>) -> IdempotencyRecord + Send + Sync + '_
    {
        move |id, installation| {
            let more = installation.map_or(
                Value::Null,
                |i| json!({ "installation": installation_summary(i) }),
            );
            self.record_with("appId", more)(id)
        }
    }

    /// The record of a 201 whose whole replay body the caller builds (an
    /// install's: the installation, the key withheld).
    pub(super) fn record_answer(&self, response: Value) -> IdempotencyRecord {
        self.record_status(201, response)
    }

    /// The record of an answer with its status (an invoke's 202).
    pub(super) fn record_status(&self, status: u16, response: Value) -> IdempotencyRecord {
        IdempotencyRecord {
            scope: self.scope.clone(),
            key: self.key.clone(),
            result: IdempotentResponse {
                request_hash: self.request_hash.clone(),
                status,
                response: response.to_string(),
            },
        }
    }

    /// Answers a retry from the stored result, or refuses a reused key.
    pub(super) async fn replay(&self, hub: &Hub) -> Result<Option<Response>, ApiError> {
        let stored = hub
            .store
            .idempotent_response(&self.scope, &self.key)
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "store failure");
                ApiError::internal()
            })?;
        let Some(stored) = stored else {
            return Ok(None);
        };
        if stored.request_hash != self.request_hash {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "idempotency_conflict",
                "this Idempotency-Key was used with a different request body",
            ));
        }
        let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
        let body: Value = serde_json::from_str(&stored.response).unwrap_or(Value::Null);
        let mut response = (status, Json(body)).into_response();
        response
            .headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
        Ok(Some(response))
    }
}

/// Who registers an agent: a person with its key as Bearer owns it, in
/// every registration mode (the key is operator-issued; ADR 0020 §1);
/// without a Bearer the registration mode applies. Any other Bearer is
/// refused, never taken as anonymous.
async fn registrant(
    hub: &Hub,
    headers: &HeaderMap,
    remote: SocketAddr,
) -> Result<Option<uuid::Uuid>, ApiError> {
    if headers.get(header::AUTHORIZATION).is_none() {
        check_registration(hub, headers, remote).await?;
        return Ok(None);
    }
    let auth = bearer(hub, headers, remote).await?;
    if auth.principal.kind != crate::domain::PrincipalKind::Person {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "only a person's key registers agents it owns; register without Authorization",
        ));
    }
    Ok(Some(auth.principal.id))
}

pub async fn register_agent(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let owner = registrant(&hub, &headers, remote).await?;
    checked_json(&headers, &body)?;
    let client = owner.map_or_else(|| Client::of(remote), Client::principal);
    let idem = Idempotency::from_request("register:agent", &client, &headers, &body)?;
    if let Some(idem) = &idem {
        if let Some(replayed) = idem.replay(&hub).await? {
            return Ok(replayed);
        }
    }
    let doc = json_value(&body)?;
    let owned = owner.map_or(Value::Null, |o| json!({ "ownerId": o }));
    let record = idem.as_ref().map(|i| i.record_with("agentId", owned));
    let registered = match identity::register_owned_agent(
        hub.store.as_ref(),
        &doc,
        owner,
        record.as_ref().map(|f| f as identity::IdempotencyFor<'_>),
    )
    .await
    {
        Err(IdentityError::IdempotencyTaken) => {
            // A concurrent request with the same key won; answer as its retry.
            if let Some(replayed) = idem.as_ref().expect("key present").replay(&hub).await? {
                return Ok(replayed);
            }
            return Err(IdentityError::IdempotencyTaken.into());
        }
        other => other?,
    };
    info!(agent = %registered.id, key_id = %registered.key.key_id, owned = owner.is_some(), "agent registered");
    let mut body = json!({
        "agentId": registered.id,
        "agentKey": registered.key.plaintext,
    });
    if let Some(owner) = owner {
        body["ownerId"] = json!(owner);
    }
    Ok(created_with_key(body))
}

pub async fn register_app(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    check_registration(&hub, &headers, remote).await?;
    checked_json(&headers, &body)?;
    let client = Client::of(remote);
    let idem = Idempotency::from_request("register:app", &client, &headers, &body)?;
    if let Some(idem) = &idem {
        if let Some(replayed) = idem.replay(&hub).await? {
            return Ok(replayed);
        }
    }
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
    let record = idem.as_ref().map(|i| i.record_app());
    let result = identity::register_app(
        hub.store.as_ref(),
        doc,
        &hub.config.manifest_bounds(),
        (
            hub.config.registration.install,
            identity::Registrant::TheApp,
        ),
        record
            .as_ref()
            .map(|f| f as identity::AppIdempotencyFor<'_>),
    )
    .await;
    let app = match result {
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
        Err(IdentityError::IdempotencyTaken) => {
            if let Some(replayed) = idem.as_ref().expect("key present").replay(&hub).await? {
                return Ok(replayed);
            }
            return Err(IdentityError::IdempotencyTaken.into());
        }
        other => other?,
    };
    let registered = &app.registered;
    info!(app = %registered.id, key_id = %registered.key.key_id, installed = app.installation.is_some(), "app registered");
    let mut body = json!({
        "appId": registered.id,
        "appKey": registered.key.plaintext,
    });
    if let Some(installation) = &app.installation {
        body["installation"] = installation_summary(installation);
    }
    // A new URL is unverified: its check is the job the registration wrote.
    if let Some(url) = crate::store::UrlCheck::default().view(&app.manifest) {
        body["interactionsUrl"] = url;
    }
    Ok(created_with_key(body))
}

/// The credentials of an `Authorization: Bearer <token>` header. The scheme
/// name is case-insensitive (RFC 9110, section 11.1). A request carrying
/// several `Authorization` headers has no credentials: a proxy in front of
/// the hub may pick another one than the hub would, so none is taken.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let value = values.next()?.to_str().ok()?;
    if values.next().is_some() {
        return None;
    }
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Whether a request carries more than one `Authorization` header, which
/// counts as none (see `bearer_token`) and is named as such in the refusal.
pub fn several_authorizations(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::AUTHORIZATION)
        .iter()
        .nth(1)
        .is_some()
}

pub const SEVERAL_AUTHORIZATIONS: &str = "send one Authorization header: this request has several";

/// The principal behind an `Authorization: Bearer <key>` header. A refused
/// key spends the source address's budget of failed key checks, shared with
/// WebSocket connects; while it is spent no key is looked up (429).
pub async fn bearer(
    hub: &Hub,
    headers: &HeaderMap,
    remote: SocketAddr,
) -> Result<Authenticated, ApiError> {
    let token = bearer_token(headers).ok_or_else(|| {
        ApiError::unauthorized(if several_authorizations(headers) {
            SEVERAL_AUTHORIZATIONS
        } else {
            "an Authorization: Bearer <key> header is required"
        })
    })?;
    let key_id = crate::domain::keys::parse(token).map(|k| k.key_id);
    let attempt = hub
        .refused_keys
        .begin(remote.ip(), key_id.as_deref())
        .await
        .map_err(|wait| rate_limited(wait, "refused keys"))?;
    match identity::authenticate(hub.store.as_ref(), token, None).await {
        Err(IdentityError::BadKey) => {
            attempt.refused();
            Err(IdentityError::BadKey.into())
        }
        Ok(auth) => {
            attempt.accepted();
            Ok(auth)
        }
        Err(other) => {
            attempt.unchecked();
            Err(other.into())
        }
    }
}

/// 429 while the source address has spent its budget of refused
/// credentials (`what`).
pub(super) fn rate_limited(wait: std::time::Duration, what: &str) -> ApiError {
    let wait_ms = wait.as_millis().max(1) as u64;
    let mut e = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limited",
        format!("too many {what} from this address (gateway.failed_connects_per_address)"),
    );
    e.extra = Some(Box::new(json!({ "retryAfterMs": wait_ms })));
    e
}

/// An app's key routes are decided like its every other REST call
/// (`app.keys.manage` on the app itself), so while its installation is not
/// active they answer 403 `forbidden`, reason `app_suspended` or
/// `app_not_installed`, counted and audited (ADR 0023 §6, "Leftovers").
/// Agents' and people's keys need no decision.
async fn check_installed(hub: &Hub, principal: crate::domain::Principal) -> Result<(), ApiError> {
    if principal.kind != crate::domain::PrincipalKind::App {
        return Ok(());
    }
    let target = crate::access::Target::app(principal.id);
    crate::access::check_rest(hub, principal, Action::AppKeysManage, target).await?;
    Ok(())
}

/// Issues a new key for the caller and revokes the presented one (and any
/// other active key); sockets on revoked keys are closed with 4003.
pub async fn rotate_key(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let auth = bearer(&hub, &headers, remote).await?;
    check_installed(&hub, auth.principal).await?;
    let (key, revoked) =
        identity::rotate(hub.store.as_ref(), auth.principal, Some(&auth.key_id)).await?;
    hub.close_revoked_keys(auth.principal.id, &revoked);
    info!(principal = %auth.principal.id, new_key_id = %key.key_id, revoked = revoked.len(), "key rotated");
    let field = match auth.principal.kind {
        crate::domain::PrincipalKind::Agent => "agentKey",
        crate::domain::PrincipalKind::App => "appKey",
        crate::domain::PrincipalKind::Person => "personKey",
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
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    let auth = bearer(&hub, &headers, remote).await?;
    check_installed(&hub, auth.principal).await?;
    let revoked = identity::revoke(hub.store.as_ref(), auth.principal.id).await?;
    hub.close_revoked_keys(auth.principal.id, &revoked);
    info!(principal = %auth.principal.id, revoked = revoked.len(), "keys revoked");
    Ok(StatusCode::NO_CONTENT)
}
