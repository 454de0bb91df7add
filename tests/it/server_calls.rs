//! The hub calling an app: every outcome, within the deadline, never a hang.

use std::time::{Duration, Instant};

use serde_json::json;
use switchboard::client::AppClient;
use switchboard::protocol::network::{AppPing, PingResult};
use switchboard::rpc::RpcError;

use crate::support::{werewolf_manifest, RawSocket, TestHub};

/// Registers an app and connects a bare socket as it (a fake app).
async fn fake_app(hub: &TestHub) -> (String, RawSocket) {
    let (app_id, key) = hub.register_app(&werewolf_manifest()).await;
    let s = RawSocket::connect_app(&hub.ws_url(), &key).await;
    (app_id, s)
}

/// Answers a ping request correctly.
async fn answer_ping(app: &mut RawSocket, request: &serde_json::Value) {
    app.send_json(&json!({"jsonrpc":"2.0","id": request["id"],"result":{"nonce": request["params"]["nonce"]}}))
        .await;
}

/// Starts a ping in the background and returns it with the request the app got.
async fn ping_and_receive(
    hub: &TestHub,
    app: &mut RawSocket,
    app_id: &str,
    timeout_ms: u64,
) -> (
    tokio::task::JoinHandle<serde_json::Value>,
    serde_json::Value,
) {
    let base = hub.base.clone();
    let app_id = app_id.to_string();
    let http = hub.http.clone();
    let task = tokio::spawn(async move {
        http.post(format!(
            "{base}/api/v1/apps/{app_id}/ping?timeoutMs={timeout_ms}"
        ))
        .bearer_auth(crate::support::hub::ADMIN_TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
    });
    let request = app.recv().await;
    assert_eq!(request["method"], json!("app/network/ping"));
    assert_eq!(request["jsonrpc"], json!("2.0"));
    assert!(request.get("type").is_none() && request.get("direction").is_none());
    (task, request)
}

#[tokio::test]
async fn the_hub_calls_the_app_and_receives_its_answer() {
    let hub = TestHub::start().await;
    let (app_id, key) = hub.register_app(&werewolf_manifest()).await;
    let _app = AppClient::builder(&hub.base, &key)
        .handle::<AppPing, _, _>(|p| async move { Ok(PingResult { nonce: p.nonce }) })
        .connect()
        .await
        .unwrap();
    let r = hub.ping_app(&app_id, 5_000).await;
    assert_eq!(r["outcome"], json!("ok"), "{r}");
    assert!(r["roundTripMs"].as_f64().unwrap() >= 0.0);
    assert_eq!(
        hub.metric("switchboard_server_calls_total", "outcome=\"ok\"")
            .await,
        1.0
    );
}

#[tokio::test]
async fn an_app_answering_late_times_out_and_the_late_answer_is_counted() {
    let hub = TestHub::start().await;
    let (app_id, mut app) = fake_app(&hub).await;
    let (task, request) = ping_and_receive(&hub, &mut app, &app_id, 200).await;
    // Answer only after the hub has given up.
    let r = task.await.unwrap();
    assert_eq!(r["outcome"], json!("timeout"));
    answer_ping(&mut app, &request).await;
    // The connection survives and the next call works.
    let (task, request) = ping_and_receive(&hub, &mut app, &app_id, 5_000).await;
    answer_ping(&mut app, &request).await;
    assert_eq!(task.await.unwrap()["outcome"], json!("ok"));
    assert_eq!(
        hub.metric("switchboard_unmatched_responses_total", "")
            .await,
        1.0
    );
}

#[tokio::test]
async fn an_answer_to_an_unknown_id_is_counted_and_ignored() {
    let hub = TestHub::start().await;
    let (app_id, mut app) = fake_app(&hub).await;
    let (task, request) = ping_and_receive(&hub, &mut app, &app_id, 5_000).await;
    app.send_json(&json!({"jsonrpc":"2.0","id":"hub-999999","result":{"nonce":"x"}}))
        .await;
    app.send_json(&json!({"jsonrpc":"2.0","id": 12,"result":{}}))
        .await;
    answer_ping(&mut app, &request).await;
    assert_eq!(task.await.unwrap()["outcome"], json!("ok"));
    assert_eq!(
        hub.metric("switchboard_unmatched_responses_total", "")
            .await,
        2.0
    );
}

#[tokio::test]
async fn garbage_answers_are_bad_results_and_errors_are_remote_errors() {
    let hub = TestHub::start().await;
    let (app_id, mut app) = fake_app(&hub).await;

    let (task, request) = ping_and_receive(&hub, &mut app, &app_id, 5_000).await;
    app.send_json(&json!({"jsonrpc":"2.0","id": request["id"],"result":{"nonce": 42}}))
        .await;
    assert_eq!(task.await.unwrap()["outcome"], json!("bad_result"));

    let (task, request) = ping_and_receive(&hub, &mut app, &app_id, 5_000).await;
    app.send_json(&json!({"jsonrpc":"2.0","id": request["id"],"result":{"nonce": "wrong"}}))
        .await;
    assert_eq!(task.await.unwrap()["outcome"], json!("bad_result"));

    let (task, request) = ping_and_receive(&hub, &mut app, &app_id, 5_000).await;
    app.send_json(&json!({"jsonrpc":"2.0","id": request["id"],"result":{},"error":{"code":1,"message":"both"}}))
        .await;
    assert_eq!(task.await.unwrap()["outcome"], json!("bad_result"));

    let (task, request) = ping_and_receive(&hub, &mut app, &app_id, 5_000).await;
    let err = RpcError {
        code: -32000,
        message: "not today".into(),
        tag: None,
        data: None,
    };
    app.send_json(&json!({"jsonrpc":"2.0","id": request["id"],"error": err}))
        .await;
    let r = task.await.unwrap();
    assert_eq!(r["outcome"], json!("remote_error"));
    assert_eq!(r["error"]["message"], json!("not today"));

    // Non-JSON text while a call waits: the app gets a parse error back, the
    // call still ends at its deadline, and the socket survives.
    let (task, _) = ping_and_receive(&hub, &mut app, &app_id, 300).await;
    app.send_text("}}garbage{{").await;
    let f = app.recv().await;
    assert_eq!(f["error"]["code"], json!(-32700));
    assert_eq!(task.await.unwrap()["outcome"], json!("timeout"));
    let (task, request) = ping_and_receive(&hub, &mut app, &app_id, 5_000).await;
    answer_ping(&mut app, &request).await;
    assert_eq!(task.await.unwrap()["outcome"], json!("ok"));
}

#[tokio::test]
async fn an_app_disconnecting_mid_call_fails_the_call_at_once() {
    let hub = TestHub::start().await;
    let (app_id, mut app) = fake_app(&hub).await;
    let timeout_ms = 60_000;
    let started = Instant::now();
    let (task, _) = ping_and_receive(&hub, &mut app, &app_id, timeout_ms).await;
    drop(app);
    let r = tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .expect("not at the timeout")
        .unwrap();
    assert_eq!(r["outcome"], json!("disconnected"));
    assert!(started.elapsed() < Duration::from_millis(timeout_ms));

    // With no socket at all the app is unavailable.
    let r = hub.ping_app(&app_id, 1_000).await;
    assert_eq!(r["outcome"], json!("unavailable"));
}

#[tokio::test]
async fn callbacks_go_to_the_newest_app_socket() {
    let hub = TestHub::start().await;
    let (app_id, key) = hub.register_app(&werewolf_manifest()).await;
    let mut old = RawSocket::connect_app(&hub.ws_url(), &key).await;
    let mut new = RawSocket::connect_app(&hub.ws_url(), &key).await;
    let (task, request) = ping_and_receive(&hub, &mut new, &app_id, 5_000).await;
    answer_ping(&mut new, &request).await;
    assert_eq!(task.await.unwrap()["outcome"], json!("ok"));
    drop(new);
    // Once the newest socket is gone, the older one takes the callbacks. The
    // hub may still pick the closing socket for a moment; retry until it moved.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let base = hub.base.clone();
        let http = hub.http.clone();
        let id = app_id.clone();
        let mut task = tokio::spawn(async move {
            http.post(format!("{base}/api/v1/apps/{id}/ping?timeoutMs=5000"))
                .bearer_auth(crate::support::hub::ADMIN_TOKEN)
                .send()
                .await
                .unwrap()
                .json::<serde_json::Value>()
                .await
                .unwrap()
        });
        let outcome = tokio::select! {
            done = &mut task => done.unwrap(),
            request = old.recv() => {
                answer_ping(&mut old, &request).await;
                task.await.unwrap()
            }
        };
        if outcome["outcome"] == json!("ok") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "callbacks never moved to the remaining socket"
        );
    }
}

