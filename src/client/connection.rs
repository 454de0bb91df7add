//! The SDK's side of a socket: the same peer machinery as the hub, driven by
//! a tokio-tungstenite loop.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message;

use super::deadlines::Deadlines;
use super::{ClientError, Handler, DEFAULT_CALL_TIMEOUT};
use crate::protocol::Method;
use crate::rpc::frame::{self, Incoming};
use crate::rpc::{CallOutcome, ErrorKind, Peer, RpcError};

/// A notification the hub sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    pub method: String,
    pub params: Value,
}

/// How the socket ended, when it has.
#[derive(Debug, Clone, PartialEq)]
pub struct CloseInfo {
    /// The close code the hub sent, if it sent a close frame.
    pub code: Option<u16>,
    pub reason: String,
}

pub struct Connection {
    peer: Peer,
    notifications: Mutex<Option<mpsc::UnboundedReceiver<Notification>>>,
    closed: watch::Receiver<Option<CloseInfo>>,
    call_timeout: Duration,
    /// Set once the app's manifest is read; a hub call arriving before
    /// waits for it, its clock already running.
    deadlines: watch::Sender<Option<Arc<Deadlines>>>,
    late_answers: Arc<AtomicU64>,
}

/// What a hub request's handler task needs besides the request.
#[derive(Clone)]
struct Answering {
    peer: Peer,
    handlers: Arc<HashMap<String, Handler>>,
    deadlines: watch::Receiver<Option<Arc<Deadlines>>>,
    late_answers: Arc<AtomicU64>,
}

impl Connection {
    pub async fn open(
        url: &str,
        handlers: HashMap<String, Handler>,
    ) -> Result<Connection, ClientError> {
        // disable_nagle: requests and answers are small frames.
        let (ws, _) = tokio_tungstenite::connect_async_with_config(url, None, true)
            .await
            .map_err(|e| ClientError::Transport(e.to_string()))?;
        let (peer, queue) = Peer::new("sdk-", 4096);
        let (notify_tx, notify_rx) = mpsc::unbounded_channel();
        let (closed_tx, closed_rx) = watch::channel(None);
        let (deadlines, deadlines_rx) = watch::channel(None);
        let late_answers = Arc::new(AtomicU64::new(0));
        let answering = Answering {
            peer: peer.clone(),
            handlers: Arc::new(handlers),
            deadlines: deadlines_rx,
            late_answers: late_answers.clone(),
        };
        tokio::spawn(run(ws, queue, answering, notify_tx, closed_tx));
        Ok(Connection {
            peer,
            notifications: Mutex::new(Some(notify_rx)),
            closed: closed_rx,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            deadlines,
            late_answers,
        })
    }

    /// From here on each hub request's handler is cancelled at its
    /// deadline, and its answer, if late, is not sent.
    pub(crate) fn set_deadlines(&self, deadlines: Deadlines) {
        self.deadlines.send_replace(Some(Arc::new(deadlines)));
    }

    /// Hub requests whose handler missed the deadline: no answer was sent.
    pub fn late_answers(&self) -> u64 {
        self.late_answers.load(Ordering::Relaxed)
    }

    pub fn set_call_timeout(&mut self, timeout: Duration) {
        self.call_timeout = timeout;
    }

    /// The stream of notifications; can be taken once.
    pub fn notifications(&self) -> Option<mpsc::UnboundedReceiver<Notification>> {
        self.notifications
            .lock()
            .expect("notifications lock")
            .take()
    }

    pub async fn call<M: Method>(&self, params: M::Params) -> Result<M::Result, ClientError> {
        let params =
            serde_json::to_value(params).map_err(|e| ClientError::Transport(e.to_string()))?;
        let value = self.call_value(M::NAME, params).await?;
        serde_json::from_value(value).map_err(|e| ClientError::BadResult(e.to_string()))
    }

    /// An untyped call, for methods outside this SDK's catalogue version.
    pub async fn call_value(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        match self.peer.call(method, &params, self.call_timeout).await {
            CallOutcome::Ok(v) => Ok(v),
            CallOutcome::RemoteError(e) => Err(ClientError::Rpc(e)),
            CallOutcome::Timeout => Err(ClientError::Timeout),
            CallOutcome::Disconnected => Err(ClientError::Disconnected),
            CallOutcome::BadResult(r) => Err(ClientError::BadResult(r)),
        }
    }

