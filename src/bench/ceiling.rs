//! The physical ceiling of the fan-out workload on this machine: the same
//! socket library and frame sizes, but no auth, no persistence and no
//! JSON-RPC routing. A frame from one socket is copied to every other.
//! Sent as fast as the socket takes them, or on the hub run's schedule
//! (`--fanout-rate`), so that latency below saturation has a floor to be
//! read against: what this machine's sockets and scheduler cost alone.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::routing::get;
use dashmap::DashMap;
use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use uuid::Uuid;

use super::report::Entry;
use super::scenarios::{padding, receive, stamp, summarize, Ws};

type Peers = Arc<DashMap<Uuid, mpsc::UnboundedSender<String>>>;

async fn serve_socket(socket: WebSocket, peers: Peers) {
    let id = Uuid::new_v4();
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    peers.insert(id, tx);
    let (mut sink, mut stream) = socket.split();
    let writer = tokio::spawn(async move {
        while let Some(text) = rx.recv().await {
            if sink.send(Message::Text(text.into())).await.is_err() {
                break;
            }
        }
    });
    while let Some(Ok(msg)) = stream.next().await {
        if let Message::Text(t) = msg {
            let text = t.to_string();
            for p in peers.iter() {
                if *p.key() != id {
                    let _ = p.value().send(text.clone());
                }
            }
        }
    }
    peers.remove(&id);
    writer.abort();
}

/// `rate`: messages a second on a schedule; 0: as fast as possible.
pub async fn fanout(n: usize, deliveries: usize, rate: u64) -> anyhow::Result<Entry> {
    let peers: Peers = Arc::new(DashMap::new());
    let registered = peers.clone();
    let app = axum::Router::new().route(
        "/ws",
        get(move |ws: WebSocketUpgrade| {
            let peers = peers.clone();
            async move { ws.on_upgrade(move |s| serve_socket(s, peers)) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("ws://{}/ws", listener.local_addr()?);
    // The same socket options as the hub.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp: &mut tokio::net::TcpStream| {
        let _ = tcp.set_nodelay(true);
    });
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let messages = (deliveries / n).max(1);
    let mut receivers = Vec::new();
    for _ in 0..n {
        let (ws, _) = tokio_tungstenite::connect_async_with_config(&url, None, true).await?;
        receivers.push(ws);
    }
    let (mut sender, _): (Ws, _) =
        tokio_tungstenite::connect_async_with_config(&url, None, true).await?;
    // Sockets join the broadcast set after their upgrade; wait for all.
    while registered.len() < n + 1 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut handles = Vec::new();
    for ws in receivers {
        handles.push(tokio::spawn(receive(ws, messages)));
    }
    let cpu0 = super::stats::own_cpu_seconds();
    let started = Instant::now();
    for i in 0..messages {
        if rate > 0 {
            let at = started + Duration::from_secs_f64(i as f64 / rate as f64);
            tokio::time::sleep_until(at.into()).await;
        }
        let text = format!("{} {}", stamp(), padding());
        sender
            .send(tokio_tungstenite::tungstenite::Message::Text(text.into()))
            .await?;
    }
    let mut entry = Entry::new("ceiling")
        .param("n", n)
        .param("messages", messages);
    if rate > 0 {
        entry = entry.param("offered_messages_per_second", rate);
    }
    summarize(&mut entry, handles, started, messages * n).await?;
    entry.result("cpu_seconds", super::stats::own_cpu_seconds() - cpu0);
    server.abort();
    Ok(entry)
}
