//! Connection hygiene, limits, shutdown and the operator endpoints.

use std::time::Duration;

use serde_json::json;
use switchboard::client::AgentClient;

use crate::support::hub::Options;
use crate::support::{werewolf_manifest, RawSocket, TestHub};

#[tokio::test]
async fn a_socket_that_never_authenticates_is_closed_at_the_deadline() {
    let hub =
        TestHub::start_with(Options::default().env("SWITCHBOARD_GATEWAY__AUTH_TIMEOUT_MS", 300))
            .await;
    let mut s = RawSocket::connect(&hub.ws_url()).await;
    let (code, reason) = s.closed().await.expect("a close frame");
    assert_eq!(code, 4001);
    assert_eq!(reason, "authentication timeout");
}

#[tokio::test]
async fn a_silent_peer_is_closed_by_the_heartbeat() {
    let hub = TestHub::start_with(
        Options::default()
            .env("SWITCHBOARD_GATEWAY__HEARTBEAT_INTERVAL_MS", 100)
            .env("SWITCHBOARD_GATEWAY__HEARTBEAT_TIMEOUT_MS", 400),
    )
    .await;
    let (_, key) = hub.register_agent("sleepy").await;
    let mut s = RawSocket::connect_agent(&hub.ws_url(), &key).await;
    // Not reading means not answering pings. Wait for the hub to count the
    // disconnect, then read: the socket was closed with 4000.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while hub
        .metric("switchboard_disconnects_total", "heartbeat_timeout")
        .await
        < 1.0
    {
        assert!(
            std::time::Instant::now() < deadline,
            "heartbeat never fired"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The hub's close frame (4000) may be lost: the client's queued pongs hit
    // the closed socket first. Either way the socket is over.
    let closed = s.closed().await;
    assert!(matches!(closed, None | Some((4000, _))), "{closed:?}");

    // A peer that reads (and so answers pings) stays connected past the timeout.
    let client = AgentClient::connect(&hub.base, &key).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    client
        .call::<switchboard::protocol::network::AgentIdentityGet>(Default::default())
        .await
        .expect("still connected");
}

#[tokio::test]
async fn calls_beyond_the_rate_limit_are_refused_with_a_retry_hint() {
    let hub = TestHub::start_with(
        Options::default()
            .env("SWITCHBOARD_RATELIMIT__DEFAULT__PER_SECOND", 1)
            .env("SWITCHBOARD_RATELIMIT__DEFAULT__BURST", 3),
    )
    .await;
    let (_, key) = hub.register_agent("chatty").await;
    let mut s = RawSocket::connect_agent(&hub.ws_url(), &key).await;
    let mut limited = 0;
    let mut ok = 0;
    for i in 0..10 {
        let f = s.call(json!(i), "agent/identity/get", json!({})).await;
        if f["error"]["_tag"] == json!("RateLimitedError") {
            assert!(f["error"]["data"]["retryAfterMs"].as_u64().is_some());
            limited += 1;
        } else {
            assert!(f["result"].is_object(), "{f}");
            ok += 1;
        }
    }
    // 3 burst plus at most a few refills while the loop ran.
    assert!(ok >= 3 && limited >= 1, "ok={ok} limited={limited}");
}

#[tokio::test]
async fn sigterm_drains_and_closes_sockets_with_going_away() {
    let mut hub = TestHub::start().await;
    let (_, key) = hub.register_agent("leaver").await;
    let client = AgentClient::connect(&hub.base, &key).await.unwrap();
    hub.signal(libc::SIGTERM);
    let closed = tokio::time::timeout(Duration::from_secs(30), client.connection.closed())
        .await
        .expect("closed within the grace period");
    assert_eq!(closed.code, Some(1001), "{closed:?}");
    let status = hub.wait_exit(Duration::from_secs(30)).await;
    assert!(status.success(), "{status:?}\n{}", hub.log());
}

#[tokio::test]
async fn health_readiness_and_metrics_answer() {
    let hub = TestHub::start().await;
    let (_, key) = hub.register_agent("metered").await;
    let (_, app_key) = hub.register_app(&werewolf_manifest()).await;
    let _agent = AgentClient::connect(&hub.base, &key).await.unwrap();
    for path in ["/healthz", "/readyz"] {
        let r = hub
            .http
            .get(format!("{}{path}", hub.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{path}");
    }
    let _ = hub.metric("", "").await;
    assert_eq!(
        hub.metric("switchboard_connections", "kind=\"agent\"")
            .await,
        1.0
    );
    assert!(
        hub.metric("switchboard_rpc_calls_total", "agent/network/connect")
            .await
            >= 1.0
    );
    assert!(
        hub.metric(
            "switchboard_rpc_call_duration_seconds_count",
            "agent/network/connect"
        )
        .await
            >= 1.0
    );
    let text = hub
        .http
        .get(format!("{}/metrics", hub.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!text.contains(&key) && !text.contains(&app_key));
    let r = hub
        .http
        .get(format!("{}/nope", hub.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let log = hub.log();
    assert!(
        log.contains("agent registered"),
        "operators can read what happened"
    );
    assert!(
        !log.contains(&key) && !log.contains(&app_key),
        "keys never reach the log"
    );
}

#[tokio::test]
async fn rest_errors_outside_handlers_are_json_too() {
    let hub = TestHub::start_with(
        Options::default().env("SWITCHBOARD_SERVER__MAX_HTTP_BODY_BYTES", 1024),
    )
    .await;
    let r = hub
        .http
        .post(format!("{}/api/v1/agents/register", hub.base))
        .body(format!("{{\"name\": \"{}\"}}", "x".repeat(4096)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 413);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], json!("payload_too_large"));
    let r = hub
        .http
        .get(format!("{}/api/v1/agents/register", hub.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 405);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], json!("method_not_allowed"));
}

#[tokio::test]
async fn shutdown_waits_for_the_hubs_own_calls_to_an_app() {
    let mut hub = TestHub::start().await;
    let (app_id, key) = hub.register_app(&crate::support::werewolf_manifest()).await;
    let mut app = RawSocket::connect_app(&hub.ws_url(), &key).await;
    let base = hub.base.clone();
    let http = hub.http.clone();
    let ping = tokio::spawn(async move {
        http.post(format!("{base}/api/v1/apps/{app_id}/ping?timeoutMs=20000"))
            .bearer_auth(crate::support::hub::ADMIN_TOKEN)
            .send()
            .await
            .unwrap()
            .json::<serde_json::Value>()
            .await
            .unwrap()
    });
    let request = app.recv().await;
    hub.signal(libc::SIGTERM);
    // The hub is draining; the app answers its call and then sees 1001.
    app.send_json(&json!({"jsonrpc":"2.0","id": request["id"],"result":{"nonce": request["params"]["nonce"]}}))
        .await;
    assert_eq!(ping.await.unwrap()["outcome"], json!("ok"));
    assert_eq!(app.closed().await.map(|c| c.0), Some(1001));
    assert!(hub.wait_exit(Duration::from_secs(30)).await.success());
}

#[tokio::test]
async fn requests_beyond_the_in_flight_limit_are_refused_and_the_socket_lives_on() {
    let hub = TestHub::start_with(
        Options::default().env("SWITCHBOARD_GATEWAY__MAX_IN_FLIGHT_REQUESTS", 1),
    )
    .await;
    let mut manifest = werewolf_manifest();
    manifest["hooks"]["task_create"] = json!({"kind": "hook", "timeoutMs": 20000});
    let (app_id, app_key) = hub.register_app(&manifest).await;
    let (_, agent_key) = hub.register_agent("busy").await;
    let mut app = RawSocket::connect_app(&hub.ws_url(), &app_key).await;
    let mut agent = RawSocket::connect_agent(&hub.ws_url(), &agent_key).await;
    // The first request waits on the app's hook and holds the only slot.
    agent
        .send_json(&json!({"jsonrpc":"2.0","id":1,"method":"agent/task/request","params":{"appId": app_id, "invitedAgentIds": []}}))
        .await;
    let hook = app.recv_request().await;
    assert_eq!(hook["method"], json!("app/task/create"));
    let refused = agent.call(json!(2), "agent/identity/get", json!({})).await;
    assert_eq!(refused["error"]["_tag"], json!("RateLimitedError"));
    assert!(refused["error"]["message"]
        .as_str()
        .unwrap()
        .contains("gateway.max_in_flight_requests"));
    app.send_json(
        &json!({"jsonrpc":"2.0","id": hook["id"],"result":{"verdict":{"decision":"Accept"}}}),
    )
    .await;
    let answer = loop {
        let f = agent.recv().await;
        if f["id"] == json!(1) {
            break f;
        }
    };
    assert_eq!(answer["result"]["task"]["state"], json!("active"));
    // The slot is free again.
    let f = agent.call(json!(3), "agent/identity/get", json!({})).await;
    assert_eq!(f["result"]["name"], json!("busy"));
}

/// `switchboard_events_written_total{type}` counts every event written to
/// the log, whoever wrote it: conversations, messages, tasks and leases.
#[tokio::test]
async fn every_event_written_to_the_log_is_counted_by_type() {
    use switchboard::domain::message::Part;
    use switchboard::protocol::conversations::{AgentMessageSend, MessageSendParams};
    use switchboard::protocol::tasks::{
        AgentDispatchRequest, AgentTaskRequest, DispatchRequestParams, TaskRequestParams,
    };

    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let mut manifest = werewolf_manifest();
    manifest["hooks"] = json!({
        "task_create": {"kind": "accept"},
        "message_authorize": {"kind": "forwardAllExceptSender"},
        "dispatch_authorize": {"kind": "grant"}
    });
    let (app_id, app_key) = hub.register_app(&manifest).await;
    let (a_id, a_key) = hub.register_agent("a").await;
    let (b_id, b_key) = hub.register_agent("b").await;
    let a = AgentClient::connect(&hub.base, &a_key).await.unwrap();
    let b = AgentClient::connect(&hub.base, &b_key).await.unwrap();
    let mut b_events = b.connection.notifications().unwrap();

    let direct = crate::support::agents::direct(&a, b_id.parse().unwrap()).await;
    crate::support::agents::send(&a, direct, "hello").await;
    let task = a
        .call::<AgentTaskRequest>(TaskRequestParams {
            app_id: app_id.parse().unwrap(),
            invited_agent_ids: vec![b_id.parse().unwrap()],
            initial_conversation: None,
        })
        .await
        .unwrap();
    let town = task.conversations[0].id;
    let sent = a
        .call::<AgentMessageSend>(MessageSendParams {
            conversation_id: town,
            parts: vec![Part::Text {
                text: "to the town".into(),
            }],
            client_msg_id: None,
            reply_to: None,
            thread_id: None,
            components: None,
            card_use: None,
        })
        .await
        .unwrap();
    b.call::<AgentDispatchRequest>(DispatchRequestParams {
        conversation_id: town,
        message_id: sent.message.id,
    })
    .await
    .unwrap();
    crate::support::agents::next_of(&mut b_events, "agent/dispatch/released").await;

    let mut written = 0.0;
    for key in [&a_key, &b_key, &app_key] {
        let page: serde_json::Value = hub
            .http
            .get(format!("{}/api/v1/events?after=0&limit=1", hub.base))
            .bearer_auth(key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        written += page["latestSeq"].as_f64().unwrap();
    }
    assert!(written >= 9.0, "{written} events in the logs");
    let metric = "switchboard_events_written_total";
    assert_eq!(hub.metric(metric, "").await, written, "a={a_id}");
    for kind in [
        "agent/conversation/created",
        "agent/message/received",
        "agent/task/accepted",
        "agent/task/invited",
        "app/task/activated",
        "agent/dispatch/released",
    ] {
        assert!(
            hub.metric(metric, &format!("type=\"{kind}\"")).await >= 1.0,
            "{kind} is counted"
        );
    }
}
