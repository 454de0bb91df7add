//! Live delivery across nodes (ADR 0034 §3): a wake-up on NATS after each
//! commit, the periodic log check when wake-ups are lost, ephemeral events
//! and long-polls on another node than the writer's.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchboard::client::{AgentClient, Notification};
use switchboard::protocol::conversations::{
    AgentConversationCreate, AgentTypingSend, ConversationCreateParams, NewConversationKind,
    TypingSendParams,
};
use tokio::sync::mpsc::UnboundedReceiver;
use uuid::Uuid;

use super::harness::{ClusterHarness, Settings};
use crate::support::agents::{agent, expect_sequence, next_of, send, send_many, Agent};

/// The group's members, two on each node, connected to their node.
pub(super) struct Spread {
    pub sender: AgentClient,
    pub group: Uuid,
    pub members: Vec<Agent>,
    pub clients: Vec<AgentClient>,
    pub streams: Vec<UnboundedReceiver<Notification>>,
    /// The node each member is connected to.
    pub nodes: Vec<usize>,
}

/// An agent on node 1 creates a group of six members, two connected to
/// each node; every member has its first event (the group was created)
/// before this returns, so every socket is live.
pub(super) async fn spread(cluster: &ClusterHarness) -> Spread {
    let sender_agent = agent(cluster.node(1), "sender").await;
    let mut members = Vec::new();
    let mut nodes = Vec::new();
    for i in 0..6 {
        let node = 1 + i % 3;
        members.push(agent(cluster.node(node), &format!("member-{i}")).await);
        nodes.push(node);
    }
    let mut clients = Vec::new();
    let mut streams = Vec::new();
    for (m, node) in members.iter().zip(&nodes) {
        let c = AgentClient::connect(&cluster.node(*node).base, &m.key)
            .await
            .unwrap();
        streams.push(c.connection.notifications().unwrap());
        clients.push(c);
    }
    let sender = AgentClient::connect(&cluster.node(1).base, &sender_agent.key)
        .await
        .unwrap();
    let group = sender
        .call::<AgentConversationCreate>(ConversationCreateParams {
            kind: NewConversationKind::Group,
            participants: members.iter().map(|m| m.id).collect(),
            name: Some("spread".into()),
        })
        .await
        .unwrap()
        .conversation
        .id;
    for rx in &mut streams {
        expect_sequence(rx, 0, 1).await;
    }
    Spread {
        sender,
        group,
        members,
        clients,
        streams,
        nodes,
    }
}

/// The message ids of received message events, in arrival order, after
/// checking that their conversation seqs only grow.
fn message_order(events: &[Value]) -> Vec<String> {
    let mut last = 0;
    events
        .iter()
        .map(|e| {
            let m = &e["payload"]["message"];
            let seq = m["seq"].as_u64().expect("a message event");
            assert!(seq > last, "messages arrive in conversation order");
            last = seq;
            m["id"].as_str().unwrap().to_string()
        })
        .collect()
}

/// The first check: all members receive, in order, with the
/// periodic check too slow to matter, so the wake-ups did it.
#[tokio::test]
async fn a_group_spread_over_three_nodes_receives_every_message_in_order() {
    const MESSAGES: usize = 120;
    let cluster = ClusterHarness::start_with(
        3,
        Settings {
            // Slower than expect_sequence's deadline: only wake-ups deliver.
            poll_interval_ms: 600_000,
            ..Settings::default()
        },
    )
    .await;
    let mut s = spread(&cluster).await;
    send_many(&s.sender, s.group, 0, MESSAGES, 8).await;
    let mut orders = Vec::new();
    for rx in &mut s.streams {
        let events = expect_sequence(rx, 1, MESSAGES as u64).await;
        orders.push(message_order(&events));
    }
    for (order, node) in orders.iter().zip(&s.nodes) {
        assert_eq!(
            order, &orders[0],
            "a member on node {node} saw another order"
        );
    }
    for n in 2..=3 {
        let wakes = cluster
            .node(n)
            .metric(
                "switchboard_cluster_messages_total",
                "direction=\"received\",kind=\"wake\"",
            )
            .await;
        assert!(wakes > 0.0, "node {n} took no wake-up from NATS");
    }
    drop(s.clients);
}

