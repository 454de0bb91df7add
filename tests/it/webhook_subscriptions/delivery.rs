//! At least once, in seq order, with backoff visible in the delivery log;
//! 410 disables and tells the app.

use serde_json::{json, Value};

use super::{ids, ms_between, World, CHANGED};
use crate::support::hub::Options;
use crate::support::receiver::Scripted;
use crate::support::TestHub;

crate::installations::both!(a_receiver_failing_for_a_while_gets_every_event_in_order_after);

async fn a_receiver_failing_for_a_while_gets_every_event_in_order_after(options: Options) {
    let mut w = World::new(options).await;
    let sub = w.subscribed("/scripted", &[CHANGED]).await;
    // Down for three attempts: a dropped connection, a 503 asking for a
    // second, a 500.
    w.receiver.script(&[
        Scripted::HangUp,
        Scripted::Status(503, Some("1")),
        Scripted::Status(500, None),
    ]);
    let events = [w.event().await, w.event().await, w.event().await];
    let got = w.receiver.wait_on("/scripted", 6).await;
    let e = |i: usize| events[i].clone();
    assert_eq!(ids(&got), vec![e(0), e(0), e(0), e(0), e(1), e(2)]);
    for r in &got {
        assert_eq!(
            r.verified,
            Ok(()),
            "every request verifies with the published keys"
        );
        let sig = r.header("webhook-signature").unwrap();
        assert!(sig.starts_with("v1a,") && !sig.contains("v1,"), "{sig}");
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(body["id"].as_str(), r.header("webhook-id"));
        assert_eq!(body["type"], json!(CHANGED));
        assert!(body["syncEpoch"].is_string(), "{body}");
        assert!(body["seq"].is_u64(), "{body}");
    }
    let seqs: Vec<u64> = got[3..]
        .iter()
        .map(|r| {
            serde_json::from_slice::<Value>(&r.body).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert!(seqs.windows(2).all(|p| p[0] < p[1]), "seq order: {seqs:?}");

    let log = w.attempts(&sub, 6).await;
    let outcomes: Vec<(&str, Option<u64>, u64)> = log
        .iter()
        .map(|a| {
            (
                a["outcome"].as_str().unwrap(),
                a["status"].as_u64(),
                a["attempt"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        vec![
            ("transport", None, 1),
            ("http_status", Some(503), 2),
            ("http_status", Some(500), 3),
            ("delivered", Some(200), 4),
            ("delivered", Some(200), 1),
            ("delivered", Some(200), 1),
        ]
    );
    // The backoff: 200 ms doubling with its upper half jittered; the 503's
    // Retry-After of a second replaces it; no retry came early.
    let wait = |a: &Value| ms_between(&a["at"], &a["nextAttemptAt"]);
    assert!((100..=1_000).contains(&wait(&log[0])), "{}", log[0]);
    assert!(wait(&log[1]) >= 1_000, "Retry-After honoured: {}", log[1]);
    assert!((400..=2_000).contains(&wait(&log[2])), "{}", log[2]);
    for pair in log[..4].windows(2) {
        assert!(
            ms_between(&pair[0]["nextAttemptAt"], &pair[1]["at"]) >= 0,
            "{pair:?}"
        );
    }
    for a in &log[3..] {
        assert!(a.get("nextAttemptAt").is_none(), "{a}");
    }
    assert_eq!(log[3]["eventId"], json!(e(0)));

    let s = w.subscription(&sub).await;
    assert_eq!(
        (s["state"].as_str(), s["attempts"].as_u64()),
        (Some("active"), Some(0))
    );
    let last: Value = serde_json::from_slice(&got[5].body).unwrap();
    assert_eq!(s["cursor"], last["seq"]);
    assert!(s.get("failingSince").is_none(), "{s}");
    let delivered = format!("app=\"{}\",outcome=\"delivered\"", w.app);
    assert_eq!(
        w.hub
            .metric("switchboard_webhook_attempts_total", &delivered)
            .await,
        3.0
    );
    let failed = format!("app=\"{}\",outcome=\"http_status\"", w.app);
    assert_eq!(
        w.hub
            .metric("switchboard_webhook_attempts_total", &failed)
            .await,
        2.0
    );
}

#[tokio::test]
async fn a_410_disables_the_subscription_and_tells_the_app() {
    let mut w = World::new(crate::support::TestHub::fast_options()).await;
    let gone = w.subscribed("/scripted", &[CHANGED]).await;
    let witness = w
        .subscribed("/ok", &[CHANGED, "app/webhook/disabled"])
        .await;
    w.receiver.script(&[Scripted::Status(410, None)]);
    let first = w.event().await;
    // The witness gets the event, then the disable (written with it), then
    // a later event: by then the other subscription is disabled for good.
    w.receiver.wait_on("/ok", 2).await;
    let later = w.event().await;
    let to_witness = w.receiver.wait_on("/ok", 3).await;
    let told: Value = serde_json::from_slice(&to_witness[1].body).unwrap();
    assert_eq!(told["type"], json!("app/webhook/disabled"));
    assert_eq!(
        told["payload"],
        json!({"subscriptionId": gone, "reason": "gone"})
    );
    assert_eq!(ids(&to_witness)[2], later);
    assert_eq!(
        ids(&w.receiver.received_on("/scripted")),
        vec![first.clone()]
    );

    let s = w.subscription(&gone).await;
    assert_eq!(s["state"], json!("disabled"));
    assert_eq!(w.subscription(&witness).await["state"], json!("active"));
    assert_eq!(s["disabledReason"], json!("gone"));
    let log = w.attempts(&gone, 1).await;
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(
        (log[0]["outcome"].as_str(), log[0]["status"].as_u64()),
        (Some("gone"), Some(410))
    );
    let disabled = w.events("app/webhook/disabled").await;
    assert_eq!(disabled.len(), 1, "in the app's catch-up too: {disabled:?}");
    assert_eq!(
        w.hub
            .metric(
                "switchboard_webhook_subscriptions_disabled_total",
                "reason=\"gone\""
            )
            .await,
        1.0
    );

    // The operator re-enables it: it goes on from its cursor, so the event
    // it was refused on comes again, then the rest in order.
    let (ok, out, err) = w.cli(&["webhooks", "retry", "--id", &gone]);
    assert!(ok, "{err}");
    assert!(out.contains("active"), "{out}");
    let again = w.receiver.wait_on("/scripted", 3).await;
    assert_eq!(ids(&again), vec![first.clone(), first, later]);
    assert!(w
        .attempts(&gone, 3)
        .await
        .iter()
        .skip(1)
        .all(|a| a["outcome"] == json!("delivered")));
}

/// An operator takes the receiver's host off the allowlist and restarts
/// the hub: the stored subscription's next attempt is `blocked` by the
/// egress client's own check, before any secret is read, and counted in
/// `switchboard_egress_blocked_total` like every egress refusal.
#[tokio::test]
async fn a_host_taken_off_the_allowlist_is_blocked_and_counted() {
    let mut w = World::new(TestHub::fast_options()).await;
    let sub = w.subscribed("/ok", &[CHANGED]).await;
    w.event().await;
    w.receiver.wait_on("/ok", 1).await;
    w.attempts(&sub, 1).await;
    w.hub.signal(libc::SIGTERM);
    w.hub.wait_exit(std::time::Duration::from_secs(20)).await;
    w.options = super::clone_options(&w.options)
        .env(
            "SWITCHBOARD_EGRESS__ALLOWLIST",
            "[\"elsewhere.example.com\"]",
        )
        .env("SWITCHBOARD_EGRESS__PRIVATE_OVERRIDE", "[]");
    w.restart().await;
    let blocked_before = w
        .hub
        .metric("switchboard_egress_blocked_total", "purpose=\"webhook\"")
        .await;
    assert_eq!(blocked_before, 0.0);

    w.event().await;
    let log = w.attempts(&sub, 2).await;
    assert_eq!(log[1]["outcome"], json!("blocked"), "{log:?}");
    assert!(log[1]["status"].as_u64().is_none(), "{log:?}");
    assert_eq!(
        w.receiver.received_on("/ok").len(),
        1,
        "no request went out"
    );
    let blocked = w
        .hub
        .metric("switchboard_egress_blocked_total", "purpose=\"webhook\"")
        .await;
    assert!(blocked >= 1.0, "the refusal is counted: {blocked}");
}
