//! Typing across nodes (ADR 0034 §3, amended 2026-12-02): one typing send
//! on node 1 is one message on `sb.ephemeral`, whatever the number of
//! readers, and reaches the readers on every node.

use std::collections::HashSet;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::json;
use switchboard::client::AgentClient;
use switchboard::cluster::ephemeral;
use switchboard::protocol::conversations::{AgentTypingSend, TypingSendParams};
use uuid::Uuid;

use super::delivery::spread;
use super::harness::{ClusterHarness, Settings};
use crate::support::agents::{agent, direct, next_of};

const SENDS: usize = 3;

async fn typing(client: &AgentClient, conversation: Uuid) {
    client
        .call::<AgentTypingSend>(TypingSendParams {
            conversation_id: conversation,
        })
        .await
        .unwrap();
}

/// The conversation a message on `sb.ephemeral` is about, and its
/// audiences.
fn read(message: &async_nats::Message) -> (Uuid, Uuid, HashSet<Uuid>) {
    let batch = ephemeral::decode(&message.payload).expect("a message this version reads");
    let conversation = batch.payload["conversationId"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("a typing payload");
    let audiences = batch.audiences.values().flatten().copied().collect();
    (batch.id, conversation, audiences)
}

#[tokio::test]
async fn a_typing_send_is_one_nats_message_and_reaches_readers_on_every_node() {
    let cluster = ClusterHarness::start_with(
        3,
        Settings {
            poll_interval_ms: 600_000,
            ..Settings::default()
        },
    )
    .await;
    let mut s = spread(&cluster).await;
    // The fence: a typing send in another conversation, after the group's.
    // NATS keeps one connection's messages in order, so once it is seen
    // every message node 1 published for the group's sends has been too.
    let outsider = agent(cluster.node(1), "outsider").await;
    let fence = direct(&s.sender, outsider.id).await;
    let watcher = async_nats::connect(cluster.nats.url.as_str())
        .await
        .unwrap();
    let mut seen = watcher
        .subscribe(switchboard::cluster::subjects::EPHEMERAL)
        .await
        .unwrap();
    watcher.flush().await.unwrap();

    for _ in 0..SENDS {
        typing(&s.sender, s.group).await;
    }
    typing(&s.sender, fence).await;

    let members: HashSet<Uuid> = s.members.iter().map(|m| m.id).collect();
    let mut group_ids = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let message = seen.next().await.expect("subscription open");
            let (id, conversation, audiences) = read(&message);
            if conversation == fence {
                assert_eq!(audiences, HashSet::from([outsider.id]));
                break;
            }
            assert_eq!(conversation, s.group);
            assert_eq!(audiences, members, "one message lists every reader");
            group_ids.push(id);
        }
    })
    .await
    .expect("the fence's message within the deadline");
    assert_eq!(
        group_ids.len(),
        SENDS,
        "one NATS message per typing send, not one per reader"
    );

    for (rx, node) in s.streams.iter_mut().zip(&s.nodes) {
        let mut got = Vec::new();
        for _ in 0..SENDS {
            let typing = next_of(rx, "agent/typing/received").await;
            assert_eq!(typing["ephemeral"], json!(true), "node {node}");
            assert_eq!(typing["payload"]["conversationId"], json!(s.group));
            assert_eq!(typing["payload"]["agentId"], json!(s.sender.agent_id()));
            got.push(typing["id"].as_str().unwrap().parse::<Uuid>().unwrap());
        }
        assert_eq!(
            got, group_ids,
            "a member on node {node}: each send once, in order"
        );
    }
    drop(s.clients);
}
