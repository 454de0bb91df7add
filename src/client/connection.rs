//! The SDK's side of a socket: the same peer machinery as the hub, driven by
//! a tokio-tungstenite loop.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message;

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
        tokio::spawn(run(
            ws,
            queue,
            peer.clone(),
            Arc::new(handlers),
            notify_tx,
            closed_tx,
        ));
        Ok(Connection {
            peer,
            notifications: Mutex::new(Some(notify_rx)),
            closed: closed_rx,
            call_timeout: DEFAULT_CALL_TIMEOUT,
        })
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
    peer: Peer,
    handlers: Arc<HashMap<String, Handler>>,
    notifications: mpsc::UnboundedSender<Notification>,
    closed: watch::Sender<Option<CloseInfo>>,
) {
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
                        on_text(text.as_str(), &peer, &handlers, &notifications);
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

fn on_text(
    text: &str,
    peer: &Peer,
    handlers: &Arc<HashMap<String, Handler>>,
    notifications: &mpsc::UnboundedSender<Notification>,
) {
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
            let Some(handler) = handlers.get(&method).cloned() else {
                let err = RpcError::new(
                    ErrorKind::MethodNotFound,
                    format!("Method not found: {method}"),
                );
                let _ = peer.send(frame::error(Some(&id), &err));
                return;
            };
            let peer = peer.clone();
            tokio::spawn(async move {
                let result = handler(params.unwrap_or(Value::Object(Default::default()))).await;
                let text = match result {
                    Ok(v) => frame::result(&id, &v),
                    Err(e) => frame::error(Some(&id), &e),
                };
                let _ = peer.send(text);
            });
        }
        Incoming::Invalid { error, .. } => {
            tracing::warn!(%error, "the hub sent an invalid frame");
        }
    }
}
