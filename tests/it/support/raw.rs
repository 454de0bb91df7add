//! A bare WebSocket client for exact frames: what a fake app or a broken
//! client would send.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

pub type Ws =
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

    pub async fn send_binary(&mut self, bytes: Vec<u8>) {
        self.ws
            .send(Message::Binary(bytes.into()))
            .await
            .expect("send");
    }

    /// Stops reading: the socket is handed back to the caller as the bare
    /// stream, so a test can hold it open without reading a byte.
    pub fn into_inner(self) -> Ws {
        self.ws
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

    /// Sends a request and returns the response with the same id exactly as
    /// the hub wrote it (notifications and other frames are skipped).
    pub async fn call_text(&mut self, id: &str, method: &str, params: Value) -> String {
        self.send_json(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let msg = tokio::time::timeout(DEADLINE, self.ws.next())
                .await
                .expect("no frame within the deadline");
            let Some(Ok(Message::Text(t))) = msg else {
                match msg {
                    Some(Ok(_)) => continue,
                    other => panic!("the socket ended waiting for {method}: {other:?}"),
                }
            };
            let frame: Value = serde_json::from_str(t.as_str()).expect("hub sent JSON");
            if frame.get("id") == Some(&json!(id)) && frame.get("method").is_none() {
                return t.as_str().to_string();
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

    pub async fn connect_person(url: &str, key: &str) -> RawSocket {
        let mut s = RawSocket::connect(url).await;
        let r = s
            .call(
                json!("c"),
                "person/network/connect",
                json!({"personKey": key}),
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

impl RawSocket {
    /// A client socket from another loopback source address.
    pub async fn connect_from(url: &str, source: std::net::Ipv4Addr) -> RawSocket {
        let addr: std::net::SocketAddr = url
            .trim_start_matches("ws://")
            .split('/')
            .next()
            .expect("host")
            .parse()
            .expect("address");
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind(std::net::SocketAddr::new(source.into(), 0))
            .expect("bind");
        let tcp = socket.connect(addr).await.expect("connect");
        let (ws, _) = tokio_tungstenite::client_async(url, MaybeTls::Plain(tcp))
            .await
            .expect("ws handshake");
        RawSocket { ws }
    }

    /// Sends unless the hub has closed the socket.
    pub async fn try_send_text(&mut self, text: impl Into<String>) -> bool {
        self.ws
            .send(Message::Text(text.into().into()))
            .await
            .is_ok()
    }
}

use tokio_tungstenite::MaybeTlsStream as MaybeTls;

/// A WebSocket whose frames are written byte by byte, to send what no
/// well-behaved library would: unmasked frames, reserved bits and opcodes.
pub struct HandMadeSocket {
    tcp: tokio::net::TcpStream,
}

impl HandMadeSocket {
    pub async fn open(url: &str) -> HandMadeSocket {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let host = url.trim_start_matches("ws://").split('/').next().unwrap();
        let mut tcp = tokio::net::TcpStream::connect(host).await.expect("connect");
        let head = format!(
            "GET /ws HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        );
        tcp.write_all(head.as_bytes()).await.expect("handshake");
        let mut answer = Vec::new();
        while !answer.ends_with(b"\r\n\r\n") {
            let mut byte = [0u8; 1];
            let n = tokio::time::timeout(DEADLINE, tcp.read(&mut byte))
                .await
                .expect("handshake answer in time")
                .expect("read");
            assert_eq!(n, 1, "socket closed during the handshake");
            answer.push(byte[0]);
        }
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 101"), "{answer}");
        HandMadeSocket { tcp }
    }

    /// Writes one frame: `first` is FIN, RSV and opcode; a client frame is
    /// masked unless `masked` is false.
    pub async fn frame(&mut self, first: u8, masked: bool, payload: &[u8]) {
        use tokio::io::AsyncWriteExt;
        let mask_bit = if masked { 0x80 } else { 0 };
        let mut out = vec![first];
        match payload.len() {
            n if n < 126 => out.push(mask_bit | n as u8),
            n if n < 65536 => {
                out.push(mask_bit | 126);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                out.push(mask_bit | 127);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        let key = [0x11u8, 0x22, 0x33, 0x44];
        if masked {
            out.extend_from_slice(&key);
            out.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
        } else {
            out.extend_from_slice(payload);
        }
        let _ = self.tcp.write_all(&out).await;
    }

    /// The code of the hub's close frame (frames before it are skipped);
    /// `None` when the socket ends without one.
    pub async fn close_code(&mut self) -> Option<u16> {
        use tokio::io::AsyncReadExt;
        tokio::time::timeout(DEADLINE, async {
            loop {
                let mut head = [0u8; 2];
                self.tcp.read_exact(&mut head).await.ok()?;
                let len = match head[1] & 0x7f {
                    126 => {
                        let mut l = [0u8; 2];
                        self.tcp.read_exact(&mut l).await.ok()?;
                        u16::from_be_bytes(l) as usize
                    }
                    127 => {
                        let mut l = [0u8; 8];
                        self.tcp.read_exact(&mut l).await.ok()?;
                        u64::from_be_bytes(l) as usize
                    }
                    n => n as usize,
                };
                let mut payload = vec![0u8; len];
                self.tcp.read_exact(&mut payload).await.ok()?;
                if head[0] & 0x0f == 0x8 {
                    return (payload.len() >= 2)
                        .then(|| u16::from_be_bytes([payload[0], payload[1]]));
                }
            }
        })
        .await
        .expect("the hub neither closed nor ended the socket in time")
    }
}

/// Asks `method` about `hidden` and about a random id on `socket`: both
/// answers must be the error of kind `tag`, byte for byte once the ids
/// (and the JSON-RPC ids) are swapped (hidden equals missing, ADR 0020 §3).
pub async fn same_answer(
    socket: &mut RawSocket,
    method: &str,
    tag: &str,
    hidden: uuid::Uuid,
    params: impl Fn(uuid::Uuid) -> serde_json::Value,
) {
    let random = uuid::Uuid::new_v4();
    let seen = socket.call_text("hidden-1", method, params(hidden)).await;
    let unknown = socket.call_text("random-1", method, params(random)).await;
    let frame: serde_json::Value = serde_json::from_str(&unknown).unwrap();
    assert_eq!(
        frame["error"]["_tag"],
        serde_json::json!(tag),
        "{method}: {unknown}"
    );
    let swapped = seen
        .replace(&hidden.to_string(), &random.to_string())
        .replace("\"hidden-1\"", "\"random-1\"");
    assert_eq!(swapped, unknown, "{method}: a hidden id answered otherwise");
}
