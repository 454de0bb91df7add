//! A bare WebSocket client for exact frames: what a fake app or a broken
//! client would send.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub struct RawSocket {
    ws: Ws,
}

#[derive(Debug)]
pub enum RawEvent {
    Text(Value),
    Close(Option<(u16, String)>),
    Ended,
}

pub const DEADLINE: Duration = Duration::from_secs(20);

impl RawSocket {
    pub async fn connect(url: &str) -> RawSocket {
        let (ws, _) = tokio_tungstenite::connect_async(url)
            .await
            .expect("ws connect");
        RawSocket { ws }
    }

    pub async fn send_text(&mut self, text: impl Into<String>) {
        self.ws
            .send(Message::Text(text.into().into()))
            .await
            .expect("send");
    }

    pub async fn send_json(&mut self, value: &Value) {
        self.send_text(value.to_string()).await;
    }

    /// The next event, waiting at most `DEADLINE`.
    pub async fn next_event(&mut self) -> RawEvent {
        loop {
            let msg = tokio::time::timeout(DEADLINE, self.ws.next())
                .await
                .expect("no frame within the deadline");
            match msg {
                Some(Ok(Message::Text(t))) => {
                    return RawEvent::Text(serde_json::from_str(t.as_str()).expect("hub sent JSON"))
                }
                Some(Ok(Message::Close(f))) => {
                    return RawEvent::Close(f.map(|f| (f.code.into(), f.reason.to_string())))
                }
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => return RawEvent::Ended,
            }
        }
    }

    pub async fn recv(&mut self) -> Value {
        match self.next_event().await {
            RawEvent::Text(v) => v,
            other => panic!("expected a frame, got {other:?}"),
        }
    }

    /// The next request the hub sends (notifications are skipped).
    pub async fn recv_request(&mut self) -> Value {
        loop {
            let frame = self.recv().await;
            if frame.get("id").is_some() && frame.get("method").is_some() {
                return frame;
            }
        }
    }

    /// Sends a request and returns the response with the same id.
    pub async fn call(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send_json(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let frame = self.recv().await;
            if frame.get("id") == Some(&id)
                && (frame.get("result").is_some() || frame.get("error").is_some())
            {
                return frame;
            }
        }
    }

    /// Waits for the close frame (or the end of the socket).
    pub async fn closed(&mut self) -> Option<(u16, String)> {
        loop {
            match self.next_event().await {
                RawEvent::Text(_) => continue,
                RawEvent::Close(c) => return c,
                RawEvent::Ended => return None,
            }
        }
    }

    pub async fn connect_agent(url: &str, key: &str) -> RawSocket {
        let mut s = RawSocket::connect(url).await;
        let r = s
            .call(
                json!("c"),
                "agent/network/connect",
                json!({"agentKey": key}),
            )
            .await;
        assert!(r.get("result").is_some(), "{r}");
        s
    }

    pub async fn connect_app(url: &str, key: &str) -> RawSocket {
        let mut s = RawSocket::connect(url).await;
        let r = s
            .call(json!("c"), "app/network/connect", json!({"appKey": key}))
            .await;
        assert!(r.get("result").is_some(), "{r}");
        s
    }
}
