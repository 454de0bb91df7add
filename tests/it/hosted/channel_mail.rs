//! Channel messages reach apps (ADR 0031 §7a, §8, §9) through the real
//! hub, runner and broker: an agent's message in a channel a hosted app
//! reads is in the app's inbox as `app/message/received` and counts in no
//! delivery; an app without `events:subscribe` or a suspended one gets no
//! copy; a beatless app in a channel is woken by it and answers, in order,
//! one run at a time; `list_connections` and `reply_policy: members` count
//! the channel's readers.

use serde_json::{json, Value};
use switchboard::client::AgentClient;
use switchboard::protocol::tasks::{AgentTaskRequest, TaskRequestParams};
use uuid::Uuid;

use super::invites::app_with_rooms;
use super::rooms::line;
use super::runs::{admin, ended, install_over_rest, start};
use super::{card, card_with};
use crate::support::agents::{agent, next_of, send};
use crate::support::hub::ADMIN_TOKEN;
use crate::support::world::{channel, grant, on_channel, person, principal, space};
use crate::support::TestHub;

/// Waits for a message from the channel, prints it and its connections.
const EAR: &str = r#"
from sb import out, text
page = text("wait_for_message", {"timeout": 30})
while not any(e["type"] == "app/message/received" for e in page["events"]):
    page = text("wait_for_message", {"timeout": 30, "after_id": page["nextAfter"]})
got = [e for e in page["events"] if e["type"] == "app/message/received"][0]
out(got=got, connections=text("list_connections"))
"#;

