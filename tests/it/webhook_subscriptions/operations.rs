//! What retention, time and the operator do to a subscription (ADR 0033,
//! review fixes 3, 6, 9 and 10): a gap retention left is recorded once as
//! `pruned` and the cursor moves past it; a subscription failing past
//! `webhooks.disable_after_hours` is disabled and its app told; the
//! operator's disable and retry are audited; a create honours its
//! `Idempotency-Key`; and the routes' 409s.

use reqwest::Method;
use serde_json::{json, Value};

use super::{World, CHANGED, SUBSCRIPTIONS};
use crate::installations::{audit_details, call};
use crate::support::receiver::Scripted;
use crate::support::TestHub;

const DISABLED: &str = "app/webhook/disabled";

/// Stops the hub with SIGTERM and waits for it to exit.
async fn stop(w: &mut World) {
    w.hub.signal(libc::SIGTERM);
    w.hub.wait_exit(std::time::Duration::from_secs(20)).await;
}

/// The hub's SQLite file, for what only the passing of hours would do.
fn database(w: &World) -> rusqlite::Connection {
    rusqlite::Connection::open(w.data().join("switchboard.db")).unwrap()
}

/// The app's newest seq, from its catch-up.
async fn head(w: &World) -> u64 {
    let (status, body) = crate::support::event_reader::rest_events(&w.hub, &w.key, "after=0").await;
    assert_eq!(status, 200, "{body}");
    body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .max()
        .unwrap()
}

#[tokio::test]
async fn a_cursor_whose_every_event_was_pruned_moves_to_the_head_once() {
    let mut w = World::new(TestHub::fast_options()).await;
    let sub = w.subscribed("/scripted", &[CHANGED]).await;
    // The first attempt fails with a retry an hour away: the events wait
    // behind the cursor while retention takes them all.
    w.receiver.script(&[Scripted::Status(503, Some("3600"))]);
    w.event().await;
    w.event().await;
    w.attempts(&sub, 1).await;
    let last = head(&w).await;
    stop(&mut w).await;
    let mut config = switchboard::config::Config::default();
    config.server.data_dir = w.data();
    let store = switchboard::store::open(&config).await.unwrap();
    let later = chrono::Utc::now().timestamp_millis() + 1_000;
    assert!(store.prune_events(later, 1_000_000).await.unwrap() > 0);
    drop(store);
    let (ok, _, err) = w.cli(&["webhooks", "retry", "--id", &sub]);
    assert!(ok, "{err}");
    w.restart().await;

    let log = w.attempts(&sub, 2).await;
    assert_eq!(log[1]["outcome"], json!("pruned"), "{log:?}");
    assert_eq!(log[1]["seq"], json!(last));
    assert!(log[1].get("eventId").is_none());
    let s = w.subscription(&sub).await;
    assert_eq!(
        s["cursor"],
        json!(last),
        "the cursor moved to the log's head"
    );
    // Recorded once: the subscription is caught up, not claimed again and
    // again (the worker polls every 50 ms; a later event goes out).
    // (The catch-up from 0 is a resync now: the event is read after the head.)
    let path = format!("/api/v1/apps/{}/manifest", w.app);
    let next = crate::installations::described("after the gap");
    let (status, _) = call(
        &w.hub,
        Method::PUT,
        &path,
        crate::support::hub::ADMIN_TOKEN,
        Some(&next),
    )
    .await;
    assert_eq!(status, 200);
    let after = format!("after={last}");
    let (status, read) = crate::support::event_reader::rest_events(&w.hub, &w.key, &after).await;
    assert_eq!(status, 200, "{read}");
    let next = read["events"][0]["id"].as_str().unwrap().to_string();
    let got = w.receiver.wait_on("/scripted", 2).await;
    assert_eq!(got[1].header("webhook-id"), Some(next.as_str()));
    let log = w.attempts(&sub, 3).await;
    assert_eq!(log.len(), 3, "{log:?}");
    assert_eq!(
        w.hub
            .metric("switchboard_webhook_attempts_total", "outcome=\"pruned\"")
            .await,
        1.0
    );
}

#[tokio::test]
async fn a_subscription_failing_past_disable_after_hours_is_disabled_and_its_app_told() {
    let options = TestHub::fast_options().env("SWITCHBOARD_WEBHOOKS__DISABLE_AFTER_HOURS", 1);
    let mut w = World::new(options).await;
    let sub = w.subscribed("/scripted", &[CHANGED]).await;
    w.receiver.script(&[
        Scripted::Status(503, Some("3600")),
        Scripted::Status(503, None),
    ]);
    w.event().await;
    w.attempts(&sub, 1).await;
    stop(&mut w).await;
    // Two hours pass for the subscription: it has failed since then, and
    // its retry is due.
    let aged = database(&w)
        .execute(
            "UPDATE webhook_subscriptions SET failing_since = failing_since - 7200000, \
             next_attempt_at = 0 WHERE id = ?1",
            [&sub],
        )
        .unwrap();
    assert_eq!(aged, 1);
    w.restart().await;

    let log = w.attempts(&sub, 2).await;
    assert_eq!(log[1]["outcome"], json!("http_status"));
    assert!(log[1].get("nextAttemptAt").is_none(), "no retry: {log:?}");
    let s = w.subscription(&sub).await;
    assert_eq!(
        (&s["state"], &s["disabledReason"]),
        (&json!("disabled"), &json!("failing"))
    );
    let told = w.events(DISABLED).await;
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(
        told[0]["payload"],
        json!({"subscriptionId": sub, "reason": "failing"})
    );
    assert_eq!(
        w.hub
            .metric(
                "switchboard_webhook_subscriptions_disabled_total",
                "reason=\"failing\""
            )
            .await,
        1.0
    );
}

