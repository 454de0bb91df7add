//! What a hostile HTTP client tries: holding connections open, slow heads
//! and bodies, cross-site form posts, ambiguous JSON, borrowed idempotency
//! keys. Each test fails on a hub without the matching defence.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::support::{RawSocket, TestHub};

fn hub_addr(hub: &TestHub) -> SocketAddr {
    hub.base
        .trim_start_matches("http://")
        .parse()
        .expect("hub address")
}

/// A TCP connection from another loopback address (all of 127/8 is local).
async fn connect_from(source: Ipv4Addr, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(SocketAddr::new(source.into(), 0))
        .expect("bind source");
    socket.connect(to).await.expect("connect")
}

/// Whether the hub closed the connection within `within` (anything it sent
/// first is read and dropped).
async fn closed_by_hub(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 1024];
    tokio::time::timeout(within, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    })
    .await
    .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_idle_connections_do_not_starve_real_clients() {
    let hub = TestHub::start_with(crate::support::hub::Options {
        nofile: Some(256),
        ..TestHub::fast_options()
            .env("SWITCHBOARD_SERVER__MAX_CONNECTIONS", 120)
            .env("SWITCHBOARD_SERVER__MAX_CONNECTIONS_PER_ADDRESS", 24)
            .env("SWITCHBOARD_SERVER__HEADER_READ_TIMEOUT_MS", 2_000)
            .env("SWITCHBOARD_SERVER__BODY_READ_TIMEOUT_MS", 2_000)
    })
    .await;
    let (_, key) = hub.register_agent("real").await;
    let addr = hub_addr(&hub);

    // 320 attacking connections from four addresses: idle, half a request
    // head, or a body that stops after 2 of 100 bytes. More than the hub's
    // descriptor limit allows.
    let mut held = Vec::new();
    for a in 0..4u8 {
        let source = Ipv4Addr::new(127, 0, 0, 2 + a);
        for i in 0..80 {
            let mut s = connect_from(source, addr).await;
            let sent = match i % 3 {
                0 => Ok(()),
                1 => s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await,
                _ => {
                    s.write_all(
                        b"POST /api/v1/agents/register HTTP/1.1\r\nHost: x\r\n\
                          Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"",
                    )
                    .await
                }
            };
            // The hub may already have refused this one.
            let _ = sent;
            held.push(s);
        }
    }
    assert!(held.len() >= 300);

    // Real clients are served within a second each, while all that is held.
    let started = Instant::now();
    let fresh = reqwest::Client::new();
    let health = tokio::time::timeout(
        Duration::from_secs(1),
        fresh.get(format!("{}/healthz", hub.base)).send(),
    )
    .await
    .expect("healthz within a second under attack")
    .expect("healthz");
    assert_eq!(health.status().as_u16(), 200);
    let mut ws = tokio::time::timeout(
        Duration::from_secs(1),
        RawSocket::connect_agent(&hub.ws_url(), &key),
    )
    .await
    .expect("a WebSocket connect within a second under attack");
    assert!(started.elapsed() < Duration::from_secs(2));

    // The hub lets go of every attacking connection: refused ones at once,
    // slow and idle ones at their timeouts.
    for s in held.iter_mut() {
        assert!(
            closed_by_hub(s, Duration::from_secs(15)).await,
            "a slow connection was still open"
        );
    }
    // The established WebSocket is unaffected.
    let r = ws
        .call(json!(2), "agent/network/connect", json!({"agentKey": key}))
        .await;
    assert!(r.get("error").is_some(), "already connected: {r}");
    let log = hub.log();
    assert!(!log.contains("Too many open files"), "{log}");
}
