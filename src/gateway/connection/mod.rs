//! One WebSocket connection: a reader loop (this task) and a writer task.
//!
//! The reader classifies each frame: requests go to the router (connect
//! methods run inline so that the calls pipelined behind them see the new
//! session; everything else runs as its own task under the in-flight limit),
//! responses complete the hub's own pending calls. Until a connect succeeds
//! the socket is on a short leash: a few frames, a few refused keys, nothing
//! logged. The writer (`gateway::writer`) drains the bounded outbound queue
//! onto the socket, sends heartbeat pings, and writes the close frame. See
//! docs/architecture.md for the whole path.

mod admission;

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::extract::ws::{Message, WebSocket};
use futures_util::stream::SplitStream;
use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::sync::Semaphore;
use tracing::{debug, info, warn};
use uuid::Uuid;

use super::hygiene::{answer_even_if_it_panics, frame_len, transport_violation, MAX_ID_BYTES};
use super::writer::write_loop;
use crate::hub::{ConnectionInfo, Hub, RequestContext};
use crate::protocol::Caller;
use crate::rpc::frame::{self, Id, Incoming};
use crate::rpc::{close_code, CallOutcome, ErrorKind, Peer, RpcError};
use crate::telemetry::{names, LogBudget};

/// Unmatched and malformed answers, hub-wide: counted always, logged a few
/// times a minute.
static UNMATCHED_LOG: LogBudget = LogBudget::new(10);

struct Reader {
    hub: Arc<Hub>,
    conn: Arc<ConnectionInfo>,
    in_flight: Arc<Semaphore>,
    started: Instant,
    last_seen_ms: Arc<AtomicU64>,
    draining: bool,
    /// Whether a connect call succeeded (the socket left the
    /// unauthenticated gauge).
    authenticated: bool,
    remote: IpAddr,
    /// Frames read before a connect succeeded.
    unauthenticated_frames: u32,
    failed_connects: u32,
    /// Ids of this socket's requests being handled, as the peer wrote them.
    in_flight_ids: Arc<Mutex<HashSet<String>>>,
}

pub async fn run(hub: Arc<Hub>, socket: WebSocket, remote: IpAddr) {
    let cfg = hub.config.gateway.clone();
    let (peer, queue) = Peer::new("hub-", cfg.outbound_queue_capacity as usize);
    let conn = Arc::new(ConnectionInfo {
        id: Uuid::new_v4(),
        peer: peer.clone(),
        session: OnceLock::new(),
        event_start: OnceLock::new(),
    });
    let (sink, stream) = socket.split();
    let started = Instant::now();
    let last_seen_ms = Arc::new(AtomicU64::new(0));
    metrics::gauge!(names::CONNECTIONS, "kind" => "unauthenticated").increment(1.0);
    debug!(connection = %conn.id, "socket opened");

    let writer = tokio::spawn(write_loop(
        sink,
        queue,
        peer.clone(),
        started,
        last_seen_ms.clone(),
        Duration::from_millis(cfg.heartbeat_interval_ms),
        Duration::from_millis(cfg.heartbeat_timeout_ms),
    ));

    let mut reader = Reader {
        hub: hub.clone(),
        conn: conn.clone(),
        in_flight: Arc::new(Semaphore::new(cfg.max_in_flight_requests as usize)),
        started,
        last_seen_ms,
        draining: false,
        authenticated: false,
        remote,
        unauthenticated_frames: 0,
        failed_connects: 0,
        in_flight_ids: Arc::default(),
    };
    reader.read_loop(stream).await;
    // Counted here, as the read loop ends on the close request, not when the
    // writer gets to its close frame: a slow consumer's writer is typically
    // blocked on the socket and aborted below, and then never gets there.
    if peer.close_requested().map(|c| c.code) == Some(close_code::SLOW_CONSUMER) {
        metrics::counter!(names::DISCONNECTS, "reason" => "slow_consumer").increment(1);
    }

    // Every pending hub call fails now, not at its timeout.
    peer.shutdown();
    let mut writer = writer;
    if tokio::time::timeout(Duration::from_secs(5), &mut writer)
        .await
        .is_err()
    {
        // A peer that stopped reading can hold a write forever; dropping the
        // task drops the socket.
        writer.abort();
    }

    if !reader.authenticated {
        metrics::gauge!(names::CONNECTIONS, "kind" => "unauthenticated").decrement(1.0);
    }
    let reason = peer
        .close_requested()
        .map(|c| c.code)
        .unwrap_or(close_code::NORMAL);
    if let Some(session) = conn.session.get() {
        hub.registry.remove(session.principal, conn.id);
        if session.principal.kind == crate::domain::PrincipalKind::App {
            crate::hooks::presence::disconnected(&hub, conn.id).await;
        }
        hub.events.detach(session.principal.id, conn.id);
        info!(
            connection = %conn.id,
            principal = %session.principal.id,
            kind = %session.principal.kind,
            close_code = reason,
            "disconnected"
        );
    } else {
        debug!(connection = %conn.id, close_code = reason, "unauthenticated socket closed");
    }
}

