//! TestDeniedAppActionsAudited for commands (ADR 0027 §3, §10): refused
//! invokes and autocompletes are audited, aggregated into one record per
//! actor, action and reason; a list's Filter-mode drops write none; no
//! option value reaches the audit.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

use super::{both, setup};
use crate::support::hub::{Options, ADMIN_TOKEN};
use crate::support::world::{expect, Member};
use crate::support::TestHub;

const CANARY: &str = "canary-audit-c0ffee";

async fn records(hub: &TestHub, who: &Member) -> Vec<Value> {
    let path = format!("/api/v1/audit?actorId={}", who.id);
    let v = expect(hub, Method::GET, &path, ADMIN_TOKEN, None, 200).await;
    assert!(!v.to_string().contains(CANARY), "{v}");
    v["records"].as_array().unwrap().clone()
}

/// Polls until the record of `action` reaches `count`.
async fn until_count(hub: &TestHub, who: &Member, action: &str, count: i64) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let all = records(hub, who).await;
        if all
            .iter()
            .any(|r| r["action"] == json!(action) && r["count"] == json!(count))
        {
            return all;
        }
        assert!(
            Instant::now() < deadline,
            "no {action} record of {count}: {all:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn denied_app_actions_audited(options: Options) {
    let options = options.env("SWITCHBOARD_AUDIT__FLUSH_INTERVAL_MS", 100);
    let s = setup(options).await;
    let vote = s.command_id("vote").await;
    let find = s.command_id("find").await;
    let mut sam = s.w.connect(&s.w.sam).await;
    // Sam lists general: vote and purge are dropped silently (Filter).
    assert_eq!(s.listed(&mut sam, &s.w.sam, s.w.general).await.len(), 1);
    for i in 0..3 {
        let r = s
            .invoke(
                &mut sam,
                &s.w.sam,
                vote,
                s.w.general,
                json!({"choice": CANARY}),
            )
            .await;
        assert_eq!(
            r["error"]["data"]["reason"],
            json!("level_insufficient"),
            "{i}: {r}"
        );
    }
    // Hidden: the command in a place the app cannot write.
    let params = json!({"commandId": find, "conversationId": s.w.escalation, "option": "who", "value": CANARY});
    for i in 0..2 {
        let r = sam
            .call(json!(i), "person/command/autocomplete", params.clone())
            .await;
        assert_eq!(r["error"]["_tag"], json!("NotFoundError"), "{r}");
    }
    until_count(&s.w.hub, &s.w.sam, "command.invoke", 3).await;
    // Both aggregates complete (a flush may have caught the second ask
    // after the first).
    let all = until_count(&s.w.hub, &s.w.sam, "command.autocomplete", 2).await;
    let invoke = all
        .iter()
        .find(|r| r["action"] == json!("command.invoke"))
        .unwrap();
    assert_eq!(invoke["reason"], json!("level_insufficient"));
    assert_eq!(invoke["resourceKind"], json!("command"));
    assert_eq!(invoke["resourceId"], json!(vote));
    let ask = all
        .iter()
        .find(|r| r["action"] == json!("command.autocomplete"))
        .unwrap();
    assert_eq!(
        (ask["reason"].clone(), ask["count"].clone()),
        (json!("no_grant"), json!(2))
    );
    assert!(
        all.iter().all(|r| r["action"] != json!("command.read")),
        "a list's drops are not audited: {all:?}"
    );
    assert!(
        !s.w.hub.log().contains(CANARY),
        "an option value reached the log"
    );
}

both!(denied_app_actions_audited);
