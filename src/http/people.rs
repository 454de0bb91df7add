//! People over REST (ADR 0020 §1): the operator creates and disables them
//! and sets agents' owners; a person lists the agents it owns and revokes
//! their keys. Revoked keys' sockets in this process close at once (4003);
//! other processes' within the revocation sweep.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use tracing::info;
use uuid::Uuid;

use super::admin::check_admin;
use super::body::checked_json;
use super::error::ApiError;
use super::identity::{bearer, bearer_token, created_with_key, json_object, Client, Idempotency};
use crate::access;
use crate::domain::authz::{Action, Answer, Denial, Reason};
use crate::domain::event::rfc3339;
use crate::domain::validate::FieldProblem;
use crate::domain::{Principal, PrincipalKind};
use crate::hub::Hub;
use crate::identity::{self, IdentityError};
use crate::store::OwnedAgent;

fn store_failure(e: crate::store::StoreError) -> ApiError {
    tracing::error!(error = %e, "store failure");
    ApiError::internal()
}

/// The operator's answer for an id that names no agent (unknown or
/// another kind); a person's revoke is answered by `access` instead.
fn unknown_agent() -> ApiError {
    super::admin::operator_not_found("agent")
}

fn unknown_person() -> ApiError {
    super::admin::operator_not_found("person")
}

/// Closes the sockets on the principal's revoked keys, on every node.
fn close_revoked(hub: &Hub, principal: Uuid, revoked: &[String]) {
    hub.close_revoked_keys(principal, revoked);
}

/// `POST /api/v1/people {name, description?}` (operator): 201
/// `{personId, personKey}`, the key shown once.
pub async fn create(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    check_admin(&hub, &headers, remote).await?;
    checked_json(&headers, &body)?;
    let idem = Idempotency::from_request("create:person", &Client::operator(), &headers, &body)?;
    if let Some(idem) = &idem {
        if let Some(replayed) = idem.replay(&hub).await? {
            return Ok(replayed);
        }
    }
    let doc = super::identity::json_value(&body)?;
    let record = idem.as_ref().map(|i| i.record("personId"));
    let created = identity::create_person(
        hub.store.as_ref(),
        &doc,
        record.as_ref().map(|f| f as identity::IdempotencyFor<'_>),
    )
    .await;
    let created = match created {
        Err(IdentityError::IdempotencyTaken) => {
            if let Some(replayed) = idem.as_ref().expect("key present").replay(&hub).await? {
                return Ok(replayed);
            }
            return Err(IdentityError::IdempotencyTaken.into());
        }
        other => other?,
    };
    info!(person = %created.id, key_id = %created.key.key_id, "person created");
    Ok(created_with_key(json!({
        "personId": created.id,
        "personKey": created.key.plaintext,
    })))
}

/// `POST /api/v1/people/{personId}/disable` (operator): 204; every key
/// revoked, its sockets closed with 4003.
pub async fn disable(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(person): Path<String>,
) -> Result<StatusCode, ApiError> {
    check_admin(&hub, &headers, remote).await?;
    let person = Uuid::parse_str(&person).map_err(|_| unknown_person())?;
    let disabled = identity::disable_person(hub.store.as_ref(), person).await;
    // Cached memberships hold who is disabled: forget them before the
    // answer, so no send after it fans out to the person; also when the
    // call failed, as it may have committed.
    hub.memberships.invalidate_all();
    let revoked = match disabled {
        Err(IdentityError::NotFound) => return Err(unknown_person()),
        other => other?,
    };
    close_revoked(&hub, person, &revoked);
    // A disable may revoke no key row (ADR 0020 §1): the other nodes close
    // the person's sockets whatever key they hold.
    hub.announce(&crate::cluster::control::Control::Disabled { principal: person });
    info!(%person, revoked = revoked.len(), "person disabled");
    Ok(StatusCode::NO_CONTENT)
}

/// `PUT /api/v1/agents/{agentId}/owner {ownerId}` (operator): 200
/// `{agentId, ownerId}`.
pub async fn put_owner(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(agent): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    check_admin(&hub, &headers, remote).await?;
    checked_json(&headers, &body)?;
    let agent = Uuid::parse_str(&agent).map_err(|_| unknown_agent())?;
    let body = json_object(&body, &["ownerId"])?;
    let owner = body
        .get("ownerId")
        .and_then(Value::as_str)
        .and_then(|s| Uuid::parse_str(s).ok())
        .ok_or_else(|| {
            ApiError::invalid(
                "invalid_request",
                "the request has invalid fields",
                vec![FieldProblem {
                    pointer: "/ownerId".into(),
                    message: "is required: a person's id".into(),
                }],
            )
        })?;
    set_owner(&hub, agent, Some(owner)).await?;
    Ok(Json(json!({ "agentId": agent, "ownerId": owner })))
}

/// `DELETE /api/v1/agents/{agentId}/owner` (operator): 204.
pub async fn delete_owner(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(agent): Path<String>,
) -> Result<StatusCode, ApiError> {
    check_admin(&hub, &headers, remote).await?;
    let agent = Uuid::parse_str(&agent).map_err(|_| unknown_agent())?;
    set_owner(&hub, agent, None).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn set_owner(hub: &Hub, agent: Uuid, owner: Option<Uuid>) -> Result<(), ApiError> {
    match identity::set_owner(hub.store.as_ref(), agent, owner).await {
        Err(IdentityError::NotFound) => Err(unknown_agent()),
        other => Ok(other?),
    }
}

/// The caller as a person; another kind of key is refused (403).
async fn person(hub: &Hub, headers: &HeaderMap, remote: SocketAddr) -> Result<Principal, ApiError> {
    let auth = bearer(hub, headers, remote).await?;
    if auth.principal.kind != PrincipalKind::Person {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "only a person owns agents: use a person's key",
        ));
    }
    Ok(auth.principal)
}