/// How many copies of `message` the hub's log holds for `audience`, by
/// type (read from its SQLite file beside the running hub).
fn copies(hub: &TestHub, audience: Uuid, message: Uuid) -> Vec<String> {
    let db = hub.dir.path().join("data").join("switchboard.db");
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
    let conn = rusqlite::Connection::open_with_flags(db, flags).expect("open the hub's database");
    let mut q = conn
        .prepare(
            "SELECT p.type FROM event_index i JOIN event_streams s ON s.stream = i.stream \
             JOIN event_payloads p ON p.id = i.payload WHERE s.audience = ?1 AND p.message_id = ?2",
        )
        .unwrap();
    q.query_map([audience.to_string(), message.to_string()], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

async fn suspend(hub: &TestHub, app: Uuid) {
    let path = format!("/api/v1/apps/{app}/installation/suspend");
    let (status, body) = admin(hub, reqwest::Method::POST, &path, None).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn a_channel_message_reaches_the_apps_that_read_it_and_no_other() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let s = space(&hub, "games").await;
    let lobby = channel(&hub, ADMIN_TOKEN, s, "lobby").await;
    let rooms = format!("{lobby} -");
    let prims = ["wait_for_message", "list_connections"];
    let (ear, _) = app_with_rooms(&hub, "ear", &prims, EAR, &rooms).await;
    let (deaf, _) = app_with_rooms(&hub, "deaf", &["rooms"], "pass\n", &rooms).await;
    let (sleepy, _) = app_with_rooms(&hub, "sleepy", &prims, "pass\n", &rooms).await;
    let alice = agent(&hub, "alice").await;
    let sam = person(&hub, "sam").await;
    for (who, level) in [
        (ear, "read"),
        (deaf, "read"),
        (sleepy, "read"),
        (alice.id, "write"),
        (sam.id, "read"),
    ] {
        grant(&hub, ADMIN_TOKEN, principal(who), on_channel(lobby), level).await;
    }
    suspend(&hub, sleepy).await;
    let run = start(&hub, "ear").await;

    let a = AgentClient::connect(&hub.base, &alice.key).await.unwrap();
    let sent = send(&a, lobby, "hello apps").await;
    assert_eq!(
        sent.delivery.recipients,
        Some(1),
        "sam alone: no app counts in the delivery"
    );
    let end = ended(&hub, run["runId"].as_str().unwrap()).await;
    assert_eq!(end["exitCode"], 0, "{end}");
    let log = end["log"].as_str().unwrap();
    let got = line(log, "got");
    assert_eq!(got["type"], "app/message/received");
    let m = &got["payload"]["message"];
    assert_eq!(m["id"], json!(sent.message.id));
    assert_eq!(m["conversationId"], json!(lobby));
    assert_eq!(m["parts"][0]["text"], "hello apps");

    let id = sent.message.id;
    assert_eq!(copies(&hub, ear, id), ["app/message/received"]);
    assert!(copies(&hub, deaf, id).is_empty(), "no events:subscribe");
    assert!(copies(&hub, sleepy, id).is_empty(), "suspended");
    assert!(copies(&hub, alice.id, id).is_empty(), "not the sender");
    assert_eq!(copies(&hub, sam.id, id), ["person/message/received"]);

    let mut readers = vec![alice.id, sam.id, deaf, sleepy];
    readers.sort();
    assert_eq!(
        line(log, "connections")["connections"],
        json!(readers),
        "the channel's other readers, by id"
    );
}

/// Answers every channel message in its inbox in the channel, in order,
/// holding the app's `live` register (another live run would hold it).
const ECHO: &str = r#"
from sb import out, text
alone = text("coord", {"key": "live", "expect": None, "value": "1"})["swapped"]
page = text("read_inbox")
handled = []
for e in page["events"]:
    if e["type"] == "app/message/received":
        m = e["payload"]["message"]
        said = m["parts"][0]["text"]
        text("send_message", {"to": m["conversationId"], "text": "echo " + said})
        handled.append(said)
text("read_inbox", {"ack": page["nextAfter"], "after_id": page["nextAfter"]})
text("coord", {"key": "live", "expect": "1", "value": None})
out(alone=alone, handled=handled)
"#;

#[tokio::test]
async fn a_beatless_app_in_a_channel_is_woken_by_its_messages_and_answers_in_order() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let s = space(&hub, "games").await;
    let lobby = channel(&hub, ADMIN_TOKEN, s, "lobby").await;
    let prims = ["beatless", "read_inbox", "send_message", "coord"];
    install_over_rest(&hub, &card("echo", &prims, ECHO, &[])).await;
    let first = start(&hub, "echo").await;
    ended(&hub, first["runId"].as_str().unwrap()).await;
    let app: Uuid = first["appId"].as_str().unwrap().parse().unwrap();
    let alice = agent(&hub, "alice").await;
    for who in [app, alice.id] {
        grant(
            &hub,
            ADMIN_TOKEN,
            principal(who),
            on_channel(lobby),
            "write",
        )
        .await;
    }
    let a = AgentClient::connect(&hub.base, &alice.key).await.unwrap();
    let mut events = a.connection.notifications().expect("notifications");
    send(&a, lobby, "one").await;
    send(&a, lobby, "two").await;
    let mut echoes = Vec::new();
    while echoes.len() < 2 {
        let got = next_of(&mut events, "agent/message/received").await;
        let m = &got["payload"]["message"];
        if m["senderId"] == json!(app) {
            echoes.push(m["parts"][0]["text"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(echoes, ["echo one", "echo two"], "in order, each once");
    let handled = handled_by_runs(&hub, "echo").await;
    assert_eq!(handled, [json!("one"), json!("two")], "each handled once");
}

/// Every run of `card` once all ended (none overlapped another, each
/// exited 0): what each handled, by start.
async fn handled_by_runs(hub: &TestHub, card: &str) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    let path = format!("/api/v1/runs?cardId={card}");
    let runs = loop {
        let (_, list) = admin(hub, reqwest::Method::GET, &path, None).await;
        let runs = list["runs"].as_array().unwrap().clone();
        if runs.iter().all(|r| r["state"] == "exited") {
            break runs;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "a run did not end: {list}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(runs.len() >= 2, "a message started a run: {runs:?}");
    let mut handled = Vec::new();
    for r in &runs {
        let run = ended(hub, r["runId"].as_str().unwrap()).await;
        assert_eq!(run["exitCode"], 0, "{run}");
        let log = run["log"].as_str().unwrap();
        assert_eq!(
            line(log, "alone"),
            true,
            "two runs were live at once: {run}"
        );
        handled.push((
            run["createdAt"].as_str().unwrap().to_string(),
            line(log, "handled"),
        ));
    }
    handled.sort_by(|x, y| x.0.cmp(&y.0));
    handled
        .into_iter()
        .flat_map(|(_, h)| h.as_array().unwrap().clone())
        .collect()
}

#[tokio::test]
async fn members_accepts_a_channel_co_reader_and_refuses_a_stranger() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let s = space(&hub, "games").await;
    let lobby = channel(&hub, ADMIN_TOKEN, s, "lobby").await;
    let door = card_with(
        "door",
        &["whoami"],
        "pass\n",
        &[],
        json!({"reply_policy": "members"}),
        None,
    );
    install_over_rest(&hub, &door).await;
    let run = start(&hub, "door").await;
    ended(&hub, run["runId"].as_str().unwrap()).await;
    let app: Uuid = run["appId"].as_str().unwrap().parse().unwrap();
    let (bob, carol) = (agent(&hub, "bob").await, agent(&hub, "carol").await);
    for who in [app, bob.id] {
        grant(&hub, ADMIN_TOKEN, principal(who), on_channel(lobby), "read").await;
    }
    let request = || TaskRequestParams {
        app_id: app,
        invited_agent_ids: vec![],
        initial_conversation: None,
    };
    let c = AgentClient::connect(&hub.base, &carol.key).await.unwrap();
    let refused = c
        .call::<AgentTaskRequest>(request())
        .await
        .expect_err("a stranger is refused");
    assert!(
        format!("{refused:?}").contains("not_a_member"),
        "{refused:?}"
    );
    let b = AgentClient::connect(&hub.base, &bob.key).await.unwrap();
    let accepted = b
        .call::<AgentTaskRequest>(request())
        .await
        .expect("a reader of the app's channel is a member");
    assert_eq!(accepted.task.app_id, app);
}
