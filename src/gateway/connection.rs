//! One WebSocket connection: a reader loop (this task) and a writer task.
//!
//! The reader classifies each frame: requests go to the router (connect
//! methods run inline so that the calls pipelined behind them see the new
//! session; everything else runs as its own task under the in-flight limit),
//! responses complete the hub's own pending calls. The writer drains the
//! bounded outbound queue onto the socket, sends heartbeat pings, and writes
//! the close frame. See docs/architecture.md for the whole path.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tracing::{debug, info, warn};
use uuid::Uuid;

use crate::hub::{ConnectionInfo, Hub, RequestContext};
use crate::protocol::router::Route;
use crate::protocol::Caller;
use crate::rpc::frame::{self, Id, Incoming};
use crate::rpc::peer::CloseRequest;
use crate::rpc::{close_code, CallOutcome, ErrorKind, Peer, RpcError};
use crate::telemetry::names;

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
}

pub async fn run(hub: Arc<Hub>, socket: WebSocket) {
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
    };
    reader.read_loop(stream).await;

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
                    let msg = match msg {
                        Some(Ok(msg)) => msg,
                        Some(Err(e)) => {
                            if is_capacity_error(e) {
                                metrics::counter!(names::FRAMES_REJECTED, "reason" => "transport_too_large").increment(1);
                                peer.close(
                                    close_code::MESSAGE_TOO_BIG,
                                    "frame exceeds gateway.transport_max_frame_bytes",
                                );
                            }
                            break;
                        }
                        None => break,
                    };
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
                    warn!(connection = %self.conn.id, %reason, "malformed response matches no pending call");
                }
            }
            Incoming::Invalid { id, error } => {
                let reason = if error.code == ErrorKind::ParseError.code() {
                    "parse"
                } else {
                    "invalid"
                };
                self.reject(id.as_ref(), error, reason);
            }
        }
    }

    fn unmatched(&self, id: &Id) {
        metrics::counter!(names::UNMATCHED_RESPONSES).increment(1);
        warn!(
            connection = %self.conn.id,
            id = %bounded(&id.to_string()),
            "response matches no pending call (late, duplicate or unknown id)"
        );
    }

    async fn on_request(&mut self, id: Id, method: String, params: Option<Value>) {
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
            Caller::Unauthenticated => self.connect(id, route, ctx, params, started).await,
            caller @ (Caller::Agent | Caller::App) => {
                let permit = match self.admit(caller, name) {
                    Ok(permit) => permit,
                    Err(err) => {
                        self.finish(&id, name, started, Err(err));
                        return;
                    }
                };
                let peer = self.conn.peer.clone();
                let future = route.call(ctx, params);
                hub.tasks.spawn(async move {
                    let result = future.await;
                    record(name, started, &result);
                    let text = match &result {
                        Ok(v) => frame::result(&id, v),
                        Err(e) => frame::error(Some(&id), e),
                    };
                    // Queue the answer before giving the slot back: a draining
                    // socket closes once every slot is free, and the answer
                    // must be in the queue by then.
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

    /// A connect call, once per socket. Inline, so requests pipelined behind
    /// the connect see its session.
    async fn connect(
        &mut self,
        id: Id,
        route: &Route<RequestContext>,
        ctx: RequestContext,
        params: Option<Value>,
        started: Instant,
    ) {
        let name = route.spec.name;
        if let Some(s) = self.conn.session.get() {
            let err = RpcError::conflict(format!(
                "this socket is already connected as {} {}",
                s.principal.kind, s.principal.id
            ));
            self.finish(&id, name, started, Err(err));
            return;
        }
        let result = route.call(ctx, params).await;
        let connected = result.is_ok();
        self.finish(&id, name, started, result);
        if connected {
            self.authenticated = true;
            metrics::gauge!(names::CONNECTIONS, "kind" => "unauthenticated").decrement(1.0);
            // After the answer is queued, so events follow it.
            self.start_events();
        }
    }

    /// Whether this socket may run an agent or app method now: a session of
    /// the right kind, a token from the principal's rate limiter, and a free
    /// in-flight slot (returned as the permit the call holds).
    fn admit(&self, caller: Caller, name: &str) -> Result<OwnedSemaphorePermit, RpcError> {
        let hub = &self.hub;
        let Some(session) = self.conn.session.get() else {
            return Err(RpcError::unauthorized(
                "not connected: call agent/network/connect or app/network/connect first",
            ));
        };
        let expected = match caller {
            Caller::Agent => crate::domain::PrincipalKind::Agent,
            _ => crate::domain::PrincipalKind::App,
        };
        if session.principal.kind != expected {
            return Err(RpcError::forbidden(format!(
                "{name} may be called only by an {}",
                caller.as_str()
            )));
        }
        if let Err(not_until) = hub.limiter.check_key(&session.principal.id) {
            let wait = not_until.wait_time_from(governor::clock::Clock::now(
                &governor::clock::DefaultClock::default(),
            ));
            return Err(RpcError::new(
                ErrorKind::RateLimited,
                "rate limit exceeded (gateway.rate_limit_per_second)",
            )
            .with_data(json!({ "retryAfterMs": wait.as_millis() as u64 })));
        }
        let Ok(permit) = self.in_flight.clone().try_acquire_owned() else {
            let limit = hub.config.gateway.max_in_flight_requests;
            return Err(RpcError::new(ErrorKind::RateLimited, format!(
                "too many requests in flight on this socket (gateway.max_in_flight_requests = {limit})"
            ))
            .with_data(json!({ "limit": limit })));
        };
        Ok(permit)
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

/// A frame beyond the transport limit: the socket cannot be read further,
/// but the close frame can still say why.
fn is_capacity_error(e: axum::Error) -> bool {
    use tokio_tungstenite::tungstenite::Error;
    matches!(
        e.into_inner().downcast_ref::<Error>(),
        Some(Error::Capacity(_))
    )
}

/// Peer-supplied strings in logs are cut short; they are never trusted to be
/// small.
fn bounded(s: &str) -> String {
    s.chars().take(100).collect()
}

async fn write_loop(
    mut sink: SplitSink<WebSocket, Message>,
    mut queue: mpsc::Receiver<String>,
    peer: Peer,
    started: Instant,
    last_seen_ms: Arc<AtomicU64>,
    heartbeat_interval: Duration,
    heartbeat_timeout: Duration,
) {
    let mut ticker = tokio::time::interval(heartbeat_interval);
    ticker.tick().await;
    loop {
        tokio::select! {
            biased;
            _ = peer.closing() => break,
            frame = queue.recv() => {
                let Some(text) = frame else { break };
                // Feed what is queued, then flush once: one syscall for a burst.
                let mut ok = within(heartbeat_timeout, sink.feed(Message::Text(text.into()))).await;
                let mut fed = 1;
                while ok && fed < 64 {
                    match queue.try_recv() {
                        Ok(more) => {
                            ok = within(heartbeat_timeout, sink.feed(Message::Text(more.into()))).await;
                            fed += 1;
                        }
                        Err(_) => break,
                    }
                }
                if !ok || !within(heartbeat_timeout, sink.flush()).await {
                    peer.shutdown();
                    return;
                }
                peer.frames_drained();
            }
            _ = ticker.tick() => {
                let silent = started.elapsed().saturating_sub(Duration::from_millis(last_seen_ms.load(Ordering::Relaxed)));
                if silent > heartbeat_timeout {
                    metrics::counter!(names::DISCONNECTS, "reason" => "heartbeat_timeout").increment(1);
                    peer.close(close_code::HEARTBEAT_TIMEOUT, "heartbeat timeout");
                    break;
                }
                if !within(heartbeat_timeout, sink.send(Message::Ping(Vec::new().into()))).await {
                    peer.shutdown();
                    return;
                }
            }
        }
    }
    let close = peer.close_requested().cloned().unwrap_or(CloseRequest {
        code: close_code::NORMAL,
        reason: String::new(),
    });
    // Frames queued before a graceful close (answers to in-flight requests)
    // still go out; a slow or dead peer gets only the close frame.
    if close.code != close_code::SLOW_CONSUMER && close.code != close_code::HEARTBEAT_TIMEOUT {
        while let Ok(text) = queue.try_recv() {
            if !within(heartbeat_timeout, sink.send(Message::Text(text.into()))).await {
                return;
            }
        }
    }
    if close.code == close_code::SLOW_CONSUMER {
        metrics::counter!(names::DISCONNECTS, "reason" => "slow_consumer").increment(1);
    }
    let close_frame = Message::Close(Some(CloseFrame {
        code: close.code,
        reason: Utf8Bytes::from(close.reason),
    }));
    if within(heartbeat_timeout, sink.send(close_frame)).await {
        let _ = within(heartbeat_timeout, sink.close()).await;
    }
}

/// A socket write that must finish within `limit`: a peer that stopped
/// reading must not hold the writer (and its socket) forever.
async fn within<E>(
    limit: Duration,
    write: impl std::future::Future<Output = Result<(), E>>,
) -> bool {
    matches!(tokio::time::timeout(limit, write).await, Ok(Ok(())))
}
