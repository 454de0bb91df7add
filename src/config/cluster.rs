//! `[cluster]`: one node alone, or several nodes on one PostgreSQL with
//! NATS between them (issue 19, docs/adr/0034-cluster-mode.md).

use std::path::PathBuf;

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
    /// A NATS credentials file (a user JWT and its nkey seed, as `nsc`
    /// writes it) to authenticate with. Not with `nats_nkey_seed_file`.
    pub nats_creds_file: Option<PathBuf>,
    /// A file holding a NATS user nkey seed (`SU...`) to authenticate
    /// with (the server lists the user's public key). Not with
    /// `nats_creds_file`.
    pub nats_nkey_seed_file: Option<PathBuf>,
    /// Refuse to talk to NATS without TLS (a `tls://` URL requires it too).
    pub nats_tls_required: bool,
    /// PEM roots the NATS server's certificate is checked against (a
    /// private CA); the system roots when unset.
    pub nats_tls_ca_file: Option<PathBuf>,
    /// Allows a `nats://` URL beyond loopback without TLS. Everything on
    /// the link, hook calls' params and answers among it, then crosses the
    /// network in clear.
    pub nats_allow_plaintext: bool,
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
            nats_creds_file: None,
            nats_nkey_seed_file: None,
            nats_tls_required: false,
            nats_tls_ca_file: None,
            nats_allow_plaintext: false,
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
        if self.nats_creds_file.is_some() && self.nats_nkey_seed_file.is_some() {
            anyhow::bail!("set cluster.nats_creds_file or cluster.nats_nkey_seed_file, not both: NATS authenticates a connection as one user");
        }
        if self.mode == ClusterMode::Nats {
            self.check_plaintext()?;
        }
        Ok(())
    }

    /// A link beyond loopback without TLS carries hook calls' params and
    /// answers, and any credentials, in clear: refused unless asked for.
    fn check_plaintext(&self) -> anyhow::Result<()> {
        if self.nats_tls_required || self.nats_allow_plaintext {
            return Ok(());
        }
        for server in self.nats_url.split(',').map(str::trim) {
            let host = server_host(server);
            if !server.starts_with("tls://") && !is_loopback(host) {
                anyhow::bail!(
                    "cluster.nats_url reaches NATS at {host:?}, beyond loopback, without TLS: \
                     set cluster.nats_tls_required = true (or a tls:// URL), \
                     or cluster.nats_allow_plaintext = true to send the link in clear"
                );
            }
        }
        Ok(())
    }
}

/// The host of a NATS server address (`[scheme://][user:pass@]host[:port]`),
/// without the credentials an error must not show.
fn server_host(server: &str) -> &str {
    let rest = server.split_once("://").map_or(server, |(_, r)| r);
    let host_port = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host_port.split(':').next().unwrap_or(""),
    }
}

/// Whether a host names this machine.
fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
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

    fn nats(url: &str) -> ClusterConfig {
        ClusterConfig {
            mode: ClusterMode::Nats,
            nats_url: url.into(),
            ..ClusterConfig::default()
        }
    }

    #[test]
    fn plaintext_nats_beyond_loopback_is_refused() {
        for ok in [
            "nats://127.0.0.1:4222",
            "nats://localhost:4222",
            "nats://[::1]:4222",
            "nats://u:p@127.0.0.2:4222",
            "127.0.0.1:4222",
            "tls://nats.example:4222",
        ] {
            nats(ok).validate().unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in [
            "nats://nats.example:4222",
            "nats://10.0.0.5:4222",
            "nats://127.0.0.1:4222,nats://10.0.0.5:4222",
            "nats://u:p@nats.example:4222",
            "nats.example:4222",
        ] {
            let e = nats(bad).validate().unwrap_err().to_string();
            assert!(e.contains("without TLS"), "{bad}: {e}");
            assert!(
                !e.contains("u:p"),
                "{bad}: no credentials in the error: {e}"
            );
        }
        let mut tls = nats("nats://nats.example:4222");
        tls.nats_tls_required = true;
        tls.validate().unwrap();
        let mut allowed = nats("nats://nats.example:4222");
        allowed.nats_allow_plaintext = true;
        allowed.validate().unwrap();
        let mut single = nats("nats://nats.example:4222");
        single.mode = ClusterMode::Single;
        single.validate().unwrap();
    }

    #[test]
    fn one_way_to_authenticate() {
        let mut c = nats("nats://127.0.0.1:4222");
        c.nats_creds_file = Some("a.creds".into());
        c.validate().unwrap();
        c.nats_nkey_seed_file = Some("a.nk".into());
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("not both"), "{e}");
    }

    #[test]
    fn node_ids_are_subject_tokens() {
        check_node_id("node-1_a").unwrap();
        for bad in ["", "a.b", "a*", "a>", "a b", &"x".repeat(65)] {
            assert!(check_node_id(bad).is_err(), "{bad:?}");
        }
    }
}
