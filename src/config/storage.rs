//! `[storage]`: which database, and how the hub talks to it.

use serde::{Deserialize, Serialize};

use super::require_positive;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageConfig {
    /// Empty: `sqlite://<data_dir>/switchboard.db`. `postgres://...` selects
    /// PostgreSQL.
    pub database_url: String,
    pub max_connections: u32,
    pub migrate_on_start: bool,
    pub sqlite_busy_timeout_ms: u64,
    /// `full` (default): a commit survives power loss. `normal`: in WAL mode a
    /// commit survives a crash of the hub process but not of the machine.
    pub sqlite_synchronous: SqliteSynchronous,
    /// A pooled PostgreSQL connection idle at least this long is pinged
    /// before use; one in use more recently is known to be alive. 0 pings
    /// before every use.
    pub postgres_ping_idle_after_ms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SqliteSynchronous {
    Full,
    Normal,
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            database_url: String::new(),
            max_connections: 16,
            migrate_on_start: true,
            sqlite_busy_timeout_ms: 5_000,
            sqlite_synchronous: SqliteSynchronous::Full,
            postgres_ping_idle_after_ms: 5_000,
        }
    }
}

impl StorageConfig {
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        require_positive(&[("storage.max_connections", self.max_connections as u64)])
    }
}