impl Reader {
    async fn read_loop(&mut self, mut stream: SplitStream<WebSocket>) {
        let cfg = self.hub.config.gateway.clone();
        let auth_deadline = tokio::time::sleep(Duration::from_millis(cfg.auth_timeout_ms));
        tokio::pin!(auth_deadline);
        let grace = Duration::from_millis(self.hub.config.server.shutdown_grace_ms);
        let drain_deadline = tokio::time::sleep(Duration::MAX / 4);
        tokio::pin!(drain_deadline);
        let max_in_flight = cfg.max_in_flight_requests;
        let peer = self.conn.peer.clone();
        let hub = self.hub.clone();

        let mut drain_tick = tokio::time::interval(Duration::from_millis(20));
        loop {
            tokio::select! {
                biased;
                _ = peer.closing() => break,
                _ = hub.shutdown.cancelled(), if !self.draining => {
                    self.draining = true;
                    drain_deadline.as_mut().reset(tokio::time::Instant::now() + grace);
                }
                _ = &mut drain_deadline, if self.draining => {
                    peer.close(close_code::GOING_AWAY, "hub shutting down");
                    break;
                }
                _ = &mut auth_deadline, if self.conn.session.get().is_none() => {
                    metrics::counter!(names::DISCONNECTS, "reason" => "auth_timeout").increment(1);
                    peer.close(close_code::AUTH_TIMEOUT, "authentication timeout");
                    break;
                }
                _ = drain_tick.tick(), if self.draining => {
                    // Close once the socket's own requests are answered and
                    // the hub's calls to it (app hooks) are answered too.
                    let idle = self.in_flight.available_permits() == max_in_flight as usize;
                    if idle && peer.pending_calls() == 0 {
                        peer.close(close_code::GOING_AWAY, "hub shutting down");
                        break;
                    }
                }
                msg = stream.next() => {
                    let Some(msg) = self.frame_or_close(msg) else { break };
                    if !self.within_leash(&msg, &cfg) {
                        break;
                    }
                    self.last_seen_ms
                        .store(self.started.elapsed().as_millis() as u64, Ordering::Relaxed);
                    match msg {
                        Message::Text(text) => self.on_text(text.as_str()).await,
                        Message::Binary(_) => {
                            self.reject(None, RpcError::invalid_request("binary frames are not supported; send JSON text frames"), "binary");
                        }
                        Message::Close(_) => break,
                        Message::Ping(_) | Message::Pong(_) => {}
                    }
                }
            }
        }
    }

    /// The next frame, or `None` when the socket ended; a transport
    /// violation closes it with its RFC 6455 code first.
    fn frame_or_close(&self, msg: Option<Result<Message, axum::Error>>) -> Option<Message> {
        match msg {
            Some(Ok(msg)) => Some(msg),
            Some(Err(e)) => {
                if let Some((code, reason, label)) = transport_violation(e) {
                    metrics::counter!(names::FRAMES_REJECTED, "reason" => label).increment(1);
                    self.conn.peer.close(code, reason);
                }
                None
            }
            None => None,
        }
    }

