//! `GET /api/v1/events`: catch-up over REST, with an optional long-poll.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde_json::json;

use super::error::ApiError;
use super::identity::bearer;

use super::query::QueryParams;
use crate::access::{self, Target};
use crate::config::EventsConfig;
use crate::domain::authz::Action;
use crate::domain::event::{StoredEvent, StreamPosition};
use crate::hub::Hub;
use crate::protocol::params::MAX_CURSOR;

fn bad(code: &'static str, message: String) -> ApiError {
    ApiError::invalid(code, message, Vec::new())
}

/// A numeric parameter; one that is not a whole number within its range is
/// refused with `range`, the parameter's own bounds in words.
fn number(
    query: &HashMap<String, String>,
    name: &str,
    max: u64,
    range: impl FnOnce() -> String,
) -> Result<Option<u64>, ApiError> {
    match query.get(name) {
        None => Ok(None),
        Some(v) => match v.parse::<u64>() {
            Ok(n) if n <= max => Ok(Some(n)),
            _ => Err(bad(
                match name {
                    "after" => "invalid_cursor",
                    "limit" => "invalid_limit",
                    _ => "invalid_query",
                },
                range(),
            )),
        },
    }
}

/// A cursor: the same bound as the gateway's, since the log binds them as
/// signed 64-bit integers.
fn cursor(query: &HashMap<String, String>) -> Result<Option<u64>, ApiError> {
    number(query, "after", MAX_CURSOR, || {
        format!("after must be an integer from 0 to {MAX_CURSOR}")
    })
}

fn store_failure(e: crate::store::StoreError) -> ApiError {
    tracing::error!(error = %e, "store failure");
    ApiError::internal()
}

/// A page of the caller's events after `after` (default: the last
/// acknowledged seq), oldest first, in the same envelope as the gateway.
pub async fn catch_up(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    QueryParams(query): QueryParams,
) -> Result<Json<CatchUpPage>, ApiError> {
    let auth = bearer(&hub, &headers, remote).await?;
    let audience = auth.principal.id;
    let target = Target::stream(audience);
    access::check_rest(&hub, auth.principal, Action::EventRead, target).await?;
    let (limit, wait) = check_query(&hub.config.events, &query)?;
    let pos = hub
        .store
        .stream_position(audience)
        .await
        .map_err(store_failure)?;
    let after = check_cursor(&hub, &query, &pos)?;
    // `limit` is within `events.page_max`, a u32.
    let events = hub
        .events_after_waiting(audience, after, limit as u32, wait)
        .await
        .map_err(store_failure)?;
    if events.first().is_some_and(|e| e.seq != after + 1) {
        // Retention passed the cursor between the check and the read.
        let pos = hub
            .store
            .stream_position(audience)
            .await
            .map_err(store_failure)?;
        return Err(resync(
            &hub,
            &pos,
            format!(
                "events after seq {after} were pruned; the log holds seq {} to {}",
                pos.oldest_seq, pos.last_seq
            ),
        ));
    }
    let next_after = events.last().map_or(after, |e| e.seq);
    let latest = hub
        .store
        .stream_position(audience)
        .await
        .map_err(store_failure)?
        .last_seq;
    Ok(Json(CatchUpPage {
        has_more: next_after < latest,
        next_after,
        latest_seq: latest,
        sync_epoch: hub.sync_epoch.clone(),
        events,
    }))
}

/// A catch-up page. Serialized straight from the stored events, so their
/// payloads go out as the log holds them, never parsed (ADR 0018).
pub struct CatchUpPage {
    events: Vec<StoredEvent>,
    next_after: u64,
    latest_seq: u64,
    has_more: bool,
    sync_epoch: String,
}

impl serde::Serialize for CatchUpPage {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let envelopes: Vec<_> = self.events.iter().map(|e| e.envelope_ref()).collect();
        let mut m = s.serialize_map(Some(5))?;
        // The members in the order the page always had.
        m.serialize_entry("events", &envelopes)?;
        m.serialize_entry("nextAfter", &self.next_after)?;
        m.serialize_entry("latestSeq", &self.latest_seq)?;
        m.serialize_entry("hasMore", &self.has_more)?;
        m.serialize_entry("syncEpoch", &self.sync_epoch)?;
        m.end()
    }
}

