//! The audit of denials and the rate classes (ADR 0020 §4), on a real hub:
//! an agent calling an app's method is refused as `subject_kind_not_allowed`
//! and the refusals aggregate into one record, flushed on the interval and
//! at a graceful shutdown; the operator reads them through
//! `GET /api/v1/audit`; a spent class refuses only its own methods.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::hub::{Options, ADMIN_TOKEN};
use crate::support::{RawSocket, TestHub};

/// Written into every denied call's params; it must come back nowhere.
const CANARY: &str = "canary-3f9a1c77-do-not-echo";

async fn audit(hub: &TestHub, query: &str, token: Option<&str>) -> (u16, Value) {
    let mut req = hub.http.get(format!("{}/api/v1/audit{query}", hub.base));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.expect("GET /api/v1/audit");
    let status = r.status().as_u16();
    let text = r.text().await.expect("body");
    assert!(!text.contains(CANARY), "{text}");
    (status, serde_json::from_str(&text).expect("JSON body"))
}

/// Polls the agent's records until one reaches `count`, to a deadline.
async fn wait_for_count(hub: &TestHub, actor: &str, count: i64) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = audit(hub, &format!("?actorId={actor}"), Some(ADMIN_TOKEN)).await;
        assert_eq!(status, 200, "{body}");
        let records = body["records"].as_array().cloned().unwrap_or_default();
        if records.iter().any(|r| r["count"] == json!(count)) {
            return records;
        }
        assert!(
            Instant::now() < deadline,
            "no record reached {count}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `n` calls of an app's method by an agent, each refused for its kind.
async fn denied_calls(s: &mut RawSocket, n: usize, method: &str, action: &str) {
    for i in 0..n {
        let f = s
            .call(
                json!(i),
                method,
                json!({ "taskId": CANARY, "note": CANARY }),
            )
            .await;
        let e = &f["error"];
        assert_eq!(e["code"], json!(-32003), "{f}");
        assert_eq!(e["_tag"], json!("ForbiddenError"), "{f}");
        assert_eq!(
            e["data"],
            json!({ "reason": "subject_kind_not_allowed", "action": action }),
            "{f}"
        );
        assert!(!f.to_string().contains(CANARY), "{f}");
    }
}

fn assert_one_record(records: &[Value], actor: &str, action: &str, count: i64) {
    assert_eq!(records.len(), 1, "{records:?}");
    let r = &records[0];
    assert_eq!(r["actorId"], json!(actor));
    assert_eq!(r["actorKind"], json!("agent"));
    assert_eq!(r["action"], json!(action));
    assert_eq!(r["reason"], json!("subject_kind_not_allowed"));
    assert_eq!(r["resourceKind"], json!("hub"));
    assert_eq!(r["resourceId"], json!(uuid::Uuid::nil()));
    assert_eq!(r["count"], json!(count));
    assert!(r["firstAt"].as_str().unwrap() <= r["lastAt"].as_str().unwrap());
    let keys: Vec<&String> = r.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 10, "{r}");
}

/// `switchboard audit list ARGS` on a stopped hub's data directory:
/// whether it succeeded, and its stdout and stderr.
async fn audit_cli(data: &std::path::Path, args: &[&str]) -> (bool, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["audit", "list", "--data-dir"])
        .arg(data)
        .args(args)
        .output()
        .await
        .expect("run switchboard audit list");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains(CANARY), "{text}");
    (out.status.success(), text)
}

#[tokio::test]
async fn a_thousand_denied_calls_make_one_record_that_holds_no_caller_text() {
    let hub = TestHub::start_with(
        TestHub::fast_options().env("SWITCHBOARD_AUDIT__FLUSH_INTERVAL_MS", 100),
    )
    .await;
    let (agent, key) = hub.register_agent("intruder").await;
    let mut s = RawSocket::connect_agent(&hub.ws_url(), &key).await;
    denied_calls(&mut s, 1000, "app/task/close", "task.manage").await;

    let records = wait_for_count(&hub, &agent, 1000).await;
    assert_one_record(&records, &agent, "task.manage", 1000);
    assert!(
        hub.metric("switchboard_audit_records_flushed_total", "")
            .await
            >= 1.0
    );
    assert_eq!(
        hub.metric("switchboard_audit_denials_dropped_total", "")
            .await,
        0.0
    );
    // The socket lives on: a refusal is an answer, not a violation.
    let f = s.call(json!("me"), "agent/identity/get", json!({})).await;
    assert!(f["result"].is_object(), "{f}");
    let log = hub.log();
    assert!(!log.contains(CANARY), "the canary reached the log");
}