/// The second check: NATS stops mid-stream; every event still
/// arrives, once and in order, each within the documented bound (one poll
/// interval plus a log read), and after NATS is back too.
#[tokio::test]
async fn with_nats_stopped_delivery_goes_on_by_polling_and_nothing_is_lost() {
    const BEFORE: usize = 40;
    const DURING: usize = 12;
    const AFTER: usize = 20;
    let settings = Settings::default();
    // The bound of ADR 0034 §3, with room for a loaded test machine.
    let bound = Duration::from_millis(settings.poll_interval_ms) + Duration::from_secs(3);
    let mut cluster = ClusterHarness::start_with(3, settings).await;
    let mut s = spread(&cluster).await;
    let mut seen: Vec<HashSet<String>> = vec![HashSet::new(); s.members.len()];
    let mut record = |i: usize, events: Vec<Value>| {
        for e in events {
            assert!(
                seen[i].insert(e["id"].as_str().unwrap().to_string()),
                "event delivered twice"
            );
        }
    };

    send_many(&s.sender, s.group, 0, BEFORE, 4).await;
    for (i, rx) in s.streams.iter_mut().enumerate() {
        record(i, expect_sequence(rx, 1, BEFORE as u64).await);
    }

    cluster.stop_nats().await;
    let mut at = 1 + BEFORE as u64;
    for k in 0..DURING {
        let sent = Instant::now();
        send(&s.sender, s.group, &format!("during-{k}")).await;
        for (i, rx) in s.streams.iter_mut().enumerate() {
            let events = expect_sequence(rx, at, 1).await;
            let took = sent.elapsed();
            assert!(
                took <= bound,
                "member {i} on node {} got an event {took:?} after its send (bound {bound:?})",
                s.nodes[i]
            );
            record(i, events);
        }
        at += 1;
    }
    for n in 2..=3 {
        let catchups = cluster
            .node(n)
            .metric("switchboard_cluster_poll_catchups_total", "")
            .await;
        assert!(catchups > 0.0, "node {n} delivered without its log check");
    }

    cluster.start_nats().await;
    send_many(&s.sender, s.group, 0, AFTER, 4).await;
    for (i, rx) in s.streams.iter_mut().enumerate() {
        record(i, expect_sequence(rx, at, AFTER as u64).await);
    }
    let total = 1 + BEFORE + DURING + AFTER;
    for (i, ids) in seen.iter().enumerate() {
        assert_eq!(ids.len() + 1, total, "member {i} lost events");
    }
    drop(s.clients);
}

/// Ephemeral events cross on NATS with their payload; a long-poll on node
/// 3 wakes for a message committed on node 1.
#[tokio::test]
async fn ephemeral_events_and_long_polls_reach_other_nodes() {
    let cluster = ClusterHarness::start_with(
        3,
        Settings {
            poll_interval_ms: 600_000,
            ..Settings::default()
        },
    )
    .await;
    let mut s = spread(&cluster).await;
    s.sender
        .call::<AgentTypingSend>(TypingSendParams {
            conversation_id: s.group,
        })
        .await
        .unwrap();
    for (rx, node) in s.streams.iter_mut().zip(&s.nodes) {
        let typing = next_of(rx, "agent/typing/received").await;
        assert_eq!(typing["ephemeral"], json!(true), "node {node}");
        assert_eq!(typing["payload"]["conversationId"], json!(s.group));
    }

    // Member 2 is on node 3: its long-poll there, a send on node 1.
    let (node3, key) = (cluster.node(3), s.members[2].key.clone());
    let poll = {
        let url = format!("{}/api/v1/events?after=1&wait=30", node3.base);
        let http = node3.http.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let body: Value = http
                .get(url)
                .bearer_auth(key)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            (body, started.elapsed())
        })
    };
    send(&s.sender, s.group, "wake the poll").await;
    let (body, took) = poll.await.unwrap();
    assert_eq!(
        body["events"][0]["payload"]["message"]["parts"][0]["text"],
        json!("wake the poll"),
        "{body}"
    );
    assert!(took < Duration::from_secs(20), "the poll waited {took:?}");
    drop(s.clients);
}
