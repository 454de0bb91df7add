//! Deliveries pause with a suspended installation and resume with it; the
//! routes are the app's alone, and another app's subscription is a
//! missing one.

use reqwest::Method;
use serde_json::{json, Value};

use super::pause::{from, millis, Witness};
use super::{ids, World, CHANGED, SUBSCRIPTIONS};
use crate::installations::call;
use crate::support::receiver::Scripted;
use crate::support::{werewolf_manifest, TestHub};

#[tokio::test]
async fn suspend_pauses_deliveries_and_resume_resumes_them() {
    let mut w = World::new(TestHub::fast_options()).await;
    let sub = w.subscribed("/scripted", &[CHANGED]).await;
    let mut witness = Witness::new(&w).await;
    w.receiver.script(&[
        Scripted::Status(503, Some("1")),
        Scripted::Status(503, Some("1")),
    ]);
    let first = w.event().await;
    w.receiver.wait_on("/scripted", 1).await;
    // The retry is due a second after the 503 (its Retry-After): suspend
    // within it. A suspended app's key reads nothing, so read first.
    let log = w.attempts(&sub, 1).await;
    assert!(w.subscription(&sub).await.get("failingSince").is_some());
    w.operator("installation/suspend").await;
    let due = millis(&log[0]["nextAttemptAt"]);
    // Until another app's delivery is recorded past the retry's due time:
    // the worker claimed after it, and the suspended app's subscription
    // was not claimable.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while witness.round(&w).await <= due {
        assert!(tokio::time::Instant::now() < deadline, "the worker polls");
    }
    assert_eq!(
        w.receiver.received_on("/scripted").len(),
        1,
        "paused while suspended"
    );

    // The pause is not failing time: the resume clears it, and the next
    // failure starts it again.
    let resumed_at = chrono::Utc::now().timestamp_millis();
    w.operator("installation/resume").await;
    w.attempts(&sub, 2).await;
    let since = w.subscription(&sub).await["failingSince"].clone();
    assert!(millis(&since) >= resumed_at, "failing since {since}");

    let mut expected = vec![first.clone(), first.clone()];
    expected.extend(from(&w, &first).await);
    let got = w.receiver.wait_on("/scripted", expected.len()).await;
    assert_eq!(ids(&got), expected);
}

#[tokio::test]
async fn the_routes_are_the_apps_own_and_hide_other_apps_subscriptions() {
    let w = World::new(TestHub::fast_options()).await;
    let sub = w.subscribed("/ok", &[CHANGED]).await;
    let (_, agent_key) = w.hub.register_agent("not an app").await;
    let body = json!({"url": w.url("/ok"), "eventTypes": [CHANGED]});
    let (status, answer) = call(&w.hub, Method::POST, SUBSCRIPTIONS, &agent_key, Some(&body)).await;
    assert_eq!(status, 403, "{answer}");
    assert_eq!(answer["error"]["reason"], json!("subject_kind_not_allowed"));

    let (status, answer) = w
        .subscribe(json!({"url": "https://elsewhere.example.com/in", "eventTypes": ["app/nope"], "extra": 1}))
        .await;
    assert_eq!(status, 400, "{answer}");
    let pointers: Vec<&str> = answer["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["pointer"].as_str().unwrap())
        .collect();
    assert_eq!(pointers, vec!["/extra", "/url", "/eventTypes/0"]);

    let (_, other_key) = w.hub.register_app(&werewolf_manifest()).await;
    let missing = format!("{SUBSCRIPTIONS}/{}", uuid::Uuid::now_v7());
    let theirs = format!("{SUBSCRIPTIONS}/{sub}");
    for method in [Method::GET, Method::DELETE] {
        let a = call(&w.hub, method.clone(), &missing, &other_key, None).await;
        let b = call(&w.hub, method, &theirs, &other_key, None).await;
        assert_eq!(a, b, "another app's subscription answers as a missing one");
        assert_eq!(a.0, 404);
    }
    let (status, listed) = call(&w.hub, Method::GET, SUBSCRIPTIONS, &other_key, None).await;
    assert_eq!((status, listed), (200, json!({"subscriptions": []})));

    let (status, listed) = call(&w.hub, Method::GET, SUBSCRIPTIONS, &w.key, None).await;
    assert_eq!(status, 200);
    let mine: Vec<Value> = listed["subscriptions"].as_array().unwrap().clone();
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0]["id"], json!(sub));
    assert_eq!(mine[0]["hmac"], json!(false));
    assert_eq!(mine[0]["source"], json!("api"));

    let (status, _) = call(&w.hub, Method::DELETE, &theirs, &w.key, None).await;
    assert_eq!(status, 204);
    let (status, _) = call(&w.hub, Method::GET, &theirs, &w.key, None).await;
    assert_eq!(status, 404);

    // Without events:subscribe the app subscribes nothing.
    let none = json!({"scopes": []});
    let (status, _) = crate::installations::operator(
        &w.hub,
        Method::PUT,
        &w.app,
        "installation/scopes",
        Some(&none),
    )
    .await;
    assert_eq!(status, 200);
    let (status, answer) = w.subscribe(body).await;
    assert_eq!(status, 403, "{answer}");
    assert_eq!(answer["error"]["reason"], json!("scope_missing"));
}