    /// Waits until the socket is closed and says how.
    pub async fn closed(&self) -> CloseInfo {
        let mut rx = self.closed.clone();
        loop {
            if let Some(info) = rx.borrow().clone() {
                return info;
            }
            if rx.changed().await.is_err() {
                return rx.borrow().clone().unwrap_or(CloseInfo {
                    code: None,
                    reason: String::new(),
                });
            }
        }
    }

    /// Closes the socket normally.
    pub fn close(&self) {
        self.peer
            .close(crate::rpc::close_code::NORMAL, "client closing");
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.peer
            .close(crate::rpc::close_code::NORMAL, "client closing");
    }
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn run(
    ws: Ws,
    mut queue: mpsc::Receiver<String>,
    answering: Answering,
    notifications: mpsc::UnboundedSender<Notification>,
    closed: watch::Sender<Option<CloseInfo>>,
) {
    let peer = answering.peer.clone();
    let (mut sink, mut stream) = ws.split();
    let mut close_info = CloseInfo {
        code: None,
        reason: String::new(),
    };
    loop {
        tokio::select! {
            biased;
            _ = peer.closing() => {
                let request = peer.close_requested().cloned();
                let frame = request.map(|c| tokio_tungstenite::tungstenite::protocol::CloseFrame {
                    code: c.code.into(),
                    reason: c.reason.into(),
                });
                let _ = sink.send(Message::Close(frame)).await;
                break;
            }
            out = queue.recv() => {
                let Some(text) = out else { break };
                if sink.send(Message::Text(text.into())).await.is_err() {
                    break;
                }
                peer.frames_drained();
            }
            msg = stream.next() => {
                match msg {
                    Some(Ok(Message::Text(text))) => {
                        on_text(text.as_str(), &answering, &notifications);
                    }
                    Some(Ok(Message::Close(frame))) => {
                        if let Some(f) = frame {
                            close_info = CloseInfo { code: Some(f.code.into()), reason: f.reason.to_string() };
                        }
                        break;
                    }
                    Some(Ok(_)) => {}
                    Some(Err(_)) | None => break,
                }
            }
        }
    }
    peer.shutdown();
    let _ = closed.send(Some(close_info));
}

fn on_text(text: &str, answering: &Answering, notifications: &mpsc::UnboundedSender<Notification>) {
    let peer = &answering.peer;
    match frame::parse(text) {
        Incoming::Response { id, outcome } => {
            let outcome = match outcome {
                Ok(v) => CallOutcome::Ok(v),
                Err(e) => CallOutcome::RemoteError(e),
            };
            if !peer.complete(&id, outcome) {
                tracing::warn!(%id, "response matches no pending call");
            }
        }
        Incoming::MalformedResponse { id, reason } => {
            if let Some(id) = id {
                peer.complete(&id, CallOutcome::BadResult(reason));
            }
        }
        Incoming::Notification { method, params } => {
            let _ = notifications.send(Notification {
                method,
                params: params.unwrap_or(Value::Null),
            });
        }
        Incoming::Request { id, method, params } => {
            let Some(handler) = answering.handlers.get(&method).cloned() else {
                let err = RpcError::new(
                    ErrorKind::MethodNotFound,
                    format!("Method not found: {method}"),
                );
                let _ = peer.send(frame::error(Some(&id), &err));
                return;
            };
            let received_at = tokio::time::Instant::now();
            tokio::spawn(answer(
                answering.clone(),
                handler,
                id,
                method,
                params,
                received_at,
            ));
        }
        Incoming::Invalid { error, .. } => {
            tracing::warn!(%error, "the hub sent an invalid frame");
        }
    }
}

/// Runs one hub request's handler until its deadline and answers if in time.
async fn answer(
    mut answering: Answering,
    handler: Handler,
    id: frame::Id,
    method: String,
    params: Option<Value>,
    received_at: tokio::time::Instant,
) {
    let deadline = match answering.deadlines.wait_for(Option::is_some).await {
        Ok(known) => {
            let deadlines = known.as_ref().expect("waited for Some").clone();
            received_at + deadlines.of_call(&method, params.as_ref())
        }
        // The connection ended before the manifest was read.
        Err(_) => received_at,
    };
    let params = params.unwrap_or(Value::Object(Default::default()));
    let result = match tokio::time::timeout_at(deadline, handler(params)).await {
        Ok(result) if tokio::time::Instant::now() < deadline => result,
        _ => {
            answering.late_answers.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%method, "a handler missed its deadline: no answer sent");
            return;
        }
    };
    let text = match result {
        Ok(v) => frame::result(&id, &v),
        Err(e) => frame::error(Some(&id), &e),
    };
    let _ = answering.peer.send(text);
}