    /// Before a connect a socket may send only a few small frames; past
    /// either limit it is closed (false).
    fn within_leash(&mut self, msg: &Message, cfg: &crate::config::GatewayConfig) -> bool {
        if self.authenticated {
            return true;
        }
        let peer = &self.conn.peer;
        if !matches!(msg, Message::Close(_)) {
            self.unauthenticated_frames += 1;
            if self.unauthenticated_frames > cfg.max_unauthenticated_frames {
                metrics::counter!(names::DISCONNECTS, "reason" => "unauthenticated_frames")
                    .increment(1);
                peer.close(
                    close_code::POLICY_VIOLATION,
                    "too many frames before a connect (gateway.max_unauthenticated_frames)",
                );
                return false;
            }
        }
        if frame_len(msg) > cfg.unauthenticated_max_frame_bytes {
            metrics::counter!(names::DISCONNECTS, "reason" => "unauthenticated_frame_size")
                .increment(1);
            peer.close(
                close_code::MESSAGE_TOO_BIG,
                "frame before a connect exceeds gateway.unauthenticated_max_frame_bytes",
            );
            return false;
        }
        true
    }

    fn send(&self, text: String) {
        // A failed send already closed the connection (slow consumer) or the
        // socket is gone; either way there is nobody left to tell.
        let _ = self.conn.peer.send(text);
    }

    fn reject(&self, id: Option<&Id>, error: RpcError, reason: &'static str) {
        metrics::counter!(names::FRAMES_REJECTED, "reason" => reason).increment(1);
        self.send(frame::error(id, &error));
    }

    async fn on_text(&mut self, text: &str) {
        let max = self.hub.config.gateway.max_frame_bytes;
        if text.len() > max {
            self.reject(
                None,
                RpcError::invalid_request(format!(
                    "frame of {} bytes exceeds gateway.max_frame_bytes ({max})",
                    text.len()
                ))
                .with_data(json!({ "limit": max, "size": text.len() })),
                "too_large",
            );
            return;
        }
        match frame::parse(text) {
            Incoming::Request { id, method, params } => self.on_request(id, method, params).await,
            Incoming::Notification { method, .. } => {
                // No peer-to-hub notifications exist; JSON-RPC forbids answering one.
                metrics::counter!(names::FRAMES_REJECTED, "reason" => "notification").increment(1);
                debug!(connection = %self.conn.id, method = %bounded(&method), "ignored notification");
            }
            Incoming::Response { id, outcome } => {
                let outcome = match outcome {
                    Ok(v) => CallOutcome::Ok(v),
                    Err(e) => CallOutcome::RemoteError(e),
                };
                if !self.conn.peer.complete(&id, outcome) {
                    self.unmatched(&id);
                }
            }
            Incoming::MalformedResponse { id, reason } => {
                let completed = id.as_ref().is_some_and(|id| {
                    self.conn
                        .peer
                        .complete(id, CallOutcome::BadResult(reason.clone()))
                });
                if !completed {
                    metrics::counter!(names::UNMATCHED_RESPONSES).increment(1);
                    if let Some(suppressed) = self.warn_budget() {
                        warn!(connection = %self.conn.id, %reason, suppressed, "malformed response matches no pending call");
                    }
                }
            }
            Incoming::Invalid { id, error } => {
                let reason = if error.code == ErrorKind::ParseError.code() {
                    "parse"
                } else {
                    "invalid"
                };
                // An over-long string id is not echoed on any path.
                let id = id.filter(|id| !matches!(id, Id::Str(s) if s.len() > MAX_ID_BYTES));
                self.reject(id.as_ref(), error, reason);
            }
        }
    }

    fn unmatched(&self, id: &Id) {
        metrics::counter!(names::UNMATCHED_RESPONSES).increment(1);
        if let Some(suppressed) = self.warn_budget() {
            warn!(
                connection = %self.conn.id,
                id = %bounded(&id.to_string()),
                suppressed,
                "response matches no pending call (late, duplicate or unknown id)"
            );
        }
    }

    /// Whether a peer-caused warning may be logged (`Some(lines suppressed
    /// before it)`). An unauthenticated socket never makes the hub warn: it
    /// has called nothing that could be answered.
    fn warn_budget(&self) -> Option<u64> {
        if !self.authenticated {
            debug!(connection = %self.conn.id, "answer on an unauthenticated socket ignored");
            return None;
        }
        UNMATCHED_LOG.admit()
    }

