//! Live delivery of events other nodes committed (ADR 0034 §3).
//!
//! Three tasks, in `nats` mode only: one takes wake-ups from `sb.wake` and
//! hints the subscriptions and long-polls of their audiences; one takes
//! ephemeral events from `sb.ephemeral` (one message per send, listing its
//! audiences) and sends them to this node's sockets of those audiences; one reads, every `cluster.poll_interval_ms`, the last seq of
//! each audience with a socket or a long-poll here, and hints those behind
//! it. Wake-ups are only the fast path: with every one lost, an event
//! reaches a live socket at most one poll interval (plus one log read)
//! after its commit.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;
use tracing::warn;
use uuid::Uuid;

use super::EventBus;
use crate::cluster::{self, ephemeral, subjects, wake, Cluster, Kind};
use crate::store::DynStore;
use crate::telemetry::names;

/// What the three tasks need.
#[derive(Clone)]
pub struct Remote {
    pub bus: Arc<EventBus>,
    pub cluster: Arc<Cluster>,
    pub store: DynStore,
    pub poll_interval: Duration,
    pub shutdown: CancellationToken,
}

impl Remote {
    /// Starts the tasks on `tasks`; nothing in `single` mode.
    pub async fn spawn(self, tasks: &tokio_util::task::TaskTracker) {
        if self.cluster.client().is_none() {
            return;
        }
        if let Some(wakes) = self.cluster.subscribe(subjects::WAKE).await {
            tasks.spawn(self.clone().receive_wakes(wakes));
        }
        if let Some(ephemerals) = self.cluster.subscribe(subjects::EPHEMERAL).await {
            tasks.spawn(self.clone().receive_ephemerals(ephemerals));
        }
        tasks.spawn(self.poll());
    }

    async fn receive_wakes(self, mut wakes: async_nats::Subscriber) {
        loop {
            let message = tokio::select! {
                m = wakes.next() => m,
                _ = self.shutdown.cancelled() => return,
            };
            let Some(message) = message else { return };
            cluster::count_received(Kind::Wake);
            let Some(heads) = wake::decode(&message.payload) else {
                cluster::count_undecodable(Kind::Wake);
                continue;
            };
            self.bus.hint(&heads);
            self.bus.notify_waiters(heads.iter().map(|(a, _)| *a));
        }
    }

    async fn receive_ephemerals(self, mut ephemerals: async_nats::Subscriber) {
        loop {
            let message = tokio::select! {
                m = ephemerals.next() => m,
                _ = self.shutdown.cancelled() => return,
            };
            let Some(message) = message else { return };
            cluster::count_received(Kind::Ephemeral);
            match ephemeral::decode(&message.payload) {
                Some(batch) => self.bus.deliver_remote_ephemeral(&batch),
                None => cluster::count_undecodable(Kind::Ephemeral),
            }
        }
    }

    /// The periodic check: one read of the heads of every audience with a
    /// socket or a long-poll here, a hint to the sockets behind, a wake to
    /// the long-polls whose audience's log moved since the last check (or
    /// that are new since it).
    async fn poll(self) {
        let mut tick = tokio::time::interval(self.poll_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut waited_heads: HashMap<Uuid, u64> = HashMap::new();
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = self.shutdown.cancelled() => return,
            }
            let waited: HashSet<Uuid> = self.bus.waited_audiences().into_iter().collect();
            let mut audiences = self.bus.live_audiences();
            audiences.extend(waited.iter().filter(|a| !self.bus.is_live(**a)));
            if audiences.is_empty() {
                waited_heads.clear();
                continue;
            }
            let heads = match self.store.stream_heads(&audiences).await {
                Ok(h) => h,
                Err(e) => {
                    warn!(error = %e, "the cluster's periodic log check failed; trying again at the next");
                    continue;
                }
            };
            let behind = self.bus.hint(&heads);
            if behind > 0 {
                metrics::counter!(names::CLUSTER_POLL_CATCHUPS).increment(behind as u64);
            }
            let mut moved = Vec::new();
            let mut next = HashMap::with_capacity(waited.len());
            for (audience, seq) in heads {
                if waited.contains(&audience) {
                    if waited_heads.get(&audience) != Some(&seq) {
                        moved.push(audience);
                    }
                    next.insert(audience, seq);
                }
            }
            waited_heads = next;
            self.bus.notify_waiters(moved);
        }
    }
}
