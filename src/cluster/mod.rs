//! The node's link to the other nodes of a cluster (issue 19, ADR 0034).
//!
//! PostgreSQL is the one source of truth; NATS carries only signals: the
//! wake-ups that tell a node to read the log, ephemeral events, control
//! messages that close sockets and drop cached entries, and hook calls to
//! the node that holds an app's callback socket. Everything sent here is
//! at most once: a lost message delays (the periodic log check, the
//! database sweep), it never loses or admits anything.
//!
//! In `single` mode there is no client and publishing does nothing, so
//! callers need not ask which mode runs.

mod connect;
pub mod control;
pub mod ephemeral;
pub mod subjects;
pub mod wake;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info, warn};

use crate::config::{check_node_id, ClusterConfig, ClusterMode};
use crate::telemetry::names;

/// Messages waiting for the NATS client, at most. Publishing never waits:
/// past this the message is dropped and counted, which a wake-up or a
/// control message may be (the log check and the sweep make up for it).
const OUTBOX_CAPACITY: usize = 8_192;

/// The longest wait between two reconnect attempts: one server, so trying
/// often costs little, and a node back on NATS sooner delays less.
const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(1);

/// What a message is, for the metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Wake,
    Ephemeral,
    Control,
    Hook,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Wake => "wake",
            Kind::Ephemeral => "ephemeral",
            Kind::Control => "control",
            Kind::Hook => "hook",
        }
    }
}

struct Outgoing {
    kind: Kind,
    subject: String,
    payload: Bytes,
}

/// What the outbox carries: messages, and the marker a drain puts behind
/// them to learn when everything before it was handed to the client.
enum Outbound {
    Message(Outgoing),
    Marker(oneshot::Sender<()>),
}

/// The node's identity and, in `nats` mode, its NATS client.
pub struct Cluster {
    node_id: String,
    /// This process's id, random per start: which process holds the node
    /// id's presence lease (two processes never share one node id).
    instance_id: String,
    mode: ClusterMode,
    client: Option<async_nats::Client>,
    outbox: Option<mpsc::Sender<Outbound>>,
    connected: Arc<AtomicBool>,
}

