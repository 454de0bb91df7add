//! `[server]`: where the hub listens, where it keeps its files, and the
//! limits of its HTTP side.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    pub shutdown_grace_ms: u64,
    pub max_http_body_bytes: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: "127.0.0.1:7420".parse().expect("valid default address"),
            data_dir: PathBuf::from("switchboard-data"),
            shutdown_grace_ms: 10_000,
            max_http_body_bytes: 1024 * 1024,
        }
    }
}
