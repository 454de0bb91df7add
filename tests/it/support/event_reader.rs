//! Reading a principal's stored events as raw envelopes, over a WebSocket
//! (connect, resume, then everything that arrives) and over REST catch-up.

use serde_json::{json, Value};

use super::raw::RawEvent;
use super::{RawSocket, TestHub};

/// A socket with the stored events it has received so far, in arrival
/// order (ephemeral events and answers are not kept).
pub struct EventReader {
    pub socket: RawSocket,
    pub events: Vec<Value>,
}

impl EventReader {
    /// Connects as the agent (resuming after `resume`'s seq in its sync
    /// epoch when given) and returns the connect answer; events that arrive
    /// before it are kept.
    pub async fn connect(
        hub: &TestHub,
        key: &str,
        resume: Option<(u64, &str)>,
    ) -> (EventReader, Value) {
        Self::connect_url(&hub.ws_url(), key, resume).await
    }

    /// As [`Self::connect`], to the gateway at `url` (for a task that
    /// holds no [`TestHub`]).
    pub async fn connect_url(
        url: &str,
        key: &str,
        resume: Option<(u64, &str)>,
    ) -> (EventReader, Value) {
        let mut socket = RawSocket::connect(url).await;
        let mut params = json!({ "agentKey": key });
        if let Some((after, epoch)) = resume {
            params["resume"] = json!({ "after": after, "syncEpoch": epoch });
        }
        socket
            .send_json(&json!({"jsonrpc": "2.0", "id": "c", "method": "agent/network/connect", "params": params}))
            .await;
        let mut reader = EventReader {
            socket,
            events: Vec::new(),
        };
        loop {
            let frame = reader.socket.recv().await;
            if frame["id"] == json!("c") {
                return (reader, frame);
            }
            reader.keep(frame);
        }
    }

    fn keep(&mut self, frame: Value) {
        if frame.get("id").is_none() && frame["params"].get("seq").is_some() {
            self.events.push(frame["params"].clone());
        }
    }

    /// Reads until `n` stored events in all have arrived or the hub closed
    /// the socket: `None` when they arrived, else the close frame (`None`
    /// inside when the socket ended without one).
    pub async fn until_or_closed(&mut self, n: usize) -> Option<Option<(u16, String)>> {
        while self.events.len() < n {
            match self.socket.next_event().await {
                RawEvent::Text(frame) => self.keep(frame),
                RawEvent::Close(close) => return Some(close),
                RawEvent::Ended => return Some(None),
            }
        }
        None
    }

    /// Reads until `n` stored events in all have arrived (each frame within
    /// the socket's deadline).
    pub async fn until(&mut self, n: usize) -> &[Value] {
        while self.events.len() < n {
            let frame = self.socket.recv().await;
            self.keep(frame);
        }
        &self.events
    }
}

/// `GET /api/v1/events?<query>` with the key: the status and the body.
pub async fn rest_events(hub: &TestHub, key: &str, query: &str) -> (u16, Value) {
    let r = hub
        .http
        .get(format!("{}/api/v1/events?{query}", hub.base))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}
