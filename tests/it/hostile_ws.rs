//! What a hostile WebSocket client tries: broken frames, floods before and
//! after connecting, key guessing, reused request ids (broken WebSocket
//! frames are rows of `bad_input::frames`). Each test fails on a
//! hub without the matching defence.

use std::net::Ipv4Addr;

use serde_json::{json, Value};

use crate::support::{RawSocket, TestHub};

fn warn_lines(log: &str, containing: &str) -> usize {
    log.lines()
        .filter(|l| l.contains("WARN") && l.contains(containing))
        .count()
}

#[tokio::test]
async fn an_unauthenticated_socket_cannot_flood_the_log() {
    let hub = TestHub::start().await;
    let mut s = RawSocket::connect(&hub.ws_url()).await;
    let mut sent = 0;
    for i in 0..10_000 {
        let frame = json!({"jsonrpc": "2.0", "id": 1_000_000 + i, "result": {}});
        if !s.try_send_text(frame.to_string()).await {
            break;
        }
        sent += 1;
    }
    let closed = s.closed().await;
    assert_eq!(
        closed.as_ref().map(|c| c.0),
        Some(1008),
        "{closed:?} after {sent} frames"
    );
    // The hub still serves others.
    let (_, key) = hub.register_agent("after-flood").await;
    RawSocket::connect_agent(&hub.ws_url(), &key).await;
    let log = hub.log();
    assert!(warn_lines(&log, "") < 10, "{}", warn_lines(&log, ""));
}

#[tokio::test]
async fn unmatched_answers_on_a_connected_socket_are_not_logged_one_by_one() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let (_, key) = hub.register_agent("noisy").await;
    let mut s = RawSocket::connect_agent(&hub.ws_url(), &key).await;
    for i in 0..10_000 {
        s.send_json(&json!({"jsonrpc": "2.0", "id": 5_000_000 + i, "result": {}}))
            .await;
    }
    // Frames are read in order: once this is answered all were handled.
    let r = s
        .call(
            json!("after"),
            "agent/network/connect",
            json!({"agentKey": key}),
        )
        .await;
    assert!(r.get("error").is_some(), "{r}");
    let log = hub.log();
    let warned = warn_lines(&log, "no pending call");
    assert!(
        warned <= 20,
        "{warned} warnings for 10000 unmatched answers"
    );
    assert_eq!(
        hub.metric("switchboard_unmatched_responses_total", "")
            .await,
        10_000.0,
        "every one is still counted"
    );
}

fn code_tag(answer: &Value) -> &str {
    answer["error"]["data"]["_tag"]
        .as_str()
        .or(answer["error"]["_tag"].as_str())
        .unwrap_or("")
}

#[tokio::test]
async fn failed_connects_close_the_socket_and_are_throttled_per_address() {
    let hub = slow_refill_hub().await;
    let (_, key) = hub.register_agent("legit").await;
    let wrong = json!({"agentKey": "sbk_agent_0000000000000000_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"});

    // Ten wrong keys pipelined on one socket: three answers, then closed.
    let mut s = RawSocket::connect(&hub.ws_url()).await;
    for i in 0..10 {
        let frame =
            json!({"jsonrpc": "2.0", "id": i, "method": "agent/network/connect", "params": wrong});
        // The hub may close the socket while these are still being written.
        if !s.try_send_text(frame.to_string()).await {
            break;
        }
    }
    let mut answers = 0;
    let close = loop {
        match s.next_event().await {
            crate::support::RawEvent::Text(v) => {
                assert!(v.get("error").is_some(), "{v}");
                answers += 1;
            }
            crate::support::RawEvent::Close(c) => break c,
            crate::support::RawEvent::Ended => break None,
        }
    };
    assert_eq!(
        (answers, close.map(|c| c.0)),
        (3, Some(1008)),
        "answers, close code"
    );

    // From the same address, more failures on new sockets run into the
    // per-address throttle: refused without a key lookup.
    let mut failures = 3;
    let throttled = 'outer: loop {
        let mut s = RawSocket::connect(&hub.ws_url()).await;
        for i in 0..3 {
            let r = s
                .call(json!(i), "agent/network/connect", wrong.clone())
                .await;
            if r["error"]["code"] == json!(-32029) {
                break 'outer r;
            }
            failures += 1;
            assert!(failures <= 20, "never throttled: {r}");
        }
    };
    assert_eq!(failures, 20, "{throttled}");
    assert!(throttled["error"]["data"]["retryAfterMs"].as_u64().unwrap() > 0);
    assert!(code_tag(&throttled).contains("RateLimited"), "{throttled}");

    // Another address is not affected.
    let mut other = RawSocket::connect_from(&hub.ws_url(), Ipv4Addr::new(127, 0, 0, 9)).await;
    let r = other
        .call(json!(1), "agent/network/connect", json!({"agentKey": key}))
        .await;
    assert!(r.get("result").is_some(), "{r}");
}

