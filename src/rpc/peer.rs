//! One side of a bidirectional JSON-RPC connection: the outbound queue and the
//! table of calls this side made and still waits on.
//!
//! The hub and the SDK both use it. The connection's own loop owns the socket;
//! a [`Peer`] is the cloneable handle everything else uses to reach the other
//! side. The shape follows rmcp and async-lsp, and avoids the bugs seen
//! elsewhere: the pending entry is registered before the frame is queued and is
//! removed by a guard on every path (answer, timeout, caller cancelled); a late
//! or unknown answer is reported, never a panic; when the connection ends every
//! pending call fails at once; a full queue never blocks the caller.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::error::RpcError;
use super::frame::{self, Id};

/// How a call this side made ended. There is no other outcome.
#[derive(Debug, Clone, PartialEq)]
pub enum CallOutcome {
    Ok(Value),
    RemoteError(RpcError),
    Timeout,
    Disconnected,
    BadResult(String),
}

impl CallOutcome {
    /// The metric label.
    pub fn label(&self) -> &'static str {
        match self {
            CallOutcome::Ok(_) => "ok",
            CallOutcome::RemoteError(_) => "remote_error",
            CallOutcome::Timeout => "timeout",
            CallOutcome::Disconnected => "disconnected",
            CallOutcome::BadResult(_) => "bad_result",
        }
    }
}

/// Why a frame could not be queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    #[error("the connection is closed")]
    Closed,
    #[error("the outbound queue is full; the connection is closed as a slow consumer")]
    SlowConsumer,
}

/// WebSocket close codes the hub uses (documented in docs/protocol.md).
pub mod close_code {
    pub const NORMAL: u16 = 1000;
    pub const GOING_AWAY: u16 = 1001;
    /// The peer broke the WebSocket framing rules (RFC 6455 section 7.4.1).
    pub const PROTOCOL_ERROR: u16 = 1002;
    /// A text frame that is not UTF-8.
    pub const INVALID_PAYLOAD: u16 = 1007;
    /// Too many frames before a connect, or too many failed connects.
    pub const POLICY_VIOLATION: u16 = 1008;
    pub const MESSAGE_TOO_BIG: u16 = 1009;
    pub const INTERNAL: u16 = 1011;
    pub const HEARTBEAT_TIMEOUT: u16 = 4000;
    pub const AUTH_TIMEOUT: u16 = 4001;
    pub const KEY_REVOKED: u16 = 4003;
    pub const SLOW_CONSUMER: u16 = 4008;
    pub const RESYNC_REQUIRED: u16 = 4010;
    /// The app's installation is not active (suspended, uninstalled, never
    /// installed; ADR 0023 §12).
    pub const APP_INACTIVE: u16 = 4012;
    /// The app's installation lacks `events:subscribe`.
    pub const SCOPE_MISSING: u16 = 4018;
}

/// A request to end the connection, read by the connection's loop.
#[derive(Debug, Clone)]
pub struct CloseRequest {
    pub code: u16,
    pub reason: String,
}

type PendingMap = HashMap<u64, oneshot::Sender<CallOutcome>>;

struct Inner {
    queue: mpsc::Sender<String>,
    capacity: usize,
    /// Woken by the connection loop each time it takes frames off the queue.
    drained: tokio::sync::Notify,
    /// `None` once the connection ended: nothing may register after that.
    pending: Mutex<Option<PendingMap>>,
    next_id: AtomicU64,
    id_prefix: &'static str,
    close: CancellationToken,
    close_request: OnceLock<CloseRequest>,
}

#[derive(Clone)]
pub struct Peer {
    inner: Arc<Inner>,
}

/// Removes the pending entry whatever happens to the waiting future.
struct PendingGuard<'a> {
    inner: &'a Inner,
    n: u64,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if let Some(map) = self.inner.pending.lock().expect("pending lock").as_mut() {
            map.remove(&self.n);
        }
    }
}