impl Cluster {
    /// A node alone: no client, publishing does nothing.
    pub fn single(node_id: String) -> Cluster {
        Cluster {
            node_id,
            instance_id: uuid::Uuid::new_v4().to_string(),
            mode: ClusterMode::Single,
            client: None,
            outbox: None,
            connected: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The node as configured. In `nats` mode the client connects in the
    /// background and keeps reconnecting, so a node started while NATS is
    /// down serves (delivering by the log check) and joins when it can.
    pub async fn start(config: &ClusterConfig) -> anyhow::Result<Cluster> {
        let node_id = node_id(config)?;
        if config.mode == ClusterMode::Single {
            return Ok(Cluster::single(node_id));
        }
        let connected = Arc::new(AtomicBool::new(false));
        metrics::gauge!(names::CLUSTER_CONNECTED).set(0.0);
        let security = connect::Security::load(config)?;
        let options = || {
            let options = async_nats::ConnectOptions::new()
                .name(format!("switchboard {node_id}"))
                // A node's own wake-ups and controls were acted on in process.
                .no_echo()
                .max_reconnects(None)
                .reconnect_delay_callback(reconnect_delay)
                .event_callback(on_event(node_id.clone(), connected.clone()));
            security.apply(options)
        };
        let tls_required = config.nats_tls_required || config.nats_url.starts_with("tls://");
        let client = connect::connect(config.nats_url.as_str(), tls_required, options).await?;
        let (tx, rx) = mpsc::channel(OUTBOX_CAPACITY);
        tokio::spawn(send_outbox(client.clone(), rx));
        info!(node = %node_id, "cluster mode nats: connecting to NATS in the background");
        Ok(Cluster {
            node_id,
            instance_id: uuid::Uuid::new_v4().to_string(),
            mode: ClusterMode::Nats,
            client: Some(client),
            outbox: Some(tx),
            connected,
        })
    }

    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    pub fn instance_id(&self) -> &str {
        &self.instance_id
    }

    pub fn mode(&self) -> ClusterMode {
        self.mode
    }

    /// The NATS client: `None` in `single` mode.
    pub fn client(&self) -> Option<&async_nats::Client> {
        self.client.as_ref()
    }

    /// Whether the client is connected now (`false` in `single` mode).
    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    /// Hands a message to NATS without waiting, at most once: when the
    /// outbox is full (NATS unreachable, or slower than this node) it is
    /// dropped and counted. Nothing in `single` mode.
    pub fn publish(&self, kind: Kind, subject: impl Into<String>, payload: Bytes) {
        let Some(outbox) = &self.outbox else {
            return;
        };
        let message = Outgoing {
            kind,
            subject: subject.into(),
            payload,
        };
        if outbox.try_send(Outbound::Message(message)).is_err() {
            metrics::counter!(names::CLUSTER_ERRORS, "kind" => "dropped").increment(1);
        }
    }

    /// At the end of a drain (SIGTERM): waits until every message queued
    /// so far (the wake-ups and controls of the node's last commits) has
    /// been handed to the client and the client has written it to the
    /// server, for at most `within`. True when all of it went; false when
    /// the bound passed (NATS down or slow), which the other nodes' log
    /// check and sweep make up for. True at once in `single` mode.
    pub async fn flush(&self, within: Duration) -> bool {
        let (Some(outbox), Some(client)) = (&self.outbox, &self.client) else {
            return true;
        };
        let (marker, passed) = oneshot::channel();
        let flushed = tokio::time::timeout(within, async {
            // Waits for room: the marker must not be dropped as a message is.
            outbox.send(Outbound::Marker(marker)).await.ok()?;
            passed.await.ok()?;
            client.flush().await.ok()
        })
        .await;
        matches!(flushed, Ok(Some(())))
    }

    /// A subscription to `subject`, or `None` in `single` mode. The client
    /// subscribes again by itself after every reconnect.
    pub async fn subscribe(&self, subject: &str) -> Option<async_nats::Subscriber> {
        let client = self.client.as_ref()?;
        match client.subscribe(subject.to_string()).await {
            Ok(s) => Some(s),
            Err(e) => {
                metrics::counter!(names::CLUSTER_ERRORS, "kind" => "subscribe").increment(1);
                warn!(subject, error = %e, "subscribing on NATS failed");
                None
            }
        }
    }
}

/// Counts a message taken from NATS.
pub fn count_received(kind: Kind) {
    metrics::counter!(names::CLUSTER_MESSAGES, "direction" => "received", "kind" => kind.as_str())
        .increment(1);
}

/// Counts a message from NATS that could not be read (another version's,
/// or damaged): it is ignored.
pub fn count_undecodable(kind: Kind) {
    metrics::counter!(names::CLUSTER_ERRORS, "kind" => "decode").increment(1);
    debug!(
        kind = kind.as_str(),
        "ignored an unreadable cluster message"
    );
}

/// The configured node id, or a random one: 12 hex digits of a v4 UUID.
fn node_id(config: &ClusterConfig) -> anyhow::Result<String> {
    if config.node_id.is_empty() {
        return Ok(uuid::Uuid::new_v4().simple().to_string()[..12].to_string());
    }
    check_node_id(&config.node_id)?;
    Ok(config.node_id.clone())
}

fn reconnect_delay(attempts: usize) -> Duration {
    let exp = attempts.saturating_sub(1).min(16) as u32;
    Duration::from_millis(25u64.saturating_mul(2u64.pow(exp))).min(MAX_RECONNECT_DELAY)
}

/// Logs what an operator needs of the link (connected, lost, the server's
/// complaints) and keeps the connected gauge.
fn on_event(
    node_id: String,
    connected: Arc<AtomicBool>,
) -> impl Fn(async_nats::Event) -> std::future::Ready<()> + Send + Sync + 'static {
    move |event| {
        use async_nats::Event;
        match &event {
            Event::Connected => {
                connected.store(true, Ordering::Relaxed);
                metrics::gauge!(names::CLUSTER_CONNECTED).set(1.0);
                info!(node = %node_id, "connected to NATS");
            }
            Event::Disconnected => {
                connected.store(false, Ordering::Relaxed);
                metrics::gauge!(names::CLUSTER_CONNECTED).set(0.0);
                metrics::counter!(names::CLUSTER_ERRORS, "kind" => "disconnected").increment(1);
                warn!(node = %node_id, "lost NATS; delivering by the log check and closing by the database sweep until it is back");
            }
            Event::ServerError(e) => {
                metrics::counter!(names::CLUSTER_ERRORS, "kind" => "server").increment(1);
                warn!(node = %node_id, error = %e, "NATS server error");
            }
            Event::ClientError(e) => {
                metrics::counter!(names::CLUSTER_ERRORS, "kind" => "client").increment(1);
                warn!(node = %node_id, error = %e, "NATS client error");
            }
            Event::SlowConsumer(_) => {
                metrics::counter!(names::CLUSTER_ERRORS, "kind" => "slow_consumer").increment(1);
                warn!(node = %node_id, "this node reads NATS too slowly: messages were dropped");
            }
            other => info!(node = %node_id, event = %other, "NATS"),
        }
        std::future::ready(())
    }
}

/// Moves the outbox to the client in order, and tells a drain's marker
/// when everything before it was handed over. Ends when the cluster handle
/// is dropped.
async fn send_outbox(client: async_nats::Client, mut rx: mpsc::Receiver<Outbound>) {
    while let Some(next) = rx.recv().await {
        let m = match next {
            Outbound::Message(m) => m,
            Outbound::Marker(passed) => {
                let _ = passed.send(());
                continue;
            }
        };
        match client.publish(m.subject, m.payload).await {
            Ok(()) => metrics::counter!(
                names::CLUSTER_MESSAGES,
                "direction" => "published",
                "kind" => m.kind.as_str()
            )
            .increment(1),
            Err(e) => {
                metrics::counter!(names::CLUSTER_ERRORS, "kind" => "publish").increment(1);
                debug!(error = %e, "publishing on NATS failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_random_node_id_is_a_valid_one() {
        let id = node_id(&ClusterConfig::default()).unwrap();
        check_node_id(&id).unwrap();
        assert_eq!(id.len(), 12);
        assert_ne!(id, node_id(&ClusterConfig::default()).unwrap());
    }

    #[test]
    fn reconnects_back_off_to_a_second() {
        assert_eq!(reconnect_delay(1), Duration::from_millis(25));
        assert_eq!(reconnect_delay(2), Duration::from_millis(50));
        assert_eq!(reconnect_delay(100), MAX_RECONNECT_DELAY);
    }
}