#[tokio::test]
async fn a_graceful_shutdown_flushes_what_the_interval_did_not() {
    let mut hub = TestHub::start_with(
        TestHub::fast_options().env("SWITCHBOARD_AUDIT__FLUSH_INTERVAL_MS", 3_600_000),
    )
    .await;
    let (agent, key) = hub.register_agent("patient").await;
    let mut s = RawSocket::connect_agent(&hub.ws_url(), &key).await;
    denied_calls(&mut s, 1000, "app/message/send", "message.create").await;
    // The interval is an hour away: nothing is written yet.
    let (_, body) = audit(&hub, "", Some(ADMIN_TOKEN)).await;
    assert_eq!(body["records"], json!([]), "{body}");

    hub.signal(libc::SIGTERM);
    let status = hub.wait_exit(Duration::from_secs(30)).await;
    assert!(status.success(), "{status:?}\n{}", hub.log());
    assert!(!hub.log().contains(CANARY), "the canary reached the log");

    // The operator's command reads the same records from the database.
    let data = hub.dir.path().join("data");
    let (ok, out) = audit_cli(&data, &["--actor", &agent]).await;
    assert!(ok, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "{out}");
    let fields: Vec<&str> = lines[0].split(' ').collect();
    assert_eq!(
        fields[3..],
        [
            "1000",
            "agent",
            agent.as_str(),
            "message.create",
            "subject_kind_not_allowed",
            "hub",
            "00000000-0000-0000-0000-000000000000"
        ],
        "{out}"
    );
    let (_, out) = audit_cli(&data, &["--action", "task.manage"]).await;
    assert_eq!(out.trim(), "", "another action's filter finds nothing");
    for (args, named) in [
        (&["--action", "message.delete"][..], "--action"),
        (&["--reason", "because"][..], "--reason"),
        (&["--limit", "0"][..], "audit.page_max"),
    ] {
        let (ok, out) = audit_cli(&data, args).await;
        assert!(!ok && out.contains(named), "{args:?}: {out}");
    }

    let again = TestHub::start_with(Options {
        dir: Some(data),
        ..Options::default()
    })
    .await;
    let (status, body) = audit(&again, &format!("?actorId={agent}"), Some(ADMIN_TOKEN)).await;
    assert_eq!(status, 200);
    assert_one_record(
        body["records"].as_array().unwrap(),
        &agent,
        "message.create",
        1000,
    );
}

#[tokio::test]
async fn the_audit_route_pages_filters_and_names_each_bad_parameter() {
    let hub = TestHub::start_with(
        TestHub::fast_options().env("SWITCHBOARD_AUDIT__FLUSH_INTERVAL_MS", 100),
    )
    .await;
    let (agent, key) = hub.register_agent("curious").await;
    let mut s = RawSocket::connect_agent(&hub.ws_url(), &key).await;
    // Three records: one key per action.
    denied_calls(&mut s, 1, "app/task/get", "task.read").await;
    denied_calls(&mut s, 2, "app/message/send", "message.create").await;
    denied_calls(&mut s, 3, "app/dispatch/resolve", "dispatch.resolve").await;
    // The record that reaches 3 was counted last: the flush that wrote it
    // wrote the others' final counts too.
    let records = wait_for_count(&hub, &agent, 3).await;
    assert_eq!(records.len(), 3, "{records:?}");

    // Pages of two by id.
    let (_, first) = audit(&hub, "?limit=2", Some(ADMIN_TOKEN)).await;
    assert_eq!(first["records"].as_array().unwrap().len(), 2, "{first}");
    let next = first["nextAfter"]
        .as_str()
        .expect("a full page says where to go on");
    let (_, second) = audit(&hub, &format!("?limit=2&after={next}"), Some(ADMIN_TOKEN)).await;
    assert_eq!(second["records"].as_array().unwrap().len(), 1, "{second}");
    assert!(second.get("nextAfter").is_none(), "{second}");
    let ids: Vec<&Value> = first["records"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second["records"].as_array().unwrap())
        .map(|r| &r["id"])
        .collect();
    assert_eq!(ids, records.iter().map(|r| &r["id"]).collect::<Vec<_>>());

    // Filters.
    let (_, body) = audit(&hub, "?action=message.create", Some(ADMIN_TOKEN)).await;
    assert_eq!(body["records"][0]["count"], json!(2), "{body}");
    assert_eq!(body["records"].as_array().unwrap().len(), 1);
    let (_, body) = audit(&hub, "?reason=no_grant", Some(ADMIN_TOKEN)).await;
    assert_eq!(body["records"], json!([]));
    let (_, body) = audit(
        &hub,
        &format!("?actorId={}", uuid::Uuid::now_v7()),
        Some(ADMIN_TOKEN),
    )
    .await;
    assert_eq!(body["records"], json!([]));

    // The operator only.
    for token in [None, Some("not-the-operator-token")] {
        let (status, body) = audit(&hub, "", token).await;
        assert_eq!(status, 401, "{body}");
        assert!(body.get("records").is_none());
    }
    let (status, _) = audit(&hub, "", Some(&key)).await;
    assert_eq!(status, 401, "an agent key is no operator token");

    // Each bad value is a 400 naming its parameter, never echoing it.
    for (query, name) in [
        ("?actorId=nope", "actorId"),
        ("?after=12", "after"),
        ("?action=message.delete", "action"),
        ("?reason=because", "reason"),
        ("?limit=0", "limit"),
        ("?limit=1001", "limit"),
        ("?limit=-1", "limit"),
        ("?limit=1&limit=2", "limit"),
        ("?actor=x", "actor"),
    ] {
        let (status, body) = audit(&hub, query, Some(ADMIN_TOKEN)).await;
        assert_eq!(status, 400, "{query}: {body}");
        let e = &body["error"];
        assert_eq!(e["code"], json!("invalid_query"), "{query}: {body}");
        let message = e["message"].as_str().unwrap();
        assert!(message.contains(name), "{query}: {message}");
        assert_eq!(
            e["details"][0]["pointer"],
            json!(format!("/{name}")),
            "{body}"
        );
    }
}

