//! Spaces and channels over REST (ADR 0020 §1's table): the operator
//! creates spaces; the operator or a space's admin creates its channels; the
//! operator or a channel's admin renames it and changes its state; anyone
//! with a key reads what its levels let it read. Every decision is
//! `access`'s, so a hidden space or channel answers like a missing one.
//!
//! Creates take no `Idempotency-Key`: names are unique in their place, so a
//! retried create is a 409 naming `/name`, never a second row (the
//! idempotency records of ADR 0008 are written inside the identity store's
//! create transactions, which `PlaceStore` does not share).

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
use super::identity::json_object;
use super::manage::{
    bad_field, channel_name, decide, display_name, manager, name_taken, path_id, reader,
    store_failure,
};
use super::query::QueryParams;
use crate::access::{self, Loaded, Target};
use crate::domain::authz::{Action, ChannelState};
use crate::domain::event::rfc3339;
use crate::hub::Hub;
use crate::store::{NewChannel, NewSpace, SpaceRecord, StoreError};

fn space_json(s: &SpaceRecord) -> Value {
    json!({ "spaceId": s.id, "name": s.name, "createdAt": rfc3339(s.created_at) })
}

/// `POST /api/v1/spaces {name}` (operator): 201 `{space}`.
pub async fn create_space(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    check_admin(&hub, &headers, remote).await?;
    checked_json(&headers, &body)?;
    let body = json_object(&body, &["name"])?;
    let name = display_name(body.get("name"))?;
    let space = NewSpace {
        id: Uuid::now_v7(),
        name,
        created_at: crate::domain::now_millis(),
    };
    let created = match hub.store.create_space(&space).await {
        Err(StoreError::Conflict(m)) => return Err(name_taken(m)),
        other => other.map_err(store_failure)?,
    };
    info!(space = %created.id, "space created");
    Ok((
        StatusCode::CREATED,
        Json(json!({ "space": space_json(&created) })),
    )
        .into_response())
}

/// `GET /api/v1/spaces/{spaceId}` (any key): `space.read`, a read on the
/// space or on one of its channels.
pub async fn get_space(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(space): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let me = reader(&hub, &headers, remote).await?;
    let target = Target::space(path_id(&space));
    let granted = access::check_rest(&hub, me, Action::SpaceRead, target).await?;
    match granted.loaded {
        Loaded::Space(s) => Ok(Json(json!({ "space": space_json(&s) }))),
        _ => Err(ApiError::internal()),
    }
}

/// `GET /api/v1/spaces/{spaceId}/channels?after=&limit=` (any key): the
/// space must be readable (`space.read`), then its channels in Filter mode
/// (`channel.list`): the ones the caller reads, no audit for the rest.
pub async fn list_channels(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(space): Path<String>,
    uri: axum::http::Uri,
) -> Result<Json<Value>, ApiError> {
    let me = reader(&hub, &headers, remote).await?;
    let query = QueryParams::parse(&uri)?;
    query.only(&["after", "limit"])?;
    let after = query.uuid("after")?;
    let limit = page_limit(&hub, query.number("limit")?)?;
    let space = path_id(&space);
    access::check_rest(&hub, me, Action::SpaceRead, Target::space(space)).await?;
    let (channels, next_after) = access::readable_channels(&hub, me, Some(space), after, limit)
        .await
        .map_err(store_failure)?;
    let mut page = json!({ "channels": channels });
    if let Some(next) = next_after {
        page["nextAfter"] = json!(next);
    }
    Ok(Json(page))
}

/// A page's `limit`, at most `messages.page_max` (the lists' key).
fn page_limit(hub: &Hub, limit: Option<u64>) -> Result<u32, ApiError> {
    let max = hub.config.messages.page_max;
    match limit {
        None => Ok(max.min(50)),
        Some(l) if (1..=u64::from(max)).contains(&l) => Ok(l as u32),
        Some(_) => Err(bad_field(
            "/limit",
            format!("must be from 1 to {max} (messages.page_max)"),
        )),
    }
}

/// `POST /api/v1/spaces/{spaceId}/channels {name}` (operator, or a person
/// with admin on the space): 201 `{channel}`, open.
pub async fn create_channel(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(space): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let caller = manager(&hub, &headers, remote).await?;
    checked_json(&headers, &body)?;
    let body = json_object(&body, &["name"])?;
    let name = channel_name(body.get("name"))?;
    let space = path_id(&space);
    decide(&hub, &caller, Action::ChannelCreate, Target::space(space)).await?;
    let channel = NewChannel {
        id: Uuid::now_v7(),
        space_id: space,
        name,
        // The operator is no principal: its channels name the nil creator.
        created_by: caller.principal_id().unwrap_or(Uuid::nil()),
        created_at: crate::domain::now_millis(),
    };
    let created = match hub.store.create_channel(&channel).await {
        Err(StoreError::Conflict(m)) => return Err(name_taken(m)),
        other => other.map_err(store_failure)?,
    };
    info!(channel = %created.id, space = %created.space_id, "channel created");
    let channel = access::channel_conversation(&created);
    Ok((StatusCode::CREATED, Json(json!({ "channel": channel }))).into_response())
}

/// `PATCH /api/v1/channels/{channelId} {name?, state?}` (operator, or a
/// person with admin on the channel): 200 `{channel}`. Works in every state,
/// so an archived channel can be reopened. Cached channel facts are dropped
/// before the answer, whatever the store answered: a state change may
/// remove rights.
pub async fn patch_channel(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(channel): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let caller = manager(&hub, &headers, remote).await?;
    checked_json(&headers, &body)?;
    let body = json_object(&body, &["name", "state"])?;
    let name = body
        .get("name")
        .map(|n| channel_name(Some(n)))
        .transpose()?;
    let state = body.get("state").map(state_of).transpose()?;
    if name.is_none() && state.is_none() {
        return Err(bad_field("/name", "name or state is required"));
    }
    let target = Target::conversation(path_id(&channel)).called("channel");
    let granted = decide(&hub, &caller, Action::ChannelManage, target).await?;
    let id = match granted.loaded {
        Loaded::Conversation { membership, .. } => membership.id,
        _ => return Err(ApiError::internal()),
    };
    let result = hub.store.set_channel(id, name.as_deref(), state).await;
    // Before the result is mapped: a failed write may still have changed
    // the state, so no cached state outlives it.
    hub.memberships.invalidate_channels();
    let updated = match result {
        Err(StoreError::Conflict(m)) => return Err(name_taken(m)),
        other => other.map_err(store_failure)?,
    };
    info!(channel = %id, state = updated.state.as_str(), "channel changed");
    Ok(Json(
        json!({ "channel": access::channel_conversation(&updated) }),
    ))
}

fn state_of(v: &Value) -> Result<ChannelState, ApiError> {
    v.as_str()
        .and_then(ChannelState::parse)
        .ok_or_else(|| bad_field("/state", "must be open, read_only or archived"))
}

/// `GET /api/v1/conversations/{conversationId}` (any key):
/// `conversation.read`, the conversation as `*/conversation/get` answers it.
pub async fn get_conversation(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(conversation): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let me = reader(&hub, &headers, remote).await?;
    let target = Target::conversation_row(path_id(&conversation));
    let granted = access::check_rest(&hub, me, Action::ConversationRead, target).await?;
    match granted.loaded {
        Loaded::Conversation { row: Some(c), .. } => Ok(Json(json!({ "conversation": c }))),
        _ => Err(ApiError::internal()),
    }
}