/// Every check of the `GET /api/v1/events` query that needs no store or
/// hub state, in the route's order: the query string's form, then
/// [`check_query`], then the form of `after`; the cursor's position in the
/// log is [`check_cursor`]'s. Public for the fuzz targets (ADR 0026).
pub fn read_query(
    uri: &axum::http::Uri,
    cfg: &EventsConfig,
) -> Result<(u64, u64, Option<u64>), ApiError> {
    let QueryParams(query) = QueryParams::parse(uri)?;
    let (limit, wait) = check_query(cfg, &query)?;
    let after = cursor(&query)?;
    Ok((limit, wait, after))
}

/// Known parameters only; `limit` within `events.page_max` and `wait`
/// within `events.max_wait_seconds`.
fn check_query(
    cfg: &EventsConfig,
    query: &HashMap<String, String>,
) -> Result<(u64, u64), ApiError> {
    if let Some(unknown) = query
        .keys()
        .find(|k| !["after", "limit", "wait", "syncEpoch"].contains(&k.as_str()))
    {
        return Err(bad(
            "invalid_query",
            format!("unknown query parameter {unknown:?}"),
        ));
    }
    let limits = || format!("limit must be from 1 to {} (events.page_max)", cfg.page_max);
    let limit =
        number(query, "limit", cfg.page_max as u64, limits)?.unwrap_or(cfg.page_default as u64);
    if limit == 0 {
        return Err(bad("invalid_limit", limits()));
    }
    let wait = number(query, "wait", cfg.max_wait_seconds, || {
        format!(
            "wait must be from 0 to {} seconds (events.max_wait_seconds)",
            cfg.max_wait_seconds
        )
    })?
    .unwrap_or(0);
    Ok((limit, wait))
}

/// 410 with what the client needs to start over.
fn resync(hub: &Hub, pos: &StreamPosition, message: String) -> ApiError {
    let mut e = ApiError::new(StatusCode::GONE, "resync_required", message);
    e.extra = Some(Box::new(json!({
        "syncEpoch": hub.sync_epoch,
        "oldestSeq": pos.oldest_seq,
        "latestSeq": pos.last_seq,
        "ackedSeq": pos.acked_seq,
    })));
    e
}

/// The cursor to read after: the same sync epoch, not beyond the latest
/// seq, and not pruned.
fn check_cursor(
    hub: &Hub,
    query: &HashMap<String, String>,
    pos: &StreamPosition,
) -> Result<u64, ApiError> {
    if let Some(epoch) = query.get("syncEpoch") {
        if epoch != &hub.sync_epoch {
            return Err(resync(hub, pos, "the event log's syncEpoch changed; fetch current state and read from oldestSeq - 1".into()));
        }
    }
    let after = cursor(query)?.unwrap_or(pos.acked_seq);
    if after > pos.last_seq {
        return Err(bad(
            "invalid_cursor",
            format!(
                "after ({after}) is beyond the latest seq ({})",
                pos.last_seq
            ),
        ));
    }
    if !pos.can_serve_after(after) {
        return Err(resync(
            hub,
            pos,
            format!(
                "events after seq {after} were pruned; the log holds seq {} to {}",
                pos.oldest_seq, pos.last_seq
            ),
        ));
    }
    Ok(after)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(query: &str) -> Result<(u64, u64, Option<u64>), &'static str> {
        let uri: axum::http::Uri = format!("/api/v1/events?{query}").parse().unwrap();
        read_query(&uri, &EventsConfig::default()).map_err(|e| e.code)
    }

    #[test]
    fn the_events_query_is_read_with_the_routes_codes() {
        assert_eq!(read(""), Ok((100, 0, None)));
        assert_eq!(read("after=5&limit=2&wait=30"), Ok((2, 30, Some(5))));
        assert_eq!(read("limit=0"), Err("invalid_limit"));
        assert_eq!(read("limit=1001"), Err("invalid_limit"));
        assert_eq!(read("wait=31"), Err("invalid_query"));
        assert_eq!(read("after=9223372036854775808"), Err("invalid_cursor"));
        assert_eq!(read("after=5&after=0"), Err("invalid_query"));
        assert_eq!(read("unknown=1"), Err("invalid_query"));
    }
}
