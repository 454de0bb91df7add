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

/// Waits for the task, asks, and answers each player's message it reads
/// from its own inbox (`app/message/received`), acknowledging nothing.
const ECHO: &str = r#"
from sb import out, text

cursor = None
room = None
answered = 0
while answered < 2:
    params = {"timeout": 30}
    if cursor is not None:
        params["after_id"] = cursor
    page = text("wait_for_message", params)
    cursor = page["nextAfter"]
    for e in page["events"]:
        if e["type"] == "app/task/activated":
            room = e["payload"]["conversations"][0]["id"]
            text("send_message", {"to": room, "text": "say something"})
        elif e["type"] == "app/message/received":
            m = e["payload"]["message"]
            out(heard=m["parts"][0]["text"], sender=m["senderId"], room=m["conversationId"])
            text("send_message", {"to": room, "text": "heard: " + m["parts"][0]["text"]})
            answered += 1
"#;

#[tokio::test]
async fn an_agents_message_in_its_task_reaches_the_apps_inbox_as_app_message_received() {
    use crate::support::agents::{next_of, send};
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let c = card("echo", &["send_message", "wait_for_message"], ECHO, &[]);
    install_over_rest(&hub, &c).await;
    let run = start(&hub, "echo").await;
    let app_id: uuid::Uuid = run["appId"].as_str().unwrap().parse().unwrap();
    let (alice, bob) = (agent(&hub, "alice").await, agent(&hub, "bob").await);
    let a = AgentClient::connect(&hub.base, &alice.key).await.unwrap();
    let b = AgentClient::connect(&hub.base, &bob.key).await.unwrap();
    let mut a_events = a.connection.notifications().expect("notifications");
    a.call::<AgentTaskRequest>(TaskRequestParams {
        app_id,
        invited_agent_ids: vec![bob.id],
        initial_conversation: None,
    })
    .await
    .unwrap();
    let asked = next_of(&mut a_events, "agent/message/received").await;
    assert_eq!(
        asked["payload"]["message"]["parts"][0]["text"],
        "say something"
    );
    let room: uuid::Uuid = asked["payload"]["message"]["conversationId"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    send(&b, room, "first").await;
    let heard = next_of(&mut a_events, "agent/message/received").await;
    // alice receives bob's message (a recipient) before or after the app's
    // answer: take the app's.
    let heard = if heard["payload"]["message"]["senderId"] == serde_json::json!(app_id) {
        heard
    } else {
        next_of(&mut a_events, "agent/message/received").await
    };
    assert_eq!(
        heard["payload"]["message"]["parts"][0]["text"],
        "heard: first"
    );
    send(&a, room, "second").await;
    let end = ended(&hub, run["runId"].as_str().unwrap()).await;
    assert_eq!(end["exitCode"], 0, "{end}");
    let log = end["log"].as_str().unwrap();
    let heard: Vec<(String, String)> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v.get("heard").is_some())
        .map(|v| {
            assert_eq!(v["room"], serde_json::json!(room));
            (
                v["heard"].as_str().unwrap().to_string(),
                v["sender"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        heard,
        vec![
            ("first".to_string(), bob.id.to_string()),
            ("second".to_string(), alice.id.to_string())
        ],
        "in order, each once, never the app's own messages"
    );
}
