//! Grants and groups over REST (ADR 0020 §1's table, §2 "Who grants"): the
//! operator or an admin of the place puts, lists and deletes grants; groups
//! and their members are the operator's. Every write here can remove
//! rights, so cached channel facts are dropped before the answer (§3,
//! "Loading").

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};
use tracing::info;
use uuid::Uuid;

use super::admin::check_admin;
use super::body::checked_json;
use super::error::ApiError;
use super::identity::json_object;
use super::manage::{
    bad_field, decide, display_name, manager, manager_reading, name_taken, path_id, store_failure,
};
use super::query::QueryParams;
use crate::access::{Loaded, Target};
use crate::domain::authz::level::{GrantPlace, Holder, APP_CAP};
use crate::domain::authz::{Action, Level};
use crate::domain::event::rfc3339;
use crate::domain::PrincipalKind;
use crate::hub::Hub;
use crate::store::{GrantRecord, NewGrant, NewGroup, StoreError, APP_NOT_INSTALLED};

fn grant_json(g: &GrantRecord) -> Value {
    let subject = match g.subject {
        Holder::Principal(id) => json!({ "principalId": id }),
        Holder::Group(id) => json!({ "groupId": id }),
    };
    let mut grant = json!({
        "grantId": g.id,
        "subject": subject,
        "place": place_json(g.place),
        "level": g.level.as_str(),
        "createdAt": rfc3339(g.created_at),
    });
    if let Some(by) = g.granted_by {
        grant["grantedBy"] = json!(by);
    }
    grant
}

fn place_json(p: GrantPlace) -> Value {
    match p {
        GrantPlace::Space(id) => json!({ "spaceId": id }),
        GrantPlace::Channel(id) => json!({ "channelId": id }),
    }
}

/// `{principalId}` or `{groupId}`, exactly one, at `/subject`.
fn subject_of(body: &Map<String, Value>) -> Result<Holder, ApiError> {
    let one = one_id(body.get("subject"), "/subject", &["principalId", "groupId"])?;
    Ok(match one {
        ("principalId", id) => Holder::Principal(id),
        (_, id) => Holder::Group(id),
    })
}

/// `{spaceId}` or `{channelId}`, exactly one, at `/place`.
fn place_of(body: &Map<String, Value>) -> Result<GrantPlace, ApiError> {
    let one = one_id(body.get("place"), "/place", &["spaceId", "channelId"])?;
    Ok(match one {
        ("spaceId", id) => GrantPlace::Space(id),
        (_, id) => GrantPlace::Channel(id),
    })
}

