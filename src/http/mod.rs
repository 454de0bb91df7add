//! REST routes and the WebSocket upgrade, on one port.

mod admin;
mod app_health;
mod audit;
mod body;
mod cards;
mod commands;
pub mod console;
mod error;
mod events;
mod grants;
mod identity;
mod installations;
mod interactions;
mod interactions_url;
mod manage;
mod messages;
pub mod openapi;
mod ops;
mod people;
mod places;
mod query;
pub mod runs;
mod webhook_subscriptions;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, MatchedPath, Request, State, WebSocketUpgrade};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, patch, post, put};
use axum::Router;

use crate::hub::Hub;
use crate::telemetry::names;

pub use error::ApiError;
pub use events::read_query as read_events_query;

pub fn router(hub: Arc<Hub>) -> Router {
    let body_limit = hub.config.server.max_http_body_bytes;
    let routes = Router::new()
        .route("/ws", get(websocket))
        .route("/api/v1/agents/register", post(identity::register_agent))
        .route("/api/v1/apps/register", post(identity::register_app))
        .route("/api/v1/keys/rotate", post(identity::rotate_key))
        .route("/api/v1/keys/revoke", post(identity::revoke_key))
        .route("/api/v1/apps/{app_id}/ping", post(admin::ping_app))
        .route("/api/v1/apps/{app_id}/health", get(app_health::health))
        .route("/api/v1/apps/{app_id}/check", post(app_health::check))
        .route(
            "/api/v1/apps/{app_id}/installation",
            post(installations::install)
                .get(installations::read)
                .delete(installations::uninstall),
        )
        .route(
            "/api/v1/apps/{app_id}/installation/scopes",
            put(installations::set_scopes),
        )
        .route(
            "/api/v1/apps/{app_id}/installation/suspend",
            post(installations::suspend),
        )
        .route(
            "/api/v1/apps/{app_id}/installation/resume",
            post(installations::resume),
        )
        .route(
            "/api/v1/apps/{app_id}/interactions-url",
            get(interactions_url::read),
        )
        .route(
            "/api/v1/apps/{app_id}/interactions-url/verify",
            post(interactions_url::verify),
        )
        .route(
            "/api/v1/apps/{app_id}/manifest",
            put(installations::upgrade),
        )
        .route(
            "/api/v1/apps/{app_id}/commands",
            post(commands::register).get(commands::app_list),
        )
        .route(
            "/api/v1/apps/{app_id}/commands/{command_id}",
            delete(commands::remove),
        )
        .route(
            "/api/v1/conversations/{conversation_id}/commands",
            get(commands::list),
        )
        .route(
            "/api/v1/commands/{command_id}/invocations",
            post(commands::invoke),
        )
        .route(
            "/api/v1/commands/{command_id}/autocomplete",
            post(commands::autocomplete),
        )
        .route(
            "/api/v1/autocomplete/{request_id}/answer",
            post(commands::autocomplete_answer),
        )
        .route("/api/v1/people", post(people::create))
        .route("/api/v1/people/me/agents", get(people::my_agents))
        .route("/api/v1/people/{person_id}/disable", post(people::disable))
        .route(
            "/api/v1/agents/{agent_id}/owner",
            put(people::put_owner).delete(people::delete_owner),
        )
        .route(
            "/api/v1/agents/{agent_id}/keys/revoke",
            post(people::revoke_agent_keys),
        )
        .route("/api/v1/spaces", post(places::create_space))
        .route("/api/v1/spaces/{space_id}", get(places::get_space))
        .route(
            "/api/v1/spaces/{space_id}/channels",
            get(places::list_channels).post(places::create_channel),
        )
        .route(
            "/api/v1/channels/{channel_id}",
            patch(places::patch_channel),
        )
        .route(
            "/api/v1/conversations/{conversation_id}",
            get(places::get_conversation),
        )
        .route(
            "/api/v1/conversations/{conversation_id}/messages",
            get(messages::list).post(messages::send),
        )
        .route("/api/v1/grants", post(grants::put).get(grants::list))
        .route("/api/v1/grants/{grant_id}", delete(grants::delete))
        .route("/api/v1/groups", post(grants::create_group))
        .route(
            "/api/v1/groups/{group_id}/members/{principal_id}",
            put(grants::add_member).delete(grants::remove_member),
        )
        .route("/api/v1/audit", get(audit::list))
        .route("/api/v1/audit/actions", get(audit::list_actions))
        .route("/api/v1/events", get(events::catch_up))
        // cards (ADR 0027 §1)
        .route(
            "/api/v1/messages/{message_id}/interactions",
            post(interactions::create),
        )
        .route(
            "/api/v1/interactions/{interaction_id}/response",
            post(interactions::respond),
        )
        .route(
            "/api/v1/messages/{message_id}/components/{component_id}",
            patch(interactions::update),
        )
        .route("/api/v1/cards", post(cards::install).get(cards::list))
        .route("/api/v1/cards/{card_id}/runs", post(runs::start))
        .route("/api/v1/runs", get(runs::list))
        .route("/api/v1/runs/{run_id}", get(runs::show))
        .route("/api/v1/runs/{run_id}/stop", post(runs::stop))
        .route("/api/v1/webhooks/keys", get(webhook_keys))
        .route("/api/v1/webhooks/test", post(admin::send_test_webhook))
        .route(
            "/api/v1/webhooks/subscriptions",
            post(webhook_subscriptions::create).get(webhook_subscriptions::list),
        )
        .route(
            "/api/v1/webhooks/subscriptions/{subscription_id}",
            get(webhook_subscriptions::read).delete(webhook_subscriptions::delete),
        )
        .route(
            "/api/v1/webhooks/subscriptions/{subscription_id}/attempts",
            get(webhook_subscriptions::attempts),
        )
        .route("/api/v1/openapi.json", get(openapi::serve))
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        .merge(console::routes(&hub))
        .fallback(|| async { ApiError::not_found("no such route") })
        .layer(axum::extract::DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn_with_state(
            hub.clone(),
            body::read_whole,
        ))
        .layer(middleware::from_fn(count_requests))
        .with_state(hub);
    // Outside the routes: only there does a 405 already carry its `Allow`
    // header, which the error message names.
    Router::new()
        .fallback_service(routes)
        .layer(middleware::from_fn(rewrite_errors))
}