impl Peer {
    /// A peer whose outgoing request ids are `"{id_prefix}{n}"`; the prefix
    /// keeps this side's ids apart from the other side's. Returns the handle and
    /// the queue the connection loop drains onto the socket.
    pub fn new(id_prefix: &'static str, queue_capacity: usize) -> (Peer, mpsc::Receiver<String>) {
        let (tx, rx) = mpsc::channel(queue_capacity.max(1));
        let peer = Peer {
            inner: Arc::new(Inner {
                queue: tx,
                capacity: queue_capacity.max(1),
                drained: tokio::sync::Notify::new(),
                pending: Mutex::new(Some(HashMap::new())),
                next_id: AtomicU64::new(1),
                id_prefix,
                close: CancellationToken::new(),
                close_request: OnceLock::new(),
            }),
        };
        (peer, rx)
    }

    /// Calls a method on the other side and waits at most `timeout`.
    pub async fn call(&self, method: &str, params: &Value, timeout: Duration) -> CallOutcome {
        let n = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let id = Id::Str(format!("{}{n}", self.inner.id_prefix));
        let (tx, rx) = oneshot::channel();
        {
            let mut guard = self.inner.pending.lock().expect("pending lock");
            match guard.as_mut() {
                Some(map) => {
                    map.insert(n, tx);
                }
                None => return CallOutcome::Disconnected,
            }
        }
        let _entry = PendingGuard {
            inner: &self.inner,
            n,
        };
        if self.send(frame::request(&id, method, params)).is_err() {
            return CallOutcome::Disconnected;
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_)) => CallOutcome::Disconnected,
            Err(_) => CallOutcome::Timeout,
        }
    }

    /// Hands an answer to the call waiting for it. Returns false when no call
    /// waits for this id (unknown, already answered, timed out or cancelled);
    /// the caller reports that, it is never an error of the connection.
    pub fn complete(&self, id: &Id, outcome: CallOutcome) -> bool {
        let Some(n) = self.own_id(id) else {
            return false;
        };
        let sender = self
            .inner
            .pending
            .lock()
            .expect("pending lock")
            .as_mut()
            .and_then(|map| map.remove(&n));
        match sender {
            Some(tx) => tx.send(outcome).is_ok(),
            None => false,
        }
    }

    fn own_id(&self, id: &Id) -> Option<u64> {
        match id {
            Id::Str(s) => s.strip_prefix(self.inner.id_prefix)?.parse().ok(),
            Id::Number(_) => None,
        }
    }

    /// Number of calls waiting for an answer.
    pub fn pending_calls(&self) -> usize {
        self.inner
            .pending
            .lock()
            .expect("pending lock")
            .as_ref()
            .map_or(0, |m| m.len())
    }

    /// Queues a frame without waiting. A full queue closes the connection as a
    /// slow consumer: the hub never blocks on one socket, and a client that fell
    /// behind recovers by reconnecting and resuming.
    pub fn send(&self, text: String) -> Result<(), SendError> {
        if self.inner.close.is_cancelled() {
            return Err(SendError::Closed);
        }
        match self.inner.queue.try_send(text) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Closed(_)) => Err(SendError::Closed),
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.close(
                    close_code::SLOW_CONSUMER,
                    "slow consumer: outbound queue full",
                );
                Err(SendError::SlowConsumer)
            }
        }
    }

    /// Queues a frame of a bulk stream (an event replay), waiting while the
    /// queue is more than three quarters full. The last quarter stays free
    /// for answers and live frames, so a replay never trips the slow-consumer
    /// policy; a slow reader just slows the replay down.
    pub async fn send_bulk(&self, text: String) -> Result<(), SendError> {
        let reserve = (self.inner.capacity / 4).max(1);
        loop {
            if self.inner.close.is_cancelled() {
                return Err(SendError::Closed);
            }
            let drained = self.inner.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if self.inner.queue.capacity() > reserve {
                return self.send(text);
            }
            tokio::select! {
                _ = drained => {}
                _ = self.inner.close.cancelled() => return Err(SendError::Closed),
            }
        }
    }

    /// Queues a frame that may be lost (an ephemeral event): dropped, not
    /// queued, when the queue is more than three quarters full. Returns
    /// whether it was queued.
    pub fn send_droppable(&self, text: String) -> bool {
        let reserve = (self.inner.capacity / 4).max(1);
        self.inner.queue.capacity() > reserve && self.send(text).is_ok()
    }

    /// Called by the connection loop after it took frames off the queue.
    pub fn frames_drained(&self) {
        self.inner.drained.notify_waiters();
    }

    pub fn notify<P: serde::Serialize>(&self, method: &str, params: &P) -> Result<(), SendError> {
        self.send(frame::notification(method, params))
    }

    /// Asks the connection loop to close with this code. The first request wins.
    pub fn close(&self, code: u16, reason: &str) {
        let _ = self.inner.close_request.set(CloseRequest {
            code,
            reason: reason.to_string(),
        });
        self.inner.close.cancel();
    }

    pub fn close_requested(&self) -> Option<&CloseRequest> {
        self.inner.close_request.get()
    }

    /// Resolves when someone asked the connection to close.
    pub fn closing(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.inner.close.cancelled()
    }

    pub fn is_closed(&self) -> bool {
        self.inner.close.is_cancelled()
    }

    /// Called by the connection loop when the socket is gone: every pending call
    /// fails now as disconnected, and no new call can register.
    pub fn shutdown(&self) {
        self.inner.close.cancel();
        let drained = self.inner.pending.lock().expect("pending lock").take();
        for (_, tx) in drained.into_iter().flatten() {
            let _ = tx.send(CallOutcome::Disconnected);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn answer_completes_the_call_and_removes_the_entry() {
        let (peer, mut rx) = Peer::new("hub-", 8);
        let p = peer.clone();
        let call = tokio::spawn(async move {
            p.call("app/network/ping", &json!({}), Duration::from_secs(5))
                .await
        });
        let sent = rx.recv().await.unwrap();
        let v: Value = serde_json::from_str(&sent).unwrap();
        let id = Id::Str(v["id"].as_str().unwrap().to_string());
        assert!(peer.complete(&id, CallOutcome::Ok(json!({"x": 1}))));
        assert_eq!(call.await.unwrap(), CallOutcome::Ok(json!({"x": 1})));
        assert_eq!(peer.pending_calls(), 0);
        // A second answer to the same id is late: reported, not a panic.
        assert!(!peer.complete(&id, CallOutcome::Ok(json!({}))));
    }

    #[tokio::test]
    async fn timeout_and_cancellation_remove_the_entry() {
        let (peer, _rx) = Peer::new("hub-", 8);
        let out = peer.call("x", &json!({}), Duration::from_millis(10)).await;
        assert_eq!(out, CallOutcome::Timeout);
        assert_eq!(peer.pending_calls(), 0);

        let p = peer.clone();
        let task =
            tokio::spawn(async move { p.call("x", &json!({}), Duration::from_secs(60)).await });
        while peer.pending_calls() == 0 {
            tokio::task::yield_now().await;
        }
        task.abort();
        let _ = task.await;
        assert_eq!(peer.pending_calls(), 0);
    }

    #[tokio::test]
    async fn shutdown_fails_pending_calls_at_once() {
        let (peer, _rx) = Peer::new("hub-", 8);
        let p = peer.clone();
        let task =
            tokio::spawn(async move { p.call("x", &json!({}), Duration::from_secs(600)).await });
        while peer.pending_calls() == 0 {
            tokio::task::yield_now().await;
        }
        peer.shutdown();
        assert_eq!(task.await.unwrap(), CallOutcome::Disconnected);
        assert_eq!(
            peer.call("x", &json!({}), Duration::from_secs(600)).await,
            CallOutcome::Disconnected
        );
    }

    #[tokio::test]
    async fn full_queue_fails_the_call_and_closes_as_slow_consumer() {
        let (peer, _rx) = Peer::new("hub-", 1);
        peer.send("filler".into()).unwrap();
        let out = peer.call("x", &json!({}), Duration::from_secs(600)).await;
        assert_eq!(out, CallOutcome::Disconnected);
        assert_eq!(peer.pending_calls(), 0);
        assert_eq!(
            peer.close_requested().unwrap().code,
            close_code::SLOW_CONSUMER
        );
    }

    #[test]
    fn foreign_ids_are_not_ours() {
        let (peer, _rx) = Peer::new("hub-", 1);
        assert!(!peer.complete(&Id::Str("sdk-1".into()), CallOutcome::Timeout));
        assert!(!peer.complete(&Id::Str("hub-x".into()), CallOutcome::Timeout));
        assert!(!peer.complete(&Id::Number(1.into()), CallOutcome::Timeout));
    }
}