/// An object with exactly one of `names`, a UUID.
fn one_id(
    value: Option<&Value>,
    at: &str,
    names: &[&'static str],
) -> Result<(&'static str, Uuid), ApiError> {
    let wanted = format!("is required: an object with one of {}", names.join(", "));
    let obj = value
        .and_then(Value::as_object)
        .ok_or_else(|| bad_field(at, wanted.clone()))?;
    if let Some(unknown) = obj.keys().find(|k| !names.contains(&k.as_str())) {
        return Err(bad_field(&format!("{at}/{unknown}"), "is not known here"));
    }
    let present: Vec<&'static str> = names
        .iter()
        .copied()
        .filter(|n| obj.contains_key(*n))
        .collect();
    let name = match present[..] {
        [name] => name,
        [] => return Err(bad_field(at, wanted)),
        _ => {
            let given = present.join(" and ");
            let problem = format!("names {given}: give exactly one of {}", names.join(", "));
            return Err(bad_field(at, problem));
        }
    };
    let id = obj[name]
        .as_str()
        .and_then(|s| Uuid::parse_str(s).ok())
        .ok_or_else(|| bad_field(&format!("{at}/{name}"), "must be a UUID"))?;
    Ok((name, id))
}

fn level_of(body: &Map<String, Value>) -> Result<Level, ApiError> {
    body.get("level")
        .and_then(Value::as_str)
        .and_then(Level::parse)
        .ok_or_else(|| bad_field("/level", "is required: read, write, trigger or admin"))
}

fn place_target(place: GrantPlace) -> Target {
    match place {
        GrantPlace::Space(id) => Target::grants_on_space(id),
        GrantPlace::Channel(id) => Target::grants_on_channel(id),
    }
}

/// `POST /api/v1/grants {subject, place, level}` (operator, or an admin of
/// the place): 201 `{grant}`; granting again replaces the level. An app
/// above `write` is 400 `level_above_app_cap` at `/level`; a subject that
/// is no active principal or group is 400 at `/subject`; an app without a
/// live installation is 409 `app_not_installed` at `/subject/principalId`.
/// A grant to an app is audited (`grant.manage`) with it.
pub async fn put(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let caller = manager(&hub, &headers, remote).await?;
    checked_json(&headers, &body)?;
    let body = json_object(&body, &["subject", "place", "level"])?;
    let (subject, place, level) = (subject_of(&body)?, place_of(&body)?, level_of(&body)?);
    decide(&hub, &caller, Action::GrantManage, place_target(place)).await?;
    check_app_cap(&hub, subject, level).await?;
    let grant = NewGrant {
        id: Uuid::now_v7(),
        subject,
        place,
        level,
        granted_by: caller.principal_id(),
        created_at: crate::domain::now_millis(),
    };
    let result = hub.store.put_grant(&grant).await;
    // Before the result is mapped: a failed write (a lowered level, a lost
    // answer) may still have changed rights, so no cached level outlives it.
    hub.memberships.invalidate_channels();
    let written = match result {
        Err(StoreError::NotFound) => return Err(unknown_subject(subject)),
        Err(StoreError::Conflict(m)) if m == APP_NOT_INSTALLED => return Err(app_not_installed()),
        other => other.map_err(store_failure)?,
    };
    info!(grant = %written.id, level = level.as_str(), "grant put");
    Ok((
        StatusCode::CREATED,
        Json(json!({ "grant": grant_json(&written) })),
    )
        .into_response())
}

/// An app never holds more than `write` (ADR 0020 §2): refused, not capped,
/// when granted directly.
async fn check_app_cap(hub: &Hub, subject: Holder, level: Level) -> Result<(), ApiError> {
    let Holder::Principal(id) = subject else {
        return Ok(());
    };
    let record = hub.store.principal(id).await.map_err(store_failure)?;
    let Some(record) = record else {
        return Err(unknown_subject(subject));
    };
    if record.kind == PrincipalKind::App && level > APP_CAP {
        return Err(ApiError::invalid(
            "level_above_app_cap",
            "an app holds at most write",
            vec![crate::domain::validate::FieldProblem {
                pointer: "/level".into(),
                message: "an app holds at most write".into(),
            }],
        ));
    }
    Ok(())
}

/// 409 for a grant to an app without a live installation (ADR 0023 §6,
/// "Grants to apps"): decided in the grant's transaction, so an uninstall
/// racing it leaves no grant behind. A conflict, not bad input: the same
/// request succeeds once the operator installs the app.
fn app_not_installed() -> ApiError {
    let message = "the app is not installed (pending or uninstalled)";
    ApiError {
        details: vec![crate::domain::validate::FieldProblem {
            pointer: "/subject/principalId".into(),
            message: message.into(),
        }],
        ..ApiError::new(StatusCode::CONFLICT, "app_not_installed", message)
    }
}

fn unknown_subject(subject: Holder) -> ApiError {
    match subject {
        Holder::Principal(_) => bad_field("/subject/principalId", "names no active principal"),
        Holder::Group(_) => bad_field("/subject/groupId", "names no group"),
    }
}

/// `GET /api/v1/grants?spaceId=|channelId=` (operator, or an admin of the
/// place): `{grants}` on that place.
pub async fn list(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    uri: axum::http::Uri,
) -> Result<Json<Value>, ApiError> {
    let caller = manager_reading(&hub, &headers, remote).await?;
    let query = QueryParams::parse(&uri)?;
    query.only(&["spaceId", "channelId"])?;
    let place = match (query.uuid("spaceId")?, query.uuid("channelId")?) {
        (Some(space), None) => GrantPlace::Space(space),
        (None, Some(channel)) => GrantPlace::Channel(channel),
        _ => {
            return Err(bad_field(
                "/spaceId",
                "give exactly one of spaceId, channelId",
            ))
        }
    };
    decide(&hub, &caller, Action::GrantManage, place_target(place)).await?;
    let grants = hub
        .store
        .grants_of_place(place)
        .await
        .map_err(store_failure)?;
    let grants: Vec<Value> = grants.iter().map(grant_json).collect();
    Ok(Json(json!({ "grants": grants })))
}

/// `DELETE /api/v1/grants/{grantId}` (operator, or an admin of the grant's
/// place): 204.
pub async fn delete(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(grant): Path<String>,
) -> Result<StatusCode, ApiError> {
    let caller = manager(&hub, &headers, remote).await?;
    let target = Target::grant(path_id(&grant));
    let granted = decide(&hub, &caller, Action::GrantManage, target).await?;
    let Loaded::Grant(grant) = granted.loaded else {
        return Err(ApiError::internal());
    };
    let now = crate::domain::now_millis();
    let result = hub
        .store
        .delete_grant(grant.id, caller.principal_id(), now)
        .await;
    // Before the result is mapped, failed or not (see `put`).
    hub.memberships.invalidate_channels();
    match result {
        // Deleted by another request since the decision: gone either way.
        Err(StoreError::NotFound) | Ok(()) => {}
        Err(e) => return Err(store_failure(e)),
    }
    info!(grant = %grant.id, "grant deleted");
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/v1/groups {name}` (operator): 201 `{group}`.
pub async fn create_group(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    check_admin(&hub, &headers, remote).await?;
    checked_json(&headers, &body)?;
    let body = json_object(&body, &["name"])?;
    let group = NewGroup {
        id: Uuid::now_v7(),
        name: display_name(body.get("name"))?,
        created_at: crate::domain::now_millis(),
    };
    match hub.store.create_group(&group).await {
        Err(StoreError::Conflict(m)) => return Err(name_taken(m)),
        other => other.map_err(store_failure)?,
    }
    info!(group = %group.id, "group created");
    let answer = json!({ "group": {
        "groupId": group.id,
        "name": group.name,
        "createdAt": rfc3339(group.created_at),
    }});
    Ok((StatusCode::CREATED, Json(answer)).into_response())
}

/// `PUT /api/v1/groups/{groupId}/members/{principalId}` (operator): 204,
/// idempotent.
pub async fn add_member(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path((group, principal)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    check_admin(&hub, &headers, remote).await?;
    let (group, principal) = (path_id(&group), path_id(&principal));
    let now = crate::domain::now_millis();
    member_change(&hub, hub.store.add_member(group, principal, now).await)
}

/// `DELETE /api/v1/groups/{groupId}/members/{principalId}` (operator): 204,
/// idempotent.
pub async fn remove_member(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path((group, principal)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    check_admin(&hub, &headers, remote).await?;
    let (group, principal) = (path_id(&group), path_id(&principal));
    member_change(&hub, hub.store.remove_member(group, principal).await)
}

/// A group or principal that does not exist is 404 (the operator sees
/// everything, so nothing is hidden here).
fn member_change(hub: &Hub, result: Result<(), StoreError>) -> Result<StatusCode, ApiError> {
    // Before the result is mapped, failed or not (see `put`).
    hub.memberships.invalidate_channels();
    match result {
        Err(StoreError::NotFound) => {
            return Err(super::admin::operator_not_found("group or principal"))
        }
        other => other.map_err(store_failure)?,
    }
    Ok(StatusCode::NO_CONTENT)
}
