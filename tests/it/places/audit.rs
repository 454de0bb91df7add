//! The audit of places (ADR 0020 §6): Filter-mode lists write no record;
//! 1,000 denied channel sends by Sam in one window make one record with
//! count 1,000, holding no canary text.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

use super::{ok, refused};
use crate::support::hub::ADMIN_TOKEN;
use crate::support::world::{expect, text, world};
use crate::support::TestHub;

const CANARY: &str = "canary-7f3a-do-not-log";

#[tokio::test]
async fn lists_are_not_audited_and_denied_sends_aggregate() {
    let options = TestHub::fast_options().env("SWITCHBOARD_AUDIT__FLUSH_INTERVAL_MS", 100);
    let w = world(options).await;
    let mut sam = w.connect(&w.sam).await;
    ok(&sam.call(json!("l"), "person/channel/list", json!({})).await);
    ok(&sam
        .call(json!("c"), "person/conversation/list", json!({}))
        .await);
    let path = format!("/api/v1/spaces/{}/channels", w.support);
    expect(&w.hub, Method::GET, &path, &w.sam.key, None, 200).await;
    for i in 0..1000 {
        let params = json!({
            "conversationId": w.general,
            "parts": text(&format!("{CANARY} {i}")),
            "clientMsgId": format!("{CANARY}-{i}"),
        });
        let frame = sam.call(json!(i), "person/message/send", params).await;
        assert_eq!(refused(&frame, "ForbiddenError"), "level_insufficient");
    }
    let audit = format!("/api/v1/audit?actorId={}", w.sam.id);
    let deadline = Instant::now() + Duration::from_secs(20);
    let records = loop {
        let v = expect(&w.hub, Method::GET, &audit, ADMIN_TOKEN, None, 200).await;
        let records = v["records"].as_array().unwrap().clone();
        if records.iter().any(|r| r["count"] == json!(1000)) {
            break records;
        }
        assert!(Instant::now() < deadline, "no record of 1,000 denials: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(records.len(), 1, "lists wrote records: {records:?}");
    let r: &Value = &records[0];
    assert_eq!(r["action"], json!("message.create"));
    assert_eq!(r["reason"], json!("level_insufficient"));
    assert_eq!(r["resourceKind"], json!("conversation"));
    assert_eq!(r["resourceId"], json!(w.general));
    let stored = serde_json::to_string(&records).unwrap();
    assert!(!stored.contains(CANARY) && !stored.contains(&w.sam.key));
    let log = w.hub.log();
    assert!(!log.contains(CANARY) && !log.contains(&w.sam.key));
}

/// An app's key on a conversation's history is the 403 of every refusal,
/// counted and audited like one (`message.read`, subject_kind_not_allowed).
#[tokio::test]
async fn an_apps_history_call_is_an_audited_denial() {
    let options = TestHub::fast_options().env("SWITCHBOARD_AUDIT__FLUSH_INTERVAL_MS", 100);
    let w = world(options).await;
    let path = format!("/api/v1/conversations/{}/messages", w.general);
    let v = expect(&w.hub, Method::GET, &path, &w.bot.key, None, 403).await;
    assert_eq!(
        v["error"]["reason"],
        json!("subject_kind_not_allowed"),
        "{v}"
    );
    let audit = format!("/api/v1/audit?actorId={}", w.bot.id);
    let deadline = Instant::now() + Duration::from_secs(20);
    let record = loop {
        let v = expect(&w.hub, Method::GET, &audit, ADMIN_TOKEN, None, 200).await;
        let records = v["records"].as_array().unwrap().clone();
        if let Some(r) = records
            .into_iter()
            .find(|r| r["action"] == json!("message.read"))
        {
            break r;
        }
        assert!(
            Instant::now() < deadline,
            "no record of the app's denial: {v}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(record["reason"], json!("subject_kind_not_allowed"));
    assert_eq!(record["actorKind"], json!("app"));
    assert_eq!(record["resourceKind"], json!("conversation"));
    assert_eq!(record["resourceId"], json!(w.general));
    assert_eq!(record["count"], json!(1));
}