/// The next answer with this id (notifications are skipped).
async fn answer_to(s: &mut RawSocket, id: u64) -> Value {
    loop {
        let frame = s.recv().await;
        if frame["id"] == json!(id) && frame.get("method").is_none() {
            return frame;
        }
    }
}

#[tokio::test]
async fn a_second_request_with_an_id_in_flight_is_refused() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let manifest = json!({
        "name": "Slow", "description": "Decides task creation slowly",
        "limits": { "maxParticipants": 4 },
        "conversations": [{ "key": "all", "name": "Everyone", "participantFilter": "all" }],
        "hooks": {
            "task_create": { "kind": "hook", "timeoutMs": 10000 },
            "message_authorize": { "kind": "forwardAllExceptSender" },
            "dispatch_authorize": { "kind": "grant" }
        }
    });
    let (app_id, app_key) = hub.register_app(&manifest).await;
    let (_, agent_key) = hub.register_agent("asker").await;
    let (invited_id, _) = hub.register_agent("invited").await;
    let mut app = RawSocket::connect_app(&hub.ws_url(), &app_key).await;
    let mut agent = RawSocket::connect_agent(&hub.ws_url(), &agent_key).await;
    let request = json!({"jsonrpc": "2.0", "id": 7, "method": "agent/task/request",
        "params": {"appId": app_id, "invitedAgentIds": [invited_id]}});
    agent.send_json(&request).await;
    // The first is in flight once the app is asked.
    let hook = app.recv_request().await;
    assert_eq!(hook["method"], json!("app/task/create"));
    agent.send_json(&request).await;
    let refused = answer_to(&mut agent, 7).await;
    assert_eq!(refused["id"], json!(7), "{refused}");
    assert_eq!(refused["error"]["code"], json!(-32600), "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("id 7 is already in flight"),
        "{refused}"
    );
    // The first one still completes, once.
    app.send_json(
        &json!({"jsonrpc": "2.0", "id": hook["id"], "result": {"verdict": {"decision": "Accept"}}}),
    )
    .await;
    let answer = answer_to(&mut agent, 7).await;
    assert_eq!(answer["id"], json!(7));
    assert!(answer.get("result").is_some(), "{answer}");
    // The id is free again.
    let again = agent.call(json!(7), "agent/task/list", json!({})).await;
    assert!(again.get("result").is_some(), "{again}");
}

/// A WebSocket handshake that sends `Origin: origin`, as a browser would.
async fn handshake_with_origin(
    hub: &TestHub,
    origin: &str,
) -> Result<(), tokio_tungstenite::tungstenite::Error> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = hub.ws_url().into_client_request().unwrap();
    request
        .headers_mut()
        .insert("origin", origin.parse().unwrap());
    tokio_tungstenite::connect_async(request).await.map(|_| ())
}

#[tokio::test]
async fn a_ws_upgrade_with_an_origin_not_allowed_is_refused() {
    let hub = TestHub::start_with(crate::support::hub::Options::default().env(
        "SWITCHBOARD_GATEWAY__ALLOWED_ORIGINS",
        r#"["https://console.example"]"#,
    ))
    .await;
    match handshake_with_origin(&hub, "https://evil.example").await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status().as_u16(), 403);
            let body: Value =
                serde_json::from_slice(response.body().as_deref().unwrap_or_default()).unwrap();
            assert_eq!(body["error"]["code"], json!("origin_not_allowed"), "{body}");
            assert!(
                body["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("gateway.allowed_origins"),
                "{body}"
            );
        }
        other => panic!("a foreign origin was not refused: {other:?}"),
    }
    // The listed origin is served, and so is a client that sends none.
    handshake_with_origin(&hub, "https://console.example")
        .await
        .expect("the allowed origin");
    let (_, key) = hub.register_agent("no-origin").await;
    RawSocket::connect_agent(&hub.ws_url(), &key).await;
}

