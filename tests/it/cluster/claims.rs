//! Jobs run once across the cluster through the database's claims (issue
//! 19 part 4): 1,000 leases expiring together on three nodes, each expiry
//! fired exactly once, counted in the durable log by lease id.

use std::collections::{HashMap, HashSet};

use futures_util::StreamExt;
use serde_json::Value;
use switchboard::client::AgentClient;
use switchboard::protocol::conversations::{
    AgentConversationCreate, ConversationCreateParams, NewConversationKind,
};
use switchboard::protocol::tasks::{AgentDispatchRequest, DispatchRequestParams};
use uuid::Uuid;

use super::harness::ClusterHarness;
use super::hook_nodes::{eventually, with_env};
use crate::support::agents::{agent, send, Agent};
use crate::support::event_reader::rest_events;

const RECIPIENTS: usize = 10;
const MESSAGES: usize = 100;
const EXPIRED: &str = "agent/dispatch/expired";

/// Every stored event of the agent, read page by page from the log.
async fn all_events(nodes: &ClusterHarness, node: usize, key: &str) -> Vec<Value> {
    let mut events = Vec::new();
    let mut after = 0u64;
    loop {
        let query = format!("after={after}&limit=1000");
        let (status, body) = rest_events(nodes.node(node), key, &query).await;
        assert_eq!(status, 200, "{body}");
        let page = body["events"].as_array().unwrap().clone();
        let Some(last) = page.last() else {
            return events;
        };
        after = last["seq"].as_u64().unwrap();
        events.extend(page);
    }
}

/// Expiry events in the recipients' logs, by lease id.
async fn expiries(nodes: &ClusterHarness, recipients: &[Agent]) -> HashMap<Uuid, usize> {
    let mut by_lease = HashMap::new();
    for (i, r) in recipients.iter().enumerate() {
        for e in all_events(nodes, i % 3 + 1, &r.key).await {
            if e["type"] == EXPIRED {
                let id: Uuid = e["payload"]["lease"]["leaseId"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                *by_lease.entry(id).or_default() += 1;
            }
        }
    }
    by_lease
}

async fn lease_expire_jobs_left(database_url: &str) -> i64 {
    use sqlx::Connection;
    let mut db = sqlx::PgConnection::connect(database_url).await.unwrap();
    sqlx::query_scalar("SELECT COUNT(*) FROM jobs WHERE kind = 'lease_expire'")
        .fetch_one(&mut db)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_thousand_concurrent_lease_expiries_on_three_nodes_each_fire_exactly_once() {
    let nodes = ClusterHarness::start_with(
        3,
        with_env(&[
            ("SWITCHBOARD_LEASES__DEFAULT_TIMEOUT_MS", "6000"),
            ("SWITCHBOARD_JOBS__POLL_INTERVAL_MS", "20"),
            ("SWITCHBOARD_JOBS__BATCH", "16"),
        ]),
    )
    .await;
    let sender = agent(nodes.node(1), "sender").await;
    let mut recipients = Vec::new();
    for i in 0..RECIPIENTS {
        recipients.push(agent(nodes.node(1), &format!("r{i}")).await);
    }
    let s = AgentClient::connect(&nodes.node(1).base, &sender.key)
        .await
        .unwrap();
    let group = s
        .call::<AgentConversationCreate>(ConversationCreateParams {
            kind: NewConversationKind::Group,
            participants: recipients.iter().map(|r| r.id).collect(),
            name: Some("contention".into()),
        })
        .await
        .unwrap()
        .conversation
        .id;
    let mut messages = Vec::new();
    for i in 0..MESSAGES {
        messages.push(send(&s, group, &format!("m{i}")).await.message.id);
    }

    // Every recipient, on its own node, leases every message at once.
    let mut clients = Vec::new();
    for (i, r) in recipients.iter().enumerate() {
        clients.push(
            AgentClient::connect(&nodes.node(i % 3 + 1).base, &r.key)
                .await
                .unwrap(),
        );
    }
    let requests = clients.iter().flat_map(|c| {
        messages.iter().map(move |m| async move {
            c.call::<AgentDispatchRequest>(DispatchRequestParams {
                conversation_id: group,
                message_id: *m,
            })
            .await
            .unwrap()
            .lease
            .lease_id
        })
    });
    let leased: HashSet<Uuid> = futures_util::stream::iter(requests)
        .buffer_unordered(64)
        .collect()
        .await;
    assert_eq!(leased.len(), RECIPIENTS * MESSAGES);

    eventually("every lease to expire", || async {
        lease_expire_jobs_left(&nodes.database_url).await == 0
            && expiries(&nodes, &recipients).await.len() == leased.len()
    })
    .await;
    // No expiry job is left to fire again: what the log holds now is final.
    let fired = expiries(&nodes, &recipients).await;
    let keys: HashSet<Uuid> = fired.keys().copied().collect();
    assert_eq!(keys, leased, "every lease expired, and only those");
    let twice: Vec<_> = fired.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "fired more than once: {twice:?}");

    // Each job ran once in all: a job run twice would count twice, even
    // where its second run found the lease expired already.
    let mut per_node = Vec::new();
    for i in 1..=3 {
        let filter = "kind=\"lease_expire\",outcome=\"done\"";
        per_node.push(nodes.node(i).metric("switchboard_jobs_total", filter).await);
    }
    assert_eq!(
        per_node.iter().sum::<f64>(),
        leased.len() as f64,
        "{per_node:?}"
    );
    assert!(
        per_node.iter().filter(|n| **n > 0.0).count() >= 2,
        "the nodes contended for the jobs: {per_node:?}"
    );
}
