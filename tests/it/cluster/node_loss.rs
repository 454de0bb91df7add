//! Node loss (issue 19 part 5): a node SIGKILLed holding a claimed job
//! leaves it to another node once its lock expires; a node SIGKILLed under
//! a stream of events leaves its clients to resume on another node with no
//! gap and no duplicate.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{json, Value};
use switchboard::client::AgentClient;
use switchboard::domain::task::TaskState;
use switchboard::protocol::tasks::{
    AgentTaskGet, AgentTaskRequest, TaskGetParams, TaskRequestParams,
};
use uuid::Uuid;

use super::harness::ClusterHarness;
use super::hook_nodes::with_env;
use crate::support::agents::{agent, direct, send};
use crate::support::event_reader::EventReader;
use crate::support::RawSocket;

/// Short locks, so a dead node's claims lapse within the test (the lock
/// must exceed the interaction timeout plus the longest hook plus the grace).
const LOCK_MS: u64 = 3_000;
const SHORT_LOCKS: &[(&str, &str)] = &[
    ("SWITCHBOARD_HOOKS__MAX_TIMEOUT_MS", "2000"),
    ("SWITCHBOARD_JOBS__INLINE_GRACE_MS", "500"),
    ("SWITCHBOARD_APP__INTERACTION_TIMEOUT_MS", "400"),
    ("SWITCHBOARD_JOBS__LOCK_MS", "3000"),
];

fn task_hook() -> Value {
    json!({
        "name": "Gatekeeper",
        "description": "A test app",
        "limits": { "maxParticipants": 4 },
        "conversations": [{ "key": "all", "name": "Everyone", "participantFilter": "all" }],
        "hooks": {
            "task_create": {"kind": "hook", "timeoutMs": 1500},
            "message_authorize": {"kind": "forwardAllExceptSender"},
            "dispatch_authorize": {"kind": "grant"}
        }
    })
}

#[tokio::test]
async fn a_sigkilled_nodes_claimed_job_is_taken_over_once_its_lock_expires() {
    let mut nodes = ClusterHarness::start_with(3, with_env(SHORT_LOCKS)).await;
    let (app_id, app_key) = nodes.node(1).register_app(&task_hook()).await;
    let app_id: Uuid = app_id.parse().unwrap();
    let initiator = agent(nodes.node(1), "initiator").await;
    let invited = agent(nodes.node(1), "invited").await;
    let mut app = RawSocket::connect_app(&nodes.node(1).ws_url(), &app_key).await;

    // Node 3 stores the gate job claimed for itself and calls the app.
    let on_node_3 = AgentClient::connect(&nodes.node(3).base, &initiator.key)
        .await
        .unwrap();
    let request = on_node_3.call::<AgentTaskRequest>(TaskRequestParams {
        app_id,
        invited_agent_ids: vec![invited.id],
        initial_conversation: None,
    });
    let (first, gate_call) = tokio::select! {
        r = request => panic!("the gate answered before node 3 was killed: {r:?}"),
        call = app.recv_request() => (Instant::now(), call),
    };
    nodes.kill(3).await;
    let task_id = gate_call["params"]["task"]["id"].clone();
    assert_eq!(gate_call["method"], json!("app/task/create"));

    // Unanswered, the call of the dead node goes nowhere; once node 3's lock
    // lapses, another node's runner claims the job and asks again.
    let again = app.recv_request().await;
    assert!(
        first.elapsed() >= Duration::from_millis(LOCK_MS - 500),
        "the job ran again before node 3's lock expired: {:?}",
        first.elapsed()
    );
    assert_eq!(again["method"], json!("app/task/create"));
    assert_eq!(
        again["params"]["task"]["id"], task_id,
        "the same task's job"
    );
    app.send_json(&json!({"jsonrpc": "2.0", "id": again["id"], "result": {"verdict": {"decision": "Accept"}}}))
        .await;

    let on_node_2 = AgentClient::connect(&nodes.node(2).base, &initiator.key)
        .await
        .unwrap();
    let task_id: Uuid = serde_json::from_value(task_id).unwrap();
    let state = || async {
        on_node_2
            .call::<AgentTaskGet>(TaskGetParams { task_id })
            .await
            .unwrap()
            .task
            .state
    };
    super::hook_nodes::eventually("the taken-over gate's verdict", || async {
        state().await != TaskState::Waiting
    })
    .await;
    assert_eq!(state().await, TaskState::Active, "accepted, once");
}

/// Events in the stream of the node-loss test.
const STREAM: usize = 10_000;

#[tokio::test]
async fn a_sigkilled_nodes_clients_resume_on_another_node_with_no_gap_and_no_duplicate() {
    let mut nodes = ClusterHarness::start(3).await;
    let sender = agent(nodes.node(1), "sender").await;
    let reader_agent = agent(nodes.node(1), "reader").await;
    let s = AgentClient::connect(&nodes.node(1).base, &sender.key)
        .await
        .unwrap();
    let dm = direct(&s, reader_agent.id).await;
    let (mut reader, hello) = EventReader::connect(nodes.node(3), &reader_agent.key, None).await;
    let epoch = hello["result"]["events"]["syncEpoch"]
        .as_str()
        .unwrap()
        .to_string();
    let base = reader.events.len();

    let sending = tokio::spawn(async move {
        futures_util::stream::iter(0..STREAM)
            .map(|i| {
                let s = &s;
                async move { send(s, dm, &format!("m{i}")).await.message.id }
            })
            .buffered(16)
            .collect::<Vec<Uuid>>()
            .await
    });

    // A tenth in, node 3 dies under the reader.
    reader.until(base + STREAM / 10).await;
    nodes.kill(3).await;
    let seen_on_3 = reader.events.clone();
    let last = seen_on_3.last().unwrap()["seq"].as_u64().unwrap();
    let (resumed, _) =
        EventReader::connect(nodes.node(2), &reader_agent.key, Some((last, &epoch))).await;
    // Read while the sender still sends. Left unread until the stream is
    // sent, the socket's TCP buffers fill (the rest of the stream is a few
    // MB), node 2's writer blocks on it, and past
    // `gateway.heartbeat_timeout_ms` the hub gives the socket up: the test
    // then failed whenever the sends outlasted that on a loaded machine.
    let on_3 = total_messages(&seen_on_3);
    let reading = tokio::spawn(async move {
        let mut resumed = resumed;
        while total_messages(&resumed.events) < STREAM - on_3 {
            let n = resumed.events.len() + 1;
            resumed.until(n).await;
        }
        resumed.events
    });
    let sent = sending.await.unwrap();
    let resumed = reading.await.unwrap();

    let all: Vec<&Value> = seen_on_3.iter().chain(resumed.iter()).collect();
    let seqs: Vec<u64> = all.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    let first = seqs[0];
    let expected: Vec<u64> = (first..first + seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "no gap, no duplicate, in order");
    let ids: HashSet<&str> = all.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), all.len(), "each event id once");
    let received: Vec<Uuid> = all
        .iter()
        .filter(|e| e["type"] == json!("agent/message/received"))
        .map(|e| serde_json::from_value(e["payload"]["message"]["id"].clone()).unwrap())
        .collect();
    assert_eq!(received.len(), STREAM, "every message once");
    assert_eq!(
        received.iter().collect::<HashSet<_>>(),
        sent.iter().collect::<HashSet<_>>(),
        "the messages sent, each once"
    );
}

/// The message events among these.
fn total_messages(events: &[Value]) -> usize {
    events
        .iter()
        .filter(|e| e["type"] == json!("agent/message/received"))
        .count()
}