#[tokio::test]
async fn clients_connected_before_the_budget_ran_out_keep_reconnecting() {
    let hub = slow_refill_hub().await;
    let (_, known) = hub.register_agent("connected-before").await;
    let (_, unseen) = hub.register_agent("never-connected").await;
    drop(RawSocket::connect_agent(&hub.ws_url(), &known).await);

    let wrong = json!({"agentKey": "sbk_agent_0000000000000000_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"});
    let mut spent = 0;
    while spent < 20 {
        let mut s = RawSocket::connect(&hub.ws_url()).await;
        for i in 0..3 {
            let r = s
                .call(json!(i), "agent/network/connect", wrong.clone())
                .await;
            assert_eq!(r["error"]["code"], json!(-32001), "{r}");
            spent += 1;
            if spent == 20 {
                break;
            }
        }
    }
    let mut s = RawSocket::connect(&hub.ws_url()).await;
    let r = s
        .call(
            json!(1),
            "agent/network/connect",
            json!({"agentKey": unseen}),
        )
        .await;
    assert_eq!(r["error"]["code"], json!(-32029), "spent: {r}");
    // The key accepted from this address before is still looked up.
    let mut s = RawSocket::connect(&hub.ws_url()).await;
    let r = s
        .call(
            json!(1),
            "agent/network/connect",
            json!({"agentKey": known}),
        )
        .await;
    assert!(r.get("result").is_some(), "{r}");
    let r = hub
        .http
        .get(format!("{}/api/v1/events", hub.base))
        .bearer_auth(&known)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "over REST too");
}

#[tokio::test]
async fn a_large_frame_before_a_connect_closes_the_socket_with_1009() {
    let hub = TestHub::start().await;
    let mut s = RawSocket::connect(&hub.ws_url()).await;
    // Well within gateway.max_frame_bytes, beyond the 16 KiB before a connect.
    let padding = "x".repeat(20 * 1024);
    let frame = json!({"jsonrpc": "2.0", "id": 1, "method": "agent/network/connect",
        "params": {"agentKey": padding}});
    s.send_text(frame.to_string()).await;
    let close = s.closed().await;
    assert_eq!(close.map(|c| c.0), Some(1009), "close code");

    // A connected socket may send frames of that size.
    let (_, key) = hub.register_agent("big-frames").await;
    let mut s = RawSocket::connect_agent(&hub.ws_url(), &key).await;
    let r = s
        .call(
            json!(2),
            "agent/conversation/list",
            json!({"padding": "x".repeat(20 * 1024)}),
        )
        .await;
    assert_eq!(r["id"], json!(2), "answered, not closed: {r}");
}

#[tokio::test]
async fn string_ids_longer_than_256_bytes_are_refused() {
    let hub = TestHub::start().await;
    let (_, key) = hub.register_agent("long-ids").await;
    let mut s = RawSocket::connect_agent(&hub.ws_url(), &key).await;
    let long = "i".repeat(257);
    s.send_json(
        &json!({"jsonrpc": "2.0", "id": long, "method": "agent/conversation/list", "params": {}}),
    )
    .await;
    let r = loop {
        let frame = s.recv().await;
        if frame.get("method").is_none() {
            break frame;
        }
    };
    assert_eq!(r["id"], Value::Null, "the long id is not echoed: {r}");
    assert_eq!(r["error"]["code"], json!(-32600), "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("256 bytes"),
        "{r}"
    );
    // Nor on a frame refused for another reason (no method here).
    s.send_json(&json!({"jsonrpc": "2.0", "id": long, "params": {}}))
        .await;
    let r = loop {
        let frame = s.recv().await;
        if frame.get("method").is_none() {
            break frame;
        }
    };
    assert_eq!(r["id"], Value::Null, "the long id is not echoed: {r}");
    assert_eq!(r["error"]["code"], json!(-32600), "{r}");
    // 256 bytes is fine.
    let r = s
        .call(json!("i".repeat(256)), "agent/conversation/list", json!({}))
        .await;
    assert!(r.get("result").is_some(), "{r}");
}

#[tokio::test]
async fn many_good_keys_connect_at_once_from_one_address_beyond_the_budget() {
    // Two failures to spend: thirty concurrent checks hold more than that.
    let hub = TestHub::start_with(
        crate::support::hub::Options::default()
            .env("SWITCHBOARD_GATEWAY__FAILED_CONNECTS_PER_ADDRESS", 2),
    )
    .await;
    let mut keys = Vec::new();
    for i in 0..30 {
        keys.push(hub.register_agent(&format!("crowd-{i}")).await.1);
    }
    let url = hub.ws_url();
    let connects = keys.into_iter().map(|key| {
        let url = url.clone();
        tokio::spawn(async move {
            let mut s = RawSocket::connect(&url).await;
            s.call(json!(1), "agent/network/connect", json!({"agentKey": key}))
                .await
        })
    });
    for answer in futures_util::future::join_all(connects).await {
        let answer = answer.unwrap();
        assert!(answer.get("result").is_some(), "{answer}");
    }
}

/// A hub whose refused-key budget gets one failure back a minute: none
/// comes back while a test runs.
async fn slow_refill_hub() -> TestHub {
    TestHub::start_with(
        crate::support::hub::Options::default()
            .env("SWITCHBOARD_GATEWAY__FAILED_CONNECTS_REFILL_PER_MINUTE", 1),
    )
    .await
}
