//! A suspended app's live run (ADR 0031 §5): the broker serves no
//! primitive once the installation is not active, also those (memory,
//! persona, `coord`) that call no decision of their own, and the refusal
//! is `capability_denied` naming the state.

use serde_json::Value;
use switchboard::client::AgentClient;
use switchboard::protocol::tasks::{AgentTaskRequest, TaskRequestParams};

use super::card;
use super::runs::{admin, ended, install_over_rest, start};
use crate::support::agents::{agent, next_of};
use crate::support::TestHub;

/// Waits for its task, says so in it (served while active), then
/// long-polls its inbox until a call is refused, and then tries the
/// primitives that call no decision.
const HELD: &str = r#"
import json
from sb import call, out, text
cursor = None
room = None
while True:
    params = {"timeout": 1}
    if cursor is not None:
        params["after_id"] = cursor
    r = call("wait_for_message", params)
    if not r["ok"]:
        out(refused=r)
        break
    page = json.loads(r["text"])
    cursor = page["nextAfter"]
    activated = [e for e in page["events"] if e["type"] == "app/task/activated"]
    if activated and room is None:
        room = activated[0]["payload"]["conversations"][0]["id"]
        text("send_message", {"to": room, "text": "served"})
out(recall=call("recall", {"key": "k"}))
out(coord=call("coord", {"key": "k", "expect": None, "value": "v"}))
out(persona=call("get_persona"))
"#;

fn logged(run: &Value, key: &str) -> Option<Value> {
    run["log"].as_str()?.lines().find_map(|l| {
        serde_json::from_str::<Value>(l)
            .ok()
            .and_then(|v| v.get(key).cloned())
    })
}

#[tokio::test]
async fn a_run_of_an_app_suspended_while_it_runs_is_served_nothing_more() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let c = card(
        "held",
        &[
            "wait_for_message",
            "send_message",
            "recall",
            "coord",
            "persona",
        ],
        HELD,
        &[],
    );
    install_over_rest(&hub, &c).await;
    let run = start(&hub, "held").await;
    let run_id = run["runId"].as_str().unwrap().to_string();
    let app_id = run["appId"].as_str().unwrap().to_string();
    // The run is served while active: its send reaches the task's agents.
    let (alice, bob) = (agent(&hub, "alice").await, agent(&hub, "bob").await);
    let a = AgentClient::connect(&hub.base, &alice.key).await.unwrap();
    let b = AgentClient::connect(&hub.base, &bob.key).await.unwrap();
    let mut b_events = b.connection.notifications().expect("notifications");
    a.call::<AgentTaskRequest>(TaskRequestParams {
        app_id: app_id.parse().unwrap(),
        invited_agent_ids: vec![bob.id],
        initial_conversation: None,
    })
    .await
    .unwrap();
    next_of(&mut b_events, "agent/message/received").await;
    let (status, body) = admin(
        &hub,
        reqwest::Method::POST,
        &format!("/api/v1/apps/{app_id}/installation/suspend"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let end = ended(&hub, &run_id).await;
    for key in ["refused", "recall", "coord", "persona"] {
        let r = logged(&end, key).unwrap_or_else(|| panic!("{key}: {end}"));
        assert_eq!(r["ok"], false, "{key}: {r}");
        assert_eq!(r["error"], "capability_denied", "{key}: {r}");
        assert!(
            r["message"].as_str().unwrap().contains("suspended"),
            "{key}: {r}"
        );
    }
}
