//! The console's live view over server-sent events: the snapshot, a
//! change as it happens, an action's effect seen live, the end of the
//! stream with its session.

use std::time::Duration;

use reqwest::header::COOKIE;
use serde_json::{json, Value};

use super::{action, console_hub, login, logout, Login};
use crate::support::hub::TestHub;
use crate::support::RawSocket;

/// An open `GET /console/api/stream`, read event by event.
pub struct Events {
    response: reqwest::Response,
    buffer: String,
}

impl Events {
    pub async fn open(hub: &TestHub, login: &Login) -> Events {
        let response = hub
            .http
            .get(format!("{}/console/api/stream", hub.base))
            .header(COOKIE, login.cookie_header())
            .send()
            .await
            .expect("stream");
        assert_eq!(response.status().as_u16(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Events {
            response,
            buffer: String::new(),
        }
    }

    /// The next event's name and data; `None` when the stream ended.
    pub async fn next(&mut self) -> Option<(String, Value)> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let (mut name, mut data) = (String::from("message"), String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event: ") {
                        name = v.to_string();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data.push_str(v);
                    }
                }
                if data.is_empty() {
                    continue; // a keep-alive comment
                }
                return Some((name, serde_json::from_str(&data).expect("json data")));
            }
            let chunk = tokio::time::timeout(Duration::from_secs(30), self.response.chunk())
                .await
                .expect("an event within 30 s")
                .expect("read the stream")?;
            self.buffer
                .push_str(std::str::from_utf8(&chunk).expect("utf-8"));
        }
    }

    /// Reads until a `changes` event whose `section` satisfies `until`.
    pub async fn until(&mut self, section: &str, until: impl Fn(&Value) -> bool) -> Value {
        loop {
            let (name, data) = self.next().await.expect("the stream is open");
            assert!(name == "changes" || name == "snapshot", "{name}: {data}");
            if let Some(value) = data.get(section).filter(|v| until(v)) {
                return value.clone();
            }
        }
    }
}

fn rows_of(connections: &Value) -> Vec<Value> {
    connections["rows"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn the_stream_shows_a_snapshot_then_each_change_and_ends_with_its_session() {
    let hub = console_hub().await;
    let l = login(&hub).await;
    let mut events = Events::open(&hub, &l).await;
    let (name, snapshot) = events.next().await.unwrap();
    assert_eq!(name, "snapshot");
    for section in [
        "hub",
        "connections",
        "apps",
        "tasks",
        "leases",
        "denials",
        "backlog",
        "names",
    ] {
        assert!(snapshot.get(section).is_some(), "{section}: {snapshot}");
    }
    assert_eq!(snapshot["connections"]["total"], json!(0));
    assert_eq!(snapshot["hub"]["pollIntervalMs"], json!(100));

    // An agent connects: the change names it, by kind and node.
    let (agent, key) = hub.register_agent("console-watched").await;
    let mut socket = RawSocket::connect_agent(&hub.ws_url(), &key).await;
    let connections = events
        .until("connections", |c| {
            rows_of(c).iter().any(|r| r["principalId"] == json!(agent))
        })
        .await;
    assert_eq!(connections["byKind"]["agent"], json!(1), "{connections}");
    let row = &rows_of(&connections)[0];
    assert_eq!(row["kind"], json!("agent"));
    // The node is the hub's node id, the one /readyz names.
    let readyz = hub.readyz().await.1;
    let node = readyz
        .lines()
        .find_map(|l| l.strip_prefix("node: "))
        .expect("/readyz names the node");
    assert_eq!(row["node"], json!(node), "{readyz}");
    assert_eq!(snapshot["hub"]["node"], json!(node));
    assert!(row["connectedAt"].as_str().is_some());

    // Revoking its keys from the console closes its socket, seen live.
    let (status, body) = action(
        &hub,
        &l,
        &format!("/agents/{agent}/keys/revoke"),
        Some(&l.csrf),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["revoked"], json!(1));
    let closed = socket.closed().await.expect("a close frame");
    assert_eq!(closed.0, 4003);
    events
        .until("connections", |c| c["total"] == json!(0))
        .await;

    // A logout ends the stream with its reason.
    let out = logout(&hub, &l).await;
    assert_eq!(out.status().as_u16(), 204);
    loop {
        let (name, data) = events.next().await.expect("the ended event");
        if name == "ended" {
            assert_eq!(data, json!({ "reason": "logged_out" }));
            break;
        }
    }
    assert!(events.next().await.is_none(), "the stream ends after it");
}

#[tokio::test]
async fn the_stream_needs_a_session() {
    let hub = console_hub().await;
    let r = hub
        .http
        .get(format!("{}/console/api/stream", hub.base))
        .header(COOKIE, "sb_console=forged")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
}

#[tokio::test]
async fn an_unused_session_ends_its_stream_as_idle() {
    let hub = TestHub::start_with(
        TestHub::fast_options()
            .env("SWITCHBOARD_CONSOLE__POLL_INTERVAL_MS", 100)
            .env("SWITCHBOARD_CONSOLE__SESSION_IDLE_SECS", 1),
    )
    .await;
    let l = login(&hub).await;
    let mut events = Events::open(&hub, &l).await;
    let (name, _) = events.next().await.unwrap();
    assert_eq!(name, "snapshot");
    // The stream's own updates do not count as use: it ends by itself.
    loop {
        let (name, data) = events.next().await.expect("the ended event");
        if name == "ended" {
            assert_eq!(data, json!({ "reason": "idle" }));
            break;
        }
    }
    assert!(events.next().await.is_none());
    let (status, body) = action(&hub, &l, "/agents/x/keys/revoke", Some(&l.csrf)).await;
    assert_eq!(status, 401, "an idle session is gone: {body}");
}

#[tokio::test]
async fn live_views_past_console_max_streams_are_refused_until_one_closes() {
    let hub = TestHub::start_with(
        TestHub::fast_options()
            .env("SWITCHBOARD_CONSOLE__POLL_INTERVAL_MS", 100)
            .env("SWITCHBOARD_CONSOLE__MAX_STREAMS", 1),
    )
    .await;
    let login = login(&hub).await;
    let open = || {
        hub.http
            .get(format!("{}/console/api/stream", hub.base))
            .header(COOKIE, login.cookie_header())
            .send()
    };
    let first = open().await.unwrap();
    assert_eq!(first.status().as_u16(), 200);
    assert_eq!(first.headers()["x-accel-buffering"], "no");
    let refused = open().await.unwrap();
    assert_eq!(refused.status().as_u16(), 429);
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "console_streams_full", "{body}");
    // The hub gives the place back once it notices the client went away.
    drop(first);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let again = open().await.unwrap();
        if again.status().as_u16() == 200 {
            break;
        }
        assert_eq!(again.status().as_u16(), 429);
        assert!(
            std::time::Instant::now() < deadline,
            "the closed stream's place never came back"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
