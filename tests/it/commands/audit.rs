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

/// The denials of `action` counted over every record: one window's denials
/// are one record, and two refusals may fall in two flush windows.
pub(super) fn total(all: &[Value], action: &str) -> i64 {
    all.iter()
        .filter(|r| r["action"] == json!(action))
        .map(|r| r["count"].as_i64().unwrap())
        .sum()
}

/// Polls until the records of each `(action, count)` add up to it.
pub(super) async fn until_totals(
    hub: &TestHub,
    who: &Member,
    wanted: &[(&str, i64)],
) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let all = records(hub, who).await;
        if wanted.iter().all(|(a, n)| total(&all, a) >= *n) {
            return all;
        }
        assert!(
            Instant::now() < deadline,
            "not every denial of {wanted:?} was recorded: {all:?}"
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
    let all = until_totals(
        &s.w.hub,
        &s.w.sam,
        &[("command.invoke", 3), ("command.autocomplete", 2)],
    )
    .await;
    assert_eq!(total(&all, "command.invoke"), 3, "{all:?}");
    assert_eq!(total(&all, "command.autocomplete"), 2, "{all:?}");
    for r in all
        .iter()
        .filter(|r| r["action"] == json!("command.invoke"))
    {
        assert_eq!(r["reason"], json!("level_insufficient"));
        assert_eq!(r["resourceKind"], json!("command"));
        assert_eq!(r["resourceId"], json!(vote));
    }
    for r in all
        .iter()
        .filter(|r| r["action"] == json!("command.autocomplete"))
    {
        assert_eq!(r["reason"], json!("no_grant"));
    }
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
