//! `list_connections` (ADR 0031 §6) in a hub-managed run: the principals
//! taking part in the app's rooms (its tasks' conversations), by id, each
//! once, paged.

use serde_json::Value;
use switchboard::client::AgentClient;
use switchboard::protocol::tasks::{AgentTaskRequest, TaskRequestParams};

use super::card;
use super::runs::{ended, install_over_rest, start};
use crate::support::agents::agent;
use crate::support::TestHub;

const CONNECTIONS: &str = r#"
from sb import call, out, text

cursor = None
tasks = 0
while tasks < 2:
    params = {"timeout": 30}
    if cursor is not None:
        params["after_id"] = cursor
    page = text("wait_for_message", params)
    cursor = page["nextAfter"]
    tasks += len([e for e in page["events"] if e["type"] == "app/task/activated"])
out(all=text("list_connections"))
first = text("list_connections", {"limit": 2})
out(first=first)
out(rest=text("list_connections", {"after": first["nextAfter"]}))
out(bad=call("list_connections", {"limit": 0}))
"#;

pub(super) fn line(log: &str, key: &str) -> Value {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v.get(key).is_some())
        .unwrap_or_else(|| panic!("no {key:?} in {log}"))[key]
        .clone()
}

fn ids(v: &Value) -> Vec<String> {
    v["connections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn list_connections_names_everyone_in_the_apps_rooms_once_by_id() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let c = card(
        "connections",
        &["list_connections", "wait_for_message"],
        CONNECTIONS,
        &[],
    );
    install_over_rest(&hub, &c).await;
    let run = start(&hub, "connections").await;
    let app_id: uuid::Uuid = run["appId"].as_str().unwrap().parse().unwrap();
    let (alice, bob, carol) = (
        agent(&hub, "alice").await,
        agent(&hub, "bob").await,
        agent(&hub, "carol").await,
    );
    // A stranger: in no task of the app.
    let _dave = agent(&hub, "dave").await;
    let a = AgentClient::connect(&hub.base, &alice.key).await.unwrap();
    // Two tasks: alice with bob, alice with carol (alice is in both).
    for invited in [bob.id, carol.id] {
        a.call::<AgentTaskRequest>(TaskRequestParams {
            app_id,
            invited_agent_ids: vec![invited],
            initial_conversation: None,
        })
        .await
        .unwrap();
    }
    let end = ended(&hub, run["runId"].as_str().unwrap()).await;
    assert_eq!(end["exitCode"], 0, "{end}");
    let log = end["log"].as_str().unwrap();
    let mut expected = vec![
        alice.id.to_string(),
        bob.id.to_string(),
        carol.id.to_string(),
    ];
    expected.sort();
    assert_eq!(ids(&line(log, "all")), expected, "each once, by id");
    let first = line(log, "first");
    assert_eq!(ids(&first), expected[..2]);
    assert_eq!(first["nextAfter"], Value::String(expected[1].clone()));
    assert_eq!(ids(&line(log, "rest")), expected[2..]);
    assert_eq!(line(log, "bad")["error"], "bad_request");
}
