//! `bench --scenario cluster`: the fan-out of `fanout`, with the sender on
//! node 1 and the receivers spread round-robin over 1, 2 and 3 nodes, on one
//! throwaway PostgreSQL server and one throwaway NATS, in one run. One node
//! runs in single mode (the baseline, as `fanout --backend postgres`); two
//! and three run in nats mode, so a delivery to a receiver on another node
//! takes a NATS wake-up and that node's read of the log. The figure that
//! matters is each spread's throughput over one node's, within the run.

use std::time::Instant;

use futures_util::StreamExt;
use uuid::Uuid;

use super::report::Entry;
use super::scenarios::{
    base_url, new_agent, raw_agent, receive, send_text, stamp, start_hub, summarize, ws_url,
};
use super::stats::own_cpu_seconds;
use super::throwaway_nats::ThrowawayNats;
use crate::client::AgentClient;
use crate::config::ClusterMode;
use crate::protocol::conversations::{
    AgentConversationCreate, ConversationCreateParams, NewConversationKind,
};
use crate::server::Server;

/// How one cluster run is shaped.
pub struct ClusterRun {
    /// Receivers in the group.
    pub n: usize,
    pub deliveries: usize,
    pub inflight: usize,
    /// `--postgres-url`, or `None` for a fresh database on the throwaway
    /// server per spread.
    pub postgres_url: Option<String>,
}

/// One entry per spread (1, 2, 3 nodes), each with its ratio to one node.
pub async fn run(plan: &ClusterRun) -> anyhow::Result<Vec<Entry>> {
    let nats = ThrowawayNats::start().await?;
    let mut entries: Vec<Entry> = Vec::new();
    for nodes in [1usize, 2, 3] {
        let url = match &plan.postgres_url {
            Some(u) => u.clone(),
            None => super::throwaway_pg::database().await?,
        };
        let mut entry = spread(plan, nodes, &url, &nats.url).await?;
        if let Some(one) = entries.first() {
            entry.ratio("deliveries_per_second", one, "over_one_node");
        }
        entries.push(entry);
    }
    nats.stop().await;
    Ok(entries)
}

/// `nodes` hubs in this process on database `url`.
async fn start_nodes(
    plan: &ClusterRun,
    nodes: usize,
    url: &str,
    nats_url: &str,
) -> anyhow::Result<Vec<(Server, tempfile::TempDir)>> {
    let mut started = Vec::new();
    for i in 0..nodes {
        let node = start_hub(Some(url.to_string()), |c| {
            c.messages.max_group_participants = plan.n + 1;
            c.gateway.outbound_queue_capacity = 8192;
            c.storage.max_connections = 8;
            if nodes > 1 {
                c.cluster.mode = ClusterMode::Nats;
                c.cluster.nats_url = nats_url.to_string();
                c.cluster.node_id = format!("bench-{i}");
            }
        })
        .await?;
        started.push(node);
    }
    Ok(started)
}

async fn spread(
    plan: &ClusterRun,
    nodes: usize,
    url: &str,
    nats_url: &str,
) -> anyhow::Result<Entry> {
    let hubs = start_nodes(plan, nodes, url, nats_url).await?;
    let first = &hubs[0].0;
    let messages = (plan.deliveries / plan.n).max(1);
    let (_, sender_key) = new_agent(first, "sender").await?;
    let mut ids: Vec<Uuid> = Vec::new();
    let mut receivers = Vec::new();
    for i in 0..plan.n {
        let (id, key) = new_agent(first, &format!("r{i}")).await?;
        ids.push(id);
        let node = &hubs[i % nodes].0;
        receivers.push(raw_agent(&ws_url(node), &key, None).await?);
    }
    let sender = AgentClient::connect(&base_url(first), &sender_key).await?;
    let group = sender
        .call::<AgentConversationCreate>(ConversationCreateParams {
            kind: NewConversationKind::Group,
            participants: ids,
            name: Some("bench".into()),
        })
        .await?
        .conversation
        .id;
    let handles: Vec<_> = receivers
        .into_iter()
        .map(|ws| tokio::spawn(receive(ws, messages)))
        .collect();
    let cpu0 = own_cpu_seconds();
    let started = Instant::now();
    futures_util::stream::iter(0..messages)
        .map(|_| send_text(&sender, group, format!("{} {}", stamp(), "x".repeat(100))))
        .buffer_unordered(plan.inflight.max(1))
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut entry = Entry::new("cluster")
        .param("nodes", nodes)
        .param("mode", if nodes > 1 { "nats" } else { "single" })
        .param("n", plan.n)
        .param("messages", messages)
        .param("inflight", plan.inflight)
        .param("backend", "postgres");
    summarize(&mut entry, handles, started, messages * plan.n).await?;
    entry.result("cpu_seconds", own_cpu_seconds() - cpu0);
    drop(sender);
    for (hub, _dir) in hubs {
        hub.shutdown().await?;
    }
    Ok(entry)
}
