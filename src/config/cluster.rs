//! `[cluster]`: one node alone, or several nodes on one PostgreSQL with
//! NATS between them (issue 19, docs/adr/0034-cluster-mode.md).

use serde::{Deserialize, Serialize};

use super::require_positive;

/// The longest `cluster.node_id`: it is a token of NATS subjects and a
/// label of logs, so it stays short.
pub const MAX_NODE_ID_CHARS: usize = 64;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClusterMode {
    /// One hub process: every socket, wake-up and close is in it.
    #[default]
    Single,
    /// Several hub processes on one PostgreSQL, with NATS carrying the
    /// signals between them.
    Nats,
}

impl ClusterMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterMode::Single => "single",
            ClusterMode::Nats => "nats",
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    pub mode: ClusterMode,
    /// Where the NATS server listens (`nats://host:port`; credentials may
    /// be given as `nats://user:password@host:port`). Read in `nats` mode.
    pub nats_url: String,
    /// This node's name in subjects, logs and `/readyz`. Empty: a random
    /// id chosen at start.
    pub node_id: String,
    /// How often each live subscription's position is read from the log,
    /// so a lost wake-up only delays delivery (`nats` mode).
    pub poll_interval_ms: u64,
    /// The bound within which a revocation, suspend, uninstall or scope
    /// change made through one node closes the sockets it affects on every
    /// node (`nats` mode).
    pub control_latency_ms: u64,
    /// How long this node's presence lease lasts (ADR 0035): an app socket
    /// of a node that stopped renewing stops taking callbacks this long
    /// after its last renewal (`nats` mode).
    pub presence_lease_ms: u64,
    /// How often the node renews its presence lease; below
    /// `cluster.presence_lease_ms` (`nats` mode).
    pub presence_renew_ms: u64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            mode: ClusterMode::Single,
            nats_url: "nats://127.0.0.1:4222".to_string(),
            node_id: String::new(),
            poll_interval_ms: 1_000,
            control_latency_ms: 5_000,
            presence_lease_ms: 5_000,
            presence_renew_ms: 1_000,
        }
    }
}

impl ClusterConfig {
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        require_positive(&[
            ("cluster.poll_interval_ms", self.poll_interval_ms),
            ("cluster.control_latency_ms", self.control_latency_ms),
            ("cluster.presence_lease_ms", self.presence_lease_ms),
            ("cluster.presence_renew_ms", self.presence_renew_ms),
        ])?;
        if self.presence_renew_ms >= self.presence_lease_ms {
            anyhow::bail!("cluster.presence_renew_ms must be below cluster.presence_lease_ms, or a live node's lease would lapse between renewals");
        }
        if !self.node_id.is_empty() {
            check_node_id(&self.node_id)?;
        }
        if self.mode == ClusterMode::Nats && self.nats_url.trim().is_empty() {
            anyhow::bail!("cluster.nats_url must be set when cluster.mode = \"nats\"");
        }
        Ok(())
    }
}

/// A node id is one NATS subject token: letters, digits, `-` and `_`.
pub fn check_node_id(id: &str) -> anyhow::Result<()> {
    let fits = !id.is_empty()
        && id.chars().count() <= MAX_NODE_ID_CHARS
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !fits {
        anyhow::bail!(
            "cluster.node_id must be 1 to {MAX_NODE_ID_CHARS} letters, digits, '-' or '_'"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ids_are_subject_tokens() {
        check_node_id("node-1_a").unwrap();
        for bad in ["", "a.b", "a*", "a>", "a b", &"x".repeat(65)] {
            assert!(check_node_id(bad).is_err(), "{bad:?}");
        }
    }
}