#[tokio::test]
async fn the_operators_disable_and_retry_are_audited_and_the_app_told() {
    let w = World::new(TestHub::fast_options()).await;
    let sub = w.subscribed("/ok", &[CHANGED]).await;
    let (ok, out, err) = w.cli(&["webhooks", "disable", "--id", &sub]);
    assert!(ok && out.contains("disabled"), "{out}{err}");
    let (ok, out, _) = w.cli(&["webhooks", "disable", "--id", &sub]);
    assert!(ok && out.contains("disabled already"), "{out}");
    let s = w.subscription(&sub).await;
    assert_eq!(s["disabledReason"], json!("operator"));
    let told = w.events(DISABLED).await;
    assert_eq!(
        told.iter()
            .map(|e| e["payload"].clone())
            .collect::<Vec<_>>(),
        vec![json!({"subscriptionId": sub, "reason": "operator"})]
    );
    let (ok, _, err) = w.cli(&["webhooks", "retry", "--id", &sub]);
    assert!(ok, "{err}");
    assert_eq!(w.subscription(&sub).await["state"], json!("active"));
    let (ok, _, err) = w.cli(&[
        "webhooks",
        "disable",
        "--id",
        &uuid::Uuid::now_v7().to_string(),
    ]);
    assert!(!ok && err.contains("no webhook subscription"), "{err}");

    // One row each, naming the subscription by id: no URL, no secret.
    let only_the_id = vec![json!({ "subscriptionId": sub })];
    assert_eq!(
        audit_details(&w.hub, &w.app, "webhook.disable").await,
        only_the_id
    );
    assert_eq!(
        audit_details(&w.hub, &w.app, "webhook.retry").await,
        only_the_id
    );
    let path = format!("/api/v1/audit/actions?appId={}", w.app);
    let (_, all) = call(
        &w.hub,
        Method::GET,
        &path,
        crate::support::hub::ADMIN_TOKEN,
        None,
    )
    .await;
    assert!(!all.to_string().contains("/ok"), "{all}");
}

async fn create(w: &World, key: Option<&str>, body: &Value) -> (u16, Value, bool) {
    let mut r = w
        .hub
        .http
        .post(format!("{}{SUBSCRIPTIONS}", w.hub.base))
        .bearer_auth(&w.key)
        .json(body);
    if let Some(k) = key {
        r = r.header("idempotency-key", k);
    }
    let answer = r.send().await.unwrap();
    let status = answer.status().as_u16();
    let replayed = answer.headers().get("idempotent-replayed").is_some();
    (status, answer.json().await.unwrap(), replayed)
}

#[tokio::test]
async fn a_create_honours_its_idempotency_key_and_the_409s() {
    let options = TestHub::fast_options().env("SWITCHBOARD_WEBHOOKS__MAX_SUBSCRIPTIONS_PER_APP", 2);
    let w = World::new(options).await;
    let body = json!({"url": w.url("/ok"), "eventTypes": [CHANGED], "hmac": true});
    let (status, first, replayed) = create(&w, Some("once"), &body).await;
    assert_eq!((status, replayed), (201, false), "{first}");
    assert!(first["secret"].as_str().unwrap().starts_with("whsec_"));
    let (status, again, replayed) = create(&w, Some("once"), &body).await;
    assert_eq!((status, replayed), (201, true), "{again}");
    assert_eq!(again["subscription"], first["subscription"]);
    assert!(again.get("secret").is_none(), "shown once: {again}");
    assert_eq!(again["secretWithheld"], json!(true));
    let other = json!({"url": w.url("/ok"), "eventTypes": [CHANGED]});
    let (status, reused, _) = create(&w, Some("once"), &other).await;
    assert_eq!(status, 409, "{reused}");
    assert_eq!(reused["error"]["code"], json!("idempotency_conflict"));
    let (_, listed) = call(&w.hub, Method::GET, SUBSCRIPTIONS, &w.key, None).await;
    assert_eq!(listed["subscriptions"].as_array().unwrap().len(), 1);

    let (status, _, _) = create(&w, None, &other).await;
    assert_eq!(status, 201);
    let (status, full, _) = create(&w, None, &other).await;
    assert_eq!(status, 409, "{full}");
    assert_eq!(full["error"]["code"], json!("subscription_limit"));
}

#[tokio::test]
async fn a_hub_without_a_signing_key_refuses_subscriptions() {
    let receiver = crate::support::receiver::Receiver::start().await;
    let entry = format!("[\"localhost:{}\"]", receiver.port());
    let hub =
        TestHub::start_with(TestHub::fast_options().env("SWITCHBOARD_EGRESS__ALLOWLIST", &entry))
            .await;
    let (_, key) = hub.register_app(&crate::support::werewolf_manifest()).await;
    let body = json!({"url": receiver.url("localhost", "/ok"), "eventTypes": [CHANGED]});
    let (status, answer) = call(&hub, Method::POST, SUBSCRIPTIONS, &key, Some(&body)).await;
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["error"]["code"], json!("no_signing_key"));
}