#[tokio::test]
async fn a_spent_message_class_refuses_sends_while_default_calls_pass() {
    let hub = TestHub::start_with(
        Options::default()
            .env("SWITCHBOARD_RATELIMIT__MESSAGE__PER_SECOND", 1)
            .env("SWITCHBOARD_RATELIMIT__MESSAGE__BURST", 2),
    )
    .await;
    let (_, key) = hub.register_agent("chatty").await;
    let (other, _) = hub.register_agent("listener").await;
    let mut s = RawSocket::connect_agent(&hub.ws_url(), &key).await;
    let created = s
        .call(
            json!("create"),
            "agent/conversation/create",
            json!({ "kind": "direct", "participants": [other] }),
        )
        .await;
    let conversation = created["result"]["conversation"]["id"].clone();
    assert!(conversation.is_string(), "{created}");

    let send =
        json!({ "conversationId": conversation, "parts": [{ "type": "text", "text": "hi" }] });
    let mut refused = None;
    for i in 0..20 {
        let f = s.call(json!(i), "agent/message/send", send.clone()).await;
        if f.get("error").is_some() {
            refused = Some(f);
            break;
        }
        assert!(f["result"]["message"].is_object(), "{f}");
    }
    let f = refused.expect("a burst of 2 at 1 a second is spent within 20 sends");
    let e = &f["error"];
    assert_eq!(e["_tag"], json!("RateLimitedError"), "{f}");
    assert_eq!(e["code"], json!(-32029));
    assert_eq!(e["data"]["class"], json!("message"));
    assert!(e["data"]["retryAfterMs"].as_u64().unwrap() >= 1, "{f}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("ratelimit.message.per_second"),
        "{f}"
    );
    // Typing is the same class; reads and identity are `default`'s.
    let f = s
        .call(
            json!("typing"),
            "agent/typing/send",
            json!({ "conversationId": conversation }),
        )
        .await;
    assert_eq!(f["error"]["data"]["class"], json!("message"), "{f}");
    let f = s.call(json!("me"), "agent/identity/get", json!({})).await;
    assert!(f["result"].is_object(), "{f}");
    let f = s
        .call(json!("list"), "agent/conversation/list", json!({}))
        .await;
    assert!(f["result"].is_object(), "{f}");
}

#[tokio::test]
async fn the_old_gateway_rate_keys_are_refused_naming_the_new_ones() {
    for (var, new_key) in [
        (
            "SWITCHBOARD_GATEWAY__RATE_LIMIT_PER_SECOND",
            "ratelimit.default.per_second",
        ),
        (
            "SWITCHBOARD_GATEWAY__RATE_LIMIT_BURST",
            "ratelimit.default.burst",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .arg("serve")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--data-dir")
            .arg(dir.path())
            .env(var, "5")
            .output()
            .await
            .expect("run switchboard serve");
        assert!(!out.status.success(), "{var} was accepted");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(new_key), "{var}: {stderr}");
    }
}
