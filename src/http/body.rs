//! Request bodies: read whole under a deadline and a size limit before any
//! handler runs, and, for JSON routes, checked for the media type and for
//! duplicate keys.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;

use super::error::ApiError;
use crate::domain::strict_json::reject_duplicate_keys;
use crate::domain::validate::FieldProblem;
use crate::hub::Hub;

enum Unread {
    TooLarge,
    Broken,
}

/// Buffers the body within `server.body_read_timeout_ms`: a client that
/// stops sending half-way holds its connection no longer than that.
pub async fn read_whole(State(hub): State<Arc<Hub>>, request: Request, next: Next) -> Response {
    let cfg = &hub.config.server;
    let (parts, body) = request.into_parts();
    let deadline = Duration::from_millis(cfg.body_read_timeout_ms);
    let read = tokio::time::timeout(deadline, collect(body, cfg.max_http_body_bytes)).await;
    let refusal = match read {
        Ok(Ok(bytes)) => {
            return next
                .run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Ok(Err(Unread::TooLarge)) => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!(
                "the body exceeds server.max_http_body_bytes ({})",
                cfg.max_http_body_bytes
            ),
        ),
        Ok(Err(Unread::Broken)) => ApiError::invalid(
            "invalid_body",
            "the request body could not be read",
            Vec::new(),
        ),
        Err(_) => ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            format!(
                "the body did not arrive within server.body_read_timeout_ms ({})",
                cfg.body_read_timeout_ms
            ),
        ),
    };
    // The rest of the body is never read, so the connection cannot carry
    // another request.
    let mut response = refusal.into_response();
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

async fn collect(body: Body, limit: usize) -> Result<Bytes, Unread> {
    let mut stream = body.into_data_stream();
    let mut buf = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| Unread::Broken)?;
        if buf.len() + chunk.len() > limit {
            return Err(Unread::TooLarge);
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(buf))
}

/// A JSON route's body: sent as `application/json` (415 otherwise, so that
/// no web page can post it cross-site without a preflight) and free of
/// duplicate keys (400 `duplicate_key` naming the path).
pub fn checked_json(headers: &HeaderMap, body: &[u8]) -> Result<(), ApiError> {
    let media_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::trim);
    if !media_type.is_some_and(|m| m.eq_ignore_ascii_case("application/json")) {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "this route takes a JSON body: send Content-Type: application/json",
        ));
    }
    reject_duplicate_keys(body).map_err(|d| {
        ApiError::invalid(
            "duplicate_key",
            format!("the body has a {d}"),
            vec![FieldProblem {
                pointer: d.pointer,
                message: "appears twice in its object".into(),
            }],
        )
    })
}