async fn websocket(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: axum::http::HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    if hub.shutdown.is_cancelled() {
        return ApiError::unavailable("the hub is shutting down").into_response();
    }
    if let Err(refused) = check_origin(&hub, &headers) {
        return refused.into_response();
    }
    let limit = hub.config.gateway.transport_max_frame_bytes;
    let tracker = hub.connections.clone();
    let g = &hub.config.gateway;
    ws.max_message_size(limit)
        .max_frame_size(limit)
        .read_buffer_size(g.socket_read_buffer_bytes)
        .write_buffer_size(g.socket_write_buffer_bytes)
        .on_upgrade(move |socket| {
            tracker.track_future(crate::gateway::connection::run(hub, socket, remote.ip()))
        })
}

/// A browser sends `Origin` on every WebSocket upgrade and lets any page
/// open one to any host, loopback included; agents and apps send none. An
/// upgrade with an origin not in `gateway.allowed_origins` is refused, so a
/// web page the operator visits cannot use the hub (cross-site WebSocket
/// hijacking) or spend the address's refused-key budget.
fn check_origin(hub: &Hub, headers: &axum::http::HeaderMap) -> Result<(), ApiError> {
    let Some(origin) = headers.get(axum::http::header::ORIGIN) else {
        return Ok(());
    };
    let allowed = origin.to_str().is_ok_and(|origin| {
        hub.config
            .gateway
            .allowed_origins
            .iter()
            .any(|a| a.eq_ignore_ascii_case(origin))
    });
    if allowed {
        return Ok(());
    }
    Err(ApiError::new(
        axum::http::StatusCode::FORBIDDEN,
        "origin_not_allowed",
        "WebSocket upgrades from this Origin are refused (gateway.allowed_origins)",
    ))
}

/// The public webhook signing keys, for receivers to verify with.
async fn webhook_keys(State(hub): State<Arc<Hub>>, query: query::QueryParams) -> Response {
    if let Err(unknown) = query.only(&[]) {
        return unknown.into_response();
    }
    match crate::webhooks::keys::published(hub.store.as_ref(), crate::domain::now_millis()).await {
        Ok(keys) => axum::Json(serde_json::json!({ "keys": keys })).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "listing webhook keys failed");
            ApiError::internal().into_response()
        }
    }
}

async fn count_requests(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".to_string());
    let response = next.run(request).await;
    metrics::counter!(names::HTTP_REQUESTS, "route" => route, "status" => response.status().as_u16().to_string())
        .increment(1);
    response
}

async fn rewrite_errors(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    json_errors(next.run(request).await, &method).await
}

/// Errors produced outside our handlers (axum's rejections: 405, 413, 415,
/// ...) come as plain text; give them the documented JSON error body.
async fn json_errors(response: Response, method: &axum::http::Method) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024)
        .await
        .unwrap_or_default();
    let code = match status.as_u16() {
        405 => "method_not_allowed",
        413 => "payload_too_large",
        415 => "unsupported_media_type",
        s if s >= 500 => "internal",
        _ => "invalid_request",
    };
    let mut message = String::from_utf8_lossy(&text).trim().to_string();
    if message.is_empty() {
        message = match parts.headers.get(axum::http::header::ALLOW) {
            Some(allow) if status == axum::http::StatusCode::METHOD_NOT_ALLOWED => format!(
                "{method} is not allowed on this route; it allows {}",
                allow.to_str().unwrap_or("other methods").replace(',', ", ")
            ),
            _ => status
                .canonical_reason()
                .unwrap_or("request failed")
                .to_lowercase(),
        };
    }
    let mut rebuilt = (
        status,
        axum::Json(serde_json::json!({ "error": { "code": code, "message": message } })),
    )
        .into_response();
    for (name, value) in parts.headers.iter() {
        if name != axum::http::header::CONTENT_TYPE && name != axum::http::header::CONTENT_LENGTH {
            rebuilt.headers_mut().insert(name.clone(), value.clone());
        }
    }
    rebuilt
}
