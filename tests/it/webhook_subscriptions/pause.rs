//! A running delivery loop stops with the installation (ADR 0033, review
//! fix 1): a suspend, a lost `events:subscribe` or an uninstall while a
//! backlog is being delivered lets the event in flight finish and sends
//! nothing more; a resume (or the scope granted back) sends the rest in
//! `seq` order. The receiver holds each request until the test lets it
//! through, so the pause lands mid-backlog, not between claims.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use super::{ids, World, CHANGED, SUBSCRIPTIONS};
use crate::installations::{call, described, operator};
use crate::support::hub::ADMIN_TOKEN;
use crate::support::{werewolf_manifest, TestHub};

/// Another app whose subscription to `/ok` shows the worker is polling:
/// once its event is delivered, a claim the paused one could have had was
/// made and passed it over.
pub struct Witness {
    app: String,
    key: String,
    sub: String,
    rounds: usize,
}

impl Witness {
    pub async fn new(w: &World) -> Witness {
        let (app, key) = w.hub.register_app(&werewolf_manifest()).await;
        let body = json!({"url": w.url("/ok"), "eventTypes": [CHANGED]});
        let (status, answer) = call(&w.hub, Method::POST, SUBSCRIPTIONS, &key, Some(&body)).await;
        assert_eq!(status, 201, "{answer}");
        let sub = answer["subscription"]["id"].as_str().unwrap().to_string();
        Witness {
            app,
            key,
            sub,
            rounds: 0,
        }
    }

    /// One event of the witness app, delivered; the time of its attempt
    /// (milliseconds), as the hub recorded it.
    pub async fn round(&mut self, w: &World) -> i64 {
        self.rounds += 1;
        let path = format!("/api/v1/apps/{}/manifest", self.app);
        let next = described(&format!("witness {}", self.rounds));
        let (status, body) = call(&w.hub, Method::PUT, &path, ADMIN_TOKEN, Some(&next)).await;
        assert_eq!(status, 200, "{body}");
        w.receiver.wait_on("/ok", self.rounds).await;
        let path = format!("{SUBSCRIPTIONS}/{}/attempts", self.sub);
        let at = async {
            let mut tick = tokio::time::interval(Duration::from_millis(50));
            loop {
                tick.tick().await;
                let (_, log) = call(&w.hub, Method::GET, &path, &self.key, None).await;
                let log = log["attempts"].as_array().unwrap().clone();
                if log.len() >= self.rounds {
                    return millis(&log[0]["at"]);
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(30), at)
            .await
            .expect("the witness's attempt recorded")
    }
}

pub fn millis(v: &Value) -> i64 {
    chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap())
        .unwrap()
        .timestamp_millis()
}

/// Waits until the delivery log (read by the operator's CLI: a paused app's
/// key reads nothing) holds `n` delivered attempts.
pub async fn delivered(w: &World, sub: &str, n: usize) {
    let read = async {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tick.tick().await;
            let (ok, out, err) = w.cli(&["webhooks", "list", "--id", sub]);
            assert!(ok, "{err}");
            if out.matches(" delivered ").count() >= n {
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .unwrap_or_else(|_| panic!("{n} deliveries recorded"));
}

/// The ids of the app's `CHANGED` events from `first` on, in seq order.
pub async fn from(w: &World, first: &str) -> Vec<String> {
    let all: Vec<String> = w
        .events(CHANGED)
        .await
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    let at = all.iter().position(|id| id == first).unwrap();
    all[at..].to_vec()
}

async fn scopes(w: &World, scopes: Value) {
    let body = json!({ "scopes": scopes });
    let (status, answer) = operator(
        &w.hub,
        Method::PUT,
        &w.app,
        "installation/scopes",
        Some(&body),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
}

/// The request in flight is let through while paused: it is recorded, and
/// nothing more is sent (the witness shows the worker went on polling).
async fn nothing_more(w: &World, witness: &mut Witness, sub: &str, sent: usize, done: usize) {
    w.receiver.open_gate(1);
    delivered(w, sub, done).await;
    witness.round(w).await;
    assert_eq!(
        w.receiver.received_on("/gated").len(),
        sent,
        "no request after the pause"
    );
}

#[tokio::test]
async fn a_suspend_mid_backlog_stops_the_loop_and_a_resume_sends_the_rest_in_order() {
    let mut w = World::new(TestHub::fast_options()).await;
    let sub = w.subscribed("/gated", &[CHANGED]).await;
    let mut witness = Witness::new(&w).await;
    let first = w.event().await;
    w.event().await;
    w.event().await;
    let got = w.receiver.wait_on("/gated", 1).await;
    assert_eq!(ids(&got), vec![first.clone()]);

    w.operator("installation/suspend").await;
    nothing_more(&w, &mut witness, &sub, 1, 1).await;

    w.operator("installation/resume").await;
    let expected = from(&w, &first).await;
    w.receiver.open_gate(expected.len() - 1);
    let got = w.receiver.wait_on("/gated", expected.len()).await;
    assert_eq!(
        ids(&got),
        expected,
        "the rest, in seq order, after the resume"
    );
}

#[tokio::test]
async fn a_lost_scope_or_an_uninstall_mid_backlog_stops_the_loop() {
    let mut w = World::new(TestHub::fast_options()).await;
    let sub = w.subscribed("/gated", &[CHANGED]).await;
    let mut witness = Witness::new(&w).await;
    let first = w.event().await;
    w.event().await;
    w.receiver.wait_on("/gated", 1).await;

    scopes(&w, json!([])).await;
    nothing_more(&w, &mut witness, &sub, 1, 1).await;

    scopes(&w, json!(["events:subscribe"])).await;
    let expected = from(&w, &first).await;
    w.receiver.open_gate(expected.len() - 2);
    let got = w.receiver.wait_on("/gated", expected.len()).await;
    assert_eq!(ids(&got), expected, "the rest once the scope is back");

    // The last one is held; two more wait behind it; then the uninstall.
    let held = expected.len();
    w.event().await;
    w.event().await;
    let (status, answer) = operator(&w.hub, Method::DELETE, &w.app, "installation", None).await;
    assert_eq!(status, 204, "{answer}");
    nothing_more(&w, &mut witness, &sub, held, held).await;
}
