//! Beatless runs (ADR 0031 §8): a beatless card has no long-running
//! process; an agent's message reaching the app starts a run (the
//! `hosted_wake` job written with the message's verdict), whose entry reads
//! its mail from the acked seq, answers it and acknowledges it. Two
//! messages sent together are answered in order, one run at a time.

use std::time::Duration;

use serde_json::{json, Value};
use switchboard::client::AgentClient;
use switchboard::protocol::tasks::{AgentTaskRequest, TaskRequestParams};
use tokio::time::Instant;

use super::card;
use super::runs::{admin, ended, install_over_rest, start};
use crate::support::agents::{agent, next_of, send};
use crate::support::TestHub;

/// Claims the app's `live` register (another live run would hold it),
/// answers every message in its inbox, acknowledges, lets go.
const BEAT: &str = r#"
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
async fn a_beatless_app_is_started_by_its_mail_and_answers_in_order_one_run_at_a_time() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let c = card(
        "beat",
        &["beatless", "read_inbox", "send_message", "coord"],
        BEAT,
        &[],
    );
    install_over_rest(&hub, &c).await;
    // The operator's first start makes the app; it finds no mail.
    let first = start(&hub, "beat").await;
    let first_end = ended(&hub, first["runId"].as_str().unwrap()).await;
    assert_eq!(first_end["exitCode"], 0, "{first_end}");
    let app_id: uuid::Uuid = first["appId"].as_str().unwrap().parse().unwrap();

    let (alice, bob) = (agent(&hub, "alice").await, agent(&hub, "bob").await);
    let a = AgentClient::connect(&hub.base, &alice.key).await.unwrap();
    let b = AgentClient::connect(&hub.base, &bob.key).await.unwrap();
    let mut a_events = a.connection.notifications().expect("notifications");
    let mut b_events = b.connection.notifications().expect("notifications");
    a.call::<AgentTaskRequest>(TaskRequestParams {
        app_id,
        invited_agent_ids: vec![bob.id],
        initial_conversation: None,
    })
    .await
    .unwrap();
    let joined = next_of(&mut b_events, "agent/conversation/created").await;
    let room: uuid::Uuid = joined["payload"]["conversation"]["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    // No message yet: nothing woke the app.
    let (_, runs) = admin(&hub, reqwest::Method::GET, "/api/v1/runs?cardId=beat", None).await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");

    send(&b, room, "one").await;
    send(&b, room, "two").await;
    let mut echoes = Vec::new();
    while echoes.len() < 2 {
        let got = next_of(&mut a_events, "agent/message/received").await;
        let m = &got["payload"]["message"];
        if m["senderId"] == json!(app_id) {
            echoes.push(m["parts"][0]["text"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(echoes, ["echo one", "echo two"], "in order, each once");

    // Every woken run ends by itself; none overlapped another.
    let deadline = Instant::now() + Duration::from_secs(60);
    let runs = loop {
        let (_, list) = admin(&hub, reqwest::Method::GET, "/api/v1/runs?cardId=beat", None).await;
        let runs = list["runs"].as_array().unwrap().clone();
        if runs.iter().all(|r| r["state"] == "exited") {
            break runs;
        }
        assert!(Instant::now() < deadline, "a woken run did not end: {list}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(runs.len() >= 2, "a message started a run: {runs:?}");
    let mut handled = Vec::new();
    for r in &runs {
        let (_, run) = admin(
            &hub,
            reqwest::Method::GET,
            &format!("/api/v1/runs/{}", r["runId"].as_str().unwrap()),
            None,
        )
        .await;
        assert_eq!(run["exitCode"], 0, "{run}");
        let line: Value = run["log"]
            .as_str()
            .unwrap()
            .lines()
            .find_map(|l| serde_json::from_str(l).ok())
            .unwrap_or_else(|| panic!("{run}"));
        assert_eq!(line["alone"], true, "two runs were live at once: {run}");
        handled.push((
            run["createdAt"].as_str().unwrap().to_string(),
            line["handled"].clone(),
        ));
    }
    handled.sort_by(|x, y| x.0.cmp(&y.0));
    let all: Vec<Value> = handled
        .into_iter()
        .flat_map(|(_, h)| h.as_array().unwrap().clone())
        .collect();
    assert_eq!(
        all,
        [json!("one"), json!("two")],
        "each message handled once"
    );
}