/// `GET /api/v1/people/me/agents` (person): the agents it owns with their
/// key ids, never the hashes.
pub async fn my_agents(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let me = person(&hub, &headers, remote).await?;
    let agents = hub.store.owned_agents(me.id).await.map_err(store_failure)?;
    let agents: Vec<Value> = agents.iter().map(owned_agent_json).collect();
    let mut response = Json(json!({ "agents": agents })).into_response();
    response.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    Ok(response)
}

fn owned_agent_json(a: &OwnedAgent) -> Value {
    let keys: Vec<Value> = a
        .keys
        .iter()
        .map(|k| {
            let mut key = json!({ "keyId": k.key_id, "createdAt": rfc3339(k.created_at) });
            if let Some(at) = k.revoked_at {
                key["revokedAt"] = json!(rfc3339(at));
            }
            key
        })
        .collect();
    json!({
        "agentId": a.agent_id,
        "name": a.name,
        "createdAt": rfc3339(a.created_at),
        "keys": keys,
    })
}

/// `POST /api/v1/agents/{agentId}/keys/revoke`: by its owner (a person's
/// key, decided by `access`: `agent.keys.revoke`) or the operator (the
/// token); 204 and the agent's sockets close with 4003. A person who does
/// not own the agent gets the unknown agent's answer, after the same read;
/// an agent's or app's key is 403 `subject_kind_not_allowed`.
pub async fn revoke_agent_keys(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(agent): Path<String>,
) -> Result<StatusCode, ApiError> {
    let is_key = bearer_token(&headers).is_some_and(|t| crate::domain::keys::parse(t).is_some());
    // A malformed id names no agent: decided as the nil id, which none has.
    let agent = Uuid::parse_str(&agent).unwrap_or(Uuid::nil());
    let by_owner = is_key;
    let revoked = if is_key {
        revoke_as_owner(&hub, &headers, remote, agent).await?
    } else {
        check_admin(&hub, &headers, remote).await?;
        return revoke_as_operator(&hub, agent)
            .await
            .map(|_| StatusCode::NO_CONTENT);
    };
    close_revoked(&hub, agent, &revoked);
    info!(%agent, by_owner, revoked = revoked.len(), "agent keys revoked");
    Ok(StatusCode::NO_CONTENT)
}

/// The operator's revoke of every key of an agent, its sockets closed with
/// 4003: the REST route's and the console's. Returns the keys revoked.
pub(super) async fn revoke_as_operator(hub: &Hub, agent: Uuid) -> Result<Vec<String>, ApiError> {
    let record = hub.store.principal(agent).await.map_err(store_failure)?;
    if record.is_none_or(|r| r.kind != PrincipalKind::Agent) {
        return Err(unknown_agent());
    }
    let revoked = identity::revoke(hub.store.as_ref(), agent).await?;
    close_revoked(hub, agent, &revoked);
    info!(%agent, by_owner = false, revoked = revoked.len(), "agent keys revoked");
    Ok(revoked)
}

/// The owner's revoke: decided by `access`, then revoked only if the
/// caller still owns the agent under its lock. An agent moved to another
/// owner in between gets `access`'s own answer for a hidden agent, which
/// is the unknown agent's, and is counted and audited like one.
async fn revoke_as_owner(
    hub: &Hub,
    headers: &HeaderMap,
    remote: SocketAddr,
    agent: Uuid,
) -> Result<Vec<String>, ApiError> {
    let auth = bearer(hub, headers, remote).await?;
    let action = Action::AgentKeysRevoke;
    let target = access::Target::agent(agent);
    access::check_rest(hub, auth.principal, action, target.clone()).await?;
    if let Some(revoked) =
        identity::revoke_owned(hub.store.as_ref(), agent, auth.principal.id).await?
    {
        return Ok(revoked);
    }
    let denial = Denial {
        reason: Reason::NoGrant,
        answer: Answer::NotFound,
        named: None,
    };
    let subject = access::subject_of(auth.principal);
    access::record_denial(hub, &subject, action, target.kind(), agent, denial.reason);
    Err(access::Refused::Denied(access::reject(&target, action, denial)).into())
}
