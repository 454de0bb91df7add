//! Hub-managed runs over REST (ADR 0031 §3): a run started by the
//! operator sends into its task through the broker alone and agents
//! receive it live; runs are listed, shown with their log, stopped from
//! REST and from the CLI of another process; one run's token is refused
//! by another run's broker.

use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};
use switchboard::client::AgentClient;
use switchboard::protocol::tasks::{AgentTaskRequest, TaskRequestParams};
use tokio::time::Instant;

use super::{card, Card};
use crate::support::agents::{agent, next_of};
use crate::support::hub::ADMIN_TOKEN;
use crate::support::TestHub;

pub(super) async fn admin(
    hub: &TestHub,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = hub
        .http
        .request(method, format!("{}{path}", hub.base))
        .bearer_auth(ADMIN_TOKEN);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.expect("request");
    let status = r.status().as_u16();
    let text = r.text().await.expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// `POST /api/v1/cards` with the package's files, as an operator would.
pub(super) async fn install_over_rest(hub: &TestHub, c: &Card) {
    let (status, body) = admin(
        hub,
        reqwest::Method::POST,
        "/api/v1/cards",
        Some(install_body(c)),
    )
    .await;
    assert_eq!(status, 201, "{body}");
}

/// The install's body: the card and its files.
pub(super) fn install_body(c: &Card) -> Value {
    let dir = c.dir();
    let card: Value =
        serde_json::from_slice(&std::fs::read(dir.join("app.json")).unwrap()).unwrap();
    let mut files = serde_json::Map::new();
    for name in card["entry"]["integrity"].as_object().unwrap().keys() {
        let bytes = std::fs::read(dir.join(name)).unwrap();
        files.insert(
            name.clone(),
            json!(base64::engine::general_purpose::STANDARD.encode(bytes)),
        );
    }
    json!({"card": card, "files": files})
}

pub(super) async fn start(hub: &TestHub, card_id: &str) -> Value {
    let (status, run) = admin(
        hub,
        reqwest::Method::POST,
        &format!("/api/v1/cards/{card_id}/runs"),
        None,
    )
    .await;
    assert_eq!(status, 201, "{run}");
    assert_eq!(run["state"], "running");
    assert_eq!(run["isolated"], true);
    run
}

/// The run's row once it ended (read until it did, within a deadline).
pub(super) async fn ended(hub: &TestHub, run_id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, run) = admin(
            hub,
            reqwest::Method::GET,
            &format!("/api/v1/runs/{run_id}"),
            None,
        )
        .await;
        assert_eq!(status, 200, "{run}");
        if run["state"] == "exited" || run["state"] == "failed" {
            return run;
        }
        assert!(Instant::now() < deadline, "the run did not end: {run}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const HOST: &str = r#"
import json
from sb import call, out, text

cursor = None
while True:
    params = {"timeout": 30}
    if cursor is not None:
        params["after_id"] = cursor
    page = text("wait_for_message", params)
    events = page["events"]
    cursor = page["nextAfter"]
    activated = [e for e in events if e["type"] == "app/task/activated"]
    if activated:
        room = activated[0]["payload"]["conversations"][0]["id"]
        break
me = text("whoami")
sent = text("send_message", {"to": room, "text": "round 1 begins: " + me["cardId"]})
out(sent=sent, room=room)
again = text("read_inbox", {"after_id": 0})
out(inbox=[e["type"] for e in again["events"]])
"#;

#[tokio::test]
async fn a_hub_managed_run_sends_into_its_task_through_the_broker_alone() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let c = card(
        "host",
        &["whoami", "send_message", "read_inbox", "wait_for_message"],
        HOST,
        &[],
    );
    install_over_rest(&hub, &c).await;
    let run = start(&hub, "host").await;
    let app_id: uuid::Uuid = run["appId"].as_str().unwrap().parse().unwrap();
    let (alice, bob) = (agent(&hub, "alice").await, agent(&hub, "bob").await);
    let a = AgentClient::connect(&hub.base, &alice.key).await.unwrap();
    let b = AgentClient::connect(&hub.base, &bob.key).await.unwrap();
    let mut b_events = b.connection.notifications().expect("notifications");
    a.call::<AgentTaskRequest>(TaskRequestParams {
        app_id,
        invited_agent_ids: vec![bob.id],
        initial_conversation: None,
    })
    .await
    .unwrap();
    let received = next_of(&mut b_events, "agent/message/received").await;
    let message = &received["payload"]["message"];
    assert_eq!(message["senderId"], json!(app_id));
    assert_eq!(message["parts"][0]["text"], "round 1 begins: host");
    let end = ended(&hub, run["runId"].as_str().unwrap()).await;
    assert_eq!(
        (end["state"].clone(), end["exitCode"].clone()),
        (json!("exited"), json!(0)),
        "{end}"
    );
    let log = end["log"].as_str().unwrap();
    assert!(
        log.contains("\"sent\"") && log.contains("app/task/activated"),
        "{log}"
    );
    let (status, list) = admin(&hub, reqwest::Method::GET, "/api/v1/runs?cardId=host", None).await;
    assert_eq!(status, 200);
    assert_eq!(list["runs"][0]["runId"], run["runId"]);
    assert!(list["runs"][0].get("log").is_none(), "lists leave logs out");
    // The second run reuses the card's app.
    let again = start(&hub, "host").await;
    assert_eq!(again["appId"], run["appId"]);
    let (status, _) = admin(
        &hub,
        reqwest::Method::POST,
        &format!("/api/v1/runs/{}/stop", again["runId"].as_str().unwrap()),
        None,
    )
    .await;
    assert_eq!(status, 202);
    let stopped = ended(&hub, again["runId"].as_str().unwrap()).await;
    assert_eq!(stopped["reason"], "stopped", "{stopped}");
    // The hub's own log holds run ids and states, never the entry's output.
    assert!(
        !hub.log().contains("round 1 begins"),
        "the entry's output reached the hub's log"
    );
}

const ROLES: &str = r#"
import json, time
from sb import TOKEN, call, out, text

def wait_forever():
    while True:
        call("wait_for_message", {"timeout": 30})

if text("coord", {"key": "holder", "expect": None, "value": "taken"})["swapped"]:
    text("remember", {"key": "token", "value": TOKEN})
    wait_forever()
elif text("coord", {"key": "prober", "expect": None, "value": "taken"})["swapped"]:
    other = None
    while other is None:
        other = text("recall", {"key": "token"})["value"]
        time.sleep(0.01)
    theirs = call("whoami", {}, token=other)
    out(theirs=theirs, own=call("whoami")["ok"], differ=other != TOKEN)
else:
    wait_forever()
"#;

#[tokio::test]
async fn a_runs_token_does_not_work_for_another_run_and_stops_end_runs() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let c = card(
        "roles",
        &["whoami", "coord", "remember", "recall", "wait_for_message"],
        ROLES,
        &[],
    );
    install_over_rest(&hub, &c).await;
    let first = start(&hub, "roles").await;
    let second = start(&hub, "roles").await;
    let third = start(&hub, "roles").await;
    let ids: Vec<String> = [&first, &second, &third]
        .iter()
        .map(|r| r["runId"].as_str().unwrap().to_string())
        .collect();
    // Exactly one of them is the prober; it ends by itself.
    let mut prober = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    while prober.is_none() {
        for id in &ids {
            let (_, run) = admin(
                &hub,
                reqwest::Method::GET,
                &format!("/api/v1/runs/{id}"),
                None,
            )
            .await;
            if run["state"] == "exited" {
                prober = Some((id.clone(), run));
            }
        }
        assert!(Instant::now() < deadline, "no run ended");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (prober_id, prober) = prober.unwrap();
    let line: Value = prober["log"]
        .as_str()
        .unwrap()
        .lines()
        .find_map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .filter(|v| v.get("theirs").is_some())
        })
        .unwrap_or_else(|| panic!("{prober}"));
    assert_eq!(line["differ"], true);
    assert_eq!(line["theirs"]["ok"], false);
    assert_eq!(line["theirs"]["error"], "bad_token");
    assert_eq!(line["own"], true);
    let live: Vec<&String> = ids.iter().filter(|id| **id != prober_id).collect();
    // One stopped from the CLI of another process (through the row), one
    // over REST (at once).
    let data = hub.dir.path().join("data");
    let (ok, out, err) = super::cli_sync(&[
        "app",
        "stop",
        "--run",
        live[0],
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    assert!(ok, "{out}{err}");
    let (status, body) = admin(
        &hub,
        reqwest::Method::POST,
        &format!("/api/v1/runs/{}/stop", live[1]),
        None,
    )
    .await;
    assert_eq!(
        (status, body["stopping"].clone()),
        (202, json!(true)),
        "{body}"
    );
    for id in &live {
        let end = ended(&hub, id).await;
        assert_eq!(
            (end["state"].clone(), end["reason"].clone()),
            (json!("failed"), json!("stopped")),
            "{end}"
        );
    }
    let (status, body) = admin(
        &hub,
        reqwest::Method::POST,
        &format!("/api/v1/runs/{}/stop", live[1]),
        None,
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (409, json!("run_not_live")),
        "{body}"
    );
    let (status, _) = admin(
        &hub,
        reqwest::Method::GET,
        &format!("/api/v1/runs/{}", uuid::Uuid::new_v4()),
        None,
    )
    .await;
    assert_eq!(status, 404);
    let (status, body) = admin(
        &hub,
        reqwest::Method::POST,
        "/api/v1/cards/nothing-here/runs",
        None,
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (404, json!("card_not_found")),
        "{body}"
    );
    let (status, _) = hub.post("/api/v1/cards/roles/runs", &json!({})).await;
    assert_eq!(status, 401, "runs are the operator's");
}
