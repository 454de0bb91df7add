//! `[server]`: where the hub listens, where it keeps its files, and the
//! limits of its HTTP side (connections, timeouts, bodies).

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::require_positive;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    pub shutdown_grace_ms: u64,
    pub max_http_body_bytes: usize,
    /// Open connections (HTTP and WebSocket) at most; more are closed at
    /// once. Lowered at startup to what the descriptor limit allows.
    pub max_connections: usize,
    /// Open connections from one source address at most, so one client
    /// cannot take every slot.
    pub max_connections_per_address: usize,
    /// Time a connection has to deliver a complete request head, counted
    /// from when the hub starts waiting for one (a new connection, or a
    /// kept-alive one after its last answer).
    pub header_read_timeout_ms: u64,
    /// Time a request has to deliver its whole body once its head is read.
    pub body_read_timeout_ms: u64,
    /// A connection on which no byte moves either way for this long while
    /// none of its requests is being handled is closed (a client that
    /// stopped reading an answer). WebSocket connections have heartbeats
    /// instead.
    pub idle_timeout_ms: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: "127.0.0.1:7420".parse().expect("valid default address"),
            data_dir: PathBuf::from("switchboard-data"),
            shutdown_grace_ms: 10_000,
            max_http_body_bytes: 1024 * 1024,
            max_connections: 10_000,
            max_connections_per_address: 2_000,
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 30_000,
            idle_timeout_ms: 60_000,
        }
    }
}

impl ServerConfig {
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        require_positive(&[
            (
                "server.max_http_body_bytes",
                self.max_http_body_bytes as u64,
            ),
            ("server.max_connections", self.max_connections as u64),
            (
                "server.max_connections_per_address",
                self.max_connections_per_address as u64,
            ),
            ("server.header_read_timeout_ms", self.header_read_timeout_ms),
            ("server.body_read_timeout_ms", self.body_read_timeout_ms),
            ("server.idle_timeout_ms", self.idle_timeout_ms),
        ])?;
        if self.max_connections_per_address > self.max_connections {
            anyhow::bail!(
                "server.max_connections_per_address must not exceed server.max_connections"
            );
        }
        Ok(())
    }
}