    async fn on_request(&mut self, id: Id, method: String, params: Option<Value>) {
        if let Id::Str(s) = &id {
            if s.len() > MAX_ID_BYTES {
                // Not echoed: the id is what is too large.
                let error = RpcError::invalid_request(format!(
                    "request id of {} bytes exceeds {MAX_ID_BYTES} bytes; use a shorter string id",
                    s.len()
                ))
                .with_data(json!({ "limit": MAX_ID_BYTES, "size": s.len() }));
                return self.reject(None, error, "id_too_long");
            }
        }
        let hub = self.hub.clone();
        let Some(route) = hub.router.route(&method) else {
            self.method_not_found(&id, &method);
            return;
        };
        let name = route.spec.name;
        if self.draining {
            self.finish(
                &id,
                name,
                Instant::now(),
                Err(RpcError::new(
                    ErrorKind::ShuttingDown,
                    "the hub is shutting down; reconnect shortly",
                )),
            );
            return;
        }
        let ctx = RequestContext {
            hub: hub.clone(),
            conn: self.conn.clone(),
        };
        let started = Instant::now();
        match route.spec.caller {
            Caller::Unauthenticated => self.connect(id, route, ctx, params).await,
            Caller::Agent | Caller::App | Caller::Person => {
                let (id_slot, permit) = match self.admit(&id, &route.spec) {
                    Ok(admitted) => admitted,
                    Err(err) => return self.finish(&id, name, started, Err(err)),
                };
                let peer = self.conn.peer.clone();
                let future = route.call(ctx, params);
                let connection = self.conn.id;
                hub.tasks.spawn(async move {
                    let result = answer_even_if_it_panics(name, connection, future).await;
                    record(name, started, &result);
                    let text = match &result {
                        Ok(v) => frame::result(&id, v),
                        Err(e) => frame::error(Some(&id), e),
                    };
                    // The id is free once its answer is decided, so a peer
                    // that reuses it after reading the answer is never
                    // refused. The answer is queued before the slot is given
                    // back: a draining socket closes once every slot is
                    // free, and the answer must be in the queue by then.
                    drop(id_slot);
                    let _ = peer.send(text);
                    drop(permit);
                });
            }
        }
    }

    fn method_not_found(&self, id: &Id, method: &str) {
        metrics::counter!(names::RPC_CALLS, "method" => "unknown", "outcome" => ErrorKind::MethodNotFound.tag())
            .increment(1);
        self.send(frame::error(
            Some(id),
            &RpcError::new(
                ErrorKind::MethodNotFound,
                format!("Method not found: {}", bounded(method)),
            )
            .with_data(json!({ "method": bounded(method) })),
        ));
    }

    fn start_events(&self) {
        let (Some(session), Some(start)) = (self.conn.session.get(), self.conn.event_start.get())
        else {
            return;
        };
        self.hub.events.attach(
            &self.hub.tasks,
            self.conn.id,
            session.principal.id,
            self.conn.peer.clone(),
            *start,
        );
    }

    fn finish(
        &self,
        id: &Id,
        name: &'static str,
        started: Instant,
        result: Result<Value, RpcError>,
    ) {
        record(name, started, &result);
        match result {
            Ok(v) => self.send(frame::result(id, &v)),
            Err(e) => self.send(frame::error(Some(id), &e)),
        }
    }
}

fn record(name: &'static str, started: Instant, result: &Result<Value, RpcError>) {
    let outcome = match result {
        Ok(_) => "ok",
        Err(e) => e.kind().map_or("error", ErrorKind::tag),
    };
    metrics::counter!(names::RPC_CALLS, "method" => name, "outcome" => outcome).increment(1);
    metrics::histogram!(names::RPC_DURATION, "method" => name)
        .record(started.elapsed().as_secs_f64());
}

/// Peer-supplied strings in logs are cut short; they are never trusted to be
/// small.
fn bounded(s: &str) -> String {
    s.chars().take(100).collect()
}
