//! The operator's web console at `/console` (issue 21 part 3, ADR 0030):
//! the embedded page and assets, the session that the admin token is
//! exchanged for, the live view over server-sent events, and the actions.
//! Every answer under `/console` carries the strict Content-Security-Policy
//! and its companions; with no `admin.token` every console route is a 404.
//!
//! The console's routes are cookie-authenticated and private to the page
//! the hub serves, so they are not in `rpc/openapi.json` (ADR 0030,
//! "Implementation notes").

mod actions;
mod assets;
mod login;
mod pages;
mod session;
mod stream;
mod view;

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{header, HeaderName, HeaderValue};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{any, get, post};
use axum::{Extension, Router};

use crate::hub::Hub;

pub use login::{CSRF_COOKIE, CSRF_HEADER, SESSION_COOKIE};
pub use pages::Asset;

/// The policy every console answer carries: the page's own scripts, styles
/// and images, requests to the hub only, no frames, no plugins, no base.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; \
     form-action 'self'; frame-ancestors 'none'";

/// What the console's routes share: its sessions, its one reader of the
/// view, and this hub process's node id: the one `/readyz` names, so the
/// connections listed here are told apart by the node behind the load
/// balancer that holds them (in `single` mode too, where the id is the
/// configured `cluster.node_id` or one drawn at start).
pub struct Console {
    sessions: session::Sessions,
    feed: Arc<stream::Feed>,
    node: Arc<str>,
}

impl Console {
    fn new(hub: &Hub) -> Console {
        Console {
            sessions: session::Sessions::new(
                hub.store.clone(),
                &hub.config.console,
                &hub.config.admin.token,
            ),
            feed: Arc::new(stream::Feed::default()),
            node: hub.cluster.node_id().into(),
        }
    }
}

pub fn routes(hub: &Hub) -> Router<Arc<Hub>> {
    Router::new()
        .route("/console", get(pages::index))
        .route("/console/", get(pages::index))
        .route("/console/assets/{name}", get(pages::asset))
        .route(
            "/console/api/session",
            get(login::status).post(login::login).delete(login::logout),
        )
        .route("/console/api/stream", get(stream::stream))
        .route("/console/api/apps/{app_id}/suspend", post(actions::suspend))
        .route("/console/api/apps/{app_id}/resume", post(actions::resume))
        .route("/console/api/apps/{app_id}/check", post(actions::check))
        .route(
            "/console/api/agents/{agent_id}/keys/revoke",
            post(actions::revoke_keys),
        )
        // Any other path under the console is a 404 that still carries the
        // console's headers, as every answer under `/console` does.
        .route("/console/{*rest}", any(pages::not_found))
        .layer(Extension(Arc::new(Console::new(hub))))
        .layer(middleware::from_fn(security_headers))
}

/// The headers of every console answer; `no-store` unless the answer
/// chose its caching (the hashed assets).
async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    let fixed: [(HeaderName, &'static str); 6] = [
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (
            HeaderName::from_static("cross-origin-opener-policy"),
            "same-origin",
        ),
        (
            HeaderName::from_static("cross-origin-resource-policy"),
            "same-origin",
        ),
    ];
    for (name, value) in fixed {
        h.insert(name, HeaderValue::from_static(value));
    }
    if !h.contains_key(header::CACHE_CONTROL)
        || h.get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"))
    {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}