#[tokio::test]
async fn the_admin_api_needs_the_operator_token_and_hides_non_apps() {
    let hub = TestHub::start().await;
    let (agent_id, _) = hub.register_agent("not-an-app").await;
    let r = hub
        .http
        .post(format!("{}/api/v1/apps/{agent_id}/ping", hub.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    for id in [
        agent_id.as_str(),
        "00000000-0000-4000-8000-000000000000",
        "not-a-uuid",
    ] {
        let r = hub
            .http
            .post(format!("{}/api/v1/apps/{id}/ping", hub.base))
            .bearer_auth(crate::support::hub::ADMIN_TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 404);
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["error"]["message"], json!("no such app"));
    }
}

#[tokio::test]
async fn a_ping_answer_with_an_unknown_member_is_a_bad_result() {
    let hub = TestHub::start().await;
    let (app_id, mut app) = fake_app(&hub).await;
    let (task, request) = ping_and_receive(&hub, &mut app, &app_id, 5_000).await;
    app.send_json(&json!({"jsonrpc":"2.0","id": request["id"],
        "result":{"nonce": request["params"]["nonce"], "extra": true}}))
        .await;
    assert_eq!(task.await.unwrap()["outcome"], json!("bad_result"));
}

#[tokio::test]
async fn a_ping_answer_with_a_duplicate_member_is_a_bad_result() {
    let hub = TestHub::start().await;
    let (app_id, mut app) = fake_app(&hub).await;
    let (task, request) = ping_and_receive(&hub, &mut app, &app_id, 5_000).await;
    let id = request["id"].as_str().unwrap();
    let nonce = request["params"]["nonce"].as_str().unwrap();
    app.send_text(format!(
        r#"{{"jsonrpc":"2.0","id":"{id}","result":{{"nonce":"{nonce}","nonce":"{nonce}"}}}}"#
    ))
    .await;
    assert_eq!(task.await.unwrap()["outcome"], json!("bad_result"));
}
