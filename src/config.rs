//! Configuration: defaults, then a TOML file, then `SWITCHBOARD_*` environment
//! variables (`__` separates sections: `SWITCHBOARD_GATEWAY__MAX_FRAME_BYTES`),
//! then command-line flags. Every key is documented in docs/configuration.md.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::{Deserialize, Serialize};

use crate::domain::manifest::ManifestBounds;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub server: ServerConfig,
    pub storage: StorageConfig,
    pub gateway: GatewayConfig,
    pub registration: RegistrationConfig,
    pub hooks: HooksConfig,
    pub limits: LimitsConfig,
    pub admin: AdminConfig,
    pub log: LogConfig,
    pub events: EventsConfig,
    pub messages: MessagesConfig,
    pub leases: LeasesConfig,
    pub jobs: JobsConfig,
    pub webhooks: WebhooksConfig,
    pub egress: EgressConfig,
}

/// Rules and limits for every request the hub sends out (webhooks,
/// `interactions_url`). See docs/configuration.md.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EgressConfig {
    /// `host` or `host:port` entries; without a port only 443 is allowed.
    /// Empty means nothing may be sent.
    pub allowlist: Vec<String>,
    /// Allowlisted `host[:port]` entries that may resolve to private
    /// addresses (private deployments). Never widens the allowlist.
    pub private_override: Vec<String>,
    pub connect_timeout_ms: u64,
    /// From the lookup to the last byte of the answer.
    pub request_timeout_ms: u64,
    /// Answers longer than this are abandoned as `too_large`.
    pub max_response_bytes: usize,
    /// A PEM bundle of extra CAs to trust besides the public web PKI.
    pub extra_ca_file: String,
}

impl Default for EgressConfig {
    fn default() -> Self {
        EgressConfig {
            allowlist: Vec::new(),
            private_override: Vec::new(),
            connect_timeout_ms: 5_000,
            request_timeout_ms: 15_000,
            max_response_bytes: 256 * 1024,
            extra_ca_file: String::new(),
        }
    }
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebhooksConfig {
    /// Base64 of 32 bytes that seal the webhook signing keys at rest.
    /// Never serialized or printed.
    #[serde(skip_serializing)]
    pub key_encryption_key: String,
    /// A file holding that key instead (takes precedence).
    pub key_encryption_key_file: String,
    /// How long a rotated-out key keeps signing beside the new one.
    pub rotation_overlap_hours: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LeasesConfig {
    /// Lease length when a policy grants without naming one.
    pub default_timeout_ms: u64,
    /// Longest lease an app may grant.
    pub max_timeout_ms: u64,
    /// A held lease not resolved by the app within this is denied.
    pub max_hold_ms: u64,
}

impl std::fmt::Debug for WebhooksConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kek = if self.key_encryption_key.is_empty() {
            ""
        } else {
            "<redacted>"
        };
        f.debug_struct("WebhooksConfig")
            .field("key_encryption_key", &kek)
            .field("key_encryption_key_file", &self.key_encryption_key_file)
            .field("rotation_overlap_hours", &self.rotation_overlap_hours)
            .finish()
    }
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        WebhooksConfig {
            key_encryption_key: String::new(),
            key_encryption_key_file: String::new(),
            rotation_overlap_hours: 24,
        }
    }
}

impl Default for LeasesConfig {
    fn default() -> Self {
        LeasesConfig {
            default_timeout_ms: 30_000,
            max_timeout_ms: 600_000,
            max_hold_ms: 300_000,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JobsConfig {
    /// How often the runner looks for due jobs (lease expiry precision).
    pub poll_interval_ms: u64,
    /// How long a claimed job stays locked; longer than any hook timeout.
    pub lock_ms: u64,
    /// Jobs claimed per poll.
    pub batch: u32,
    /// Extra time a job written for inline execution waits before the
    /// runner may take it (recovery after a crash).
    pub inline_grace_ms: u64,
    /// Most jobs the runner runs at once.
    pub max_concurrent: u32,
    /// Runs of a job that keeps failing before its fail-closed verdict is
    /// applied (the task fails, the message is blocked, the lease denied).
    pub max_attempts: u32,
}

impl Default for JobsConfig {
    fn default() -> Self {
        JobsConfig {
            poll_interval_ms: 100,
            lock_ms: 120_000,
            batch: 64,
            inline_grace_ms: 5_000,
            max_concurrent: 256,
            max_attempts: 10,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EventsConfig {
    /// Events older than this are pruned.
    pub retention_hours: u64,
    /// Each audience keeps at most this many of its newest events.
    pub retention_max_per_audience: u64,
    pub prune_interval_ms: u64,
    /// Events read per query while replaying onto a socket.
    pub replay_batch: u32,
    /// Default and largest `limit` of `GET /api/v1/events`.
    pub page_default: u32,
    pub page_max: u32,
    /// Largest `wait` (seconds) of a long-poll.
    pub max_wait_seconds: u64,
}

impl Default for EventsConfig {
    fn default() -> Self {
        EventsConfig {
            retention_hours: 168,
            retention_max_per_audience: 1_000_000,
            prune_interval_ms: 60_000,
            replay_batch: 500,
            page_default: 100,
            page_max: 1000,
            max_wait_seconds: 30,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MessagesConfig {
    pub max_parts: usize,
    /// Largest total size of a message's parts (text bytes plus data JSON).
    pub max_bytes: usize,
    /// Most participants of a group conversation, the creator included.
    pub max_group_participants: usize,
    /// Largest `limit` of history and list pages.
    pub page_max: u32,
    /// Most nested arrays and objects in a data part (at most
    /// `domain::message::MAX_DATA_DEPTH`, which leaves room for every
    /// envelope within the JSON parsers' limit).
    pub max_data_depth: usize,
}

impl Default for MessagesConfig {
    fn default() -> Self {
        MessagesConfig {
            max_parts: 16,
            max_bytes: 64 * 1024,
            max_group_participants: 256,
            page_max: 200,
            max_data_depth: crate::domain::message::MAX_DATA_DEPTH,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    pub shutdown_grace_ms: u64,
    pub max_http_body_bytes: usize,
}

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
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SqliteSynchronous {
    Full,
    Normal,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewayConfig {
    pub auth_timeout_ms: u64,
    pub heartbeat_interval_ms: u64,
    pub heartbeat_timeout_ms: u64,
    pub max_frame_bytes: usize,
    pub transport_max_frame_bytes: usize,
    pub max_in_flight_requests: u32,
    pub outbound_queue_capacity: u32,
    pub rate_limit_per_second: u32,
    pub rate_limit_burst: u32,
    /// Per-socket read buffer. Small keeps idle sockets cheap; frames
    /// larger than it are still read (the buffer grows for them).
    pub socket_read_buffer_bytes: usize,
    /// Per-socket write buffer before a flush.
    pub socket_write_buffer_bytes: usize,
    /// How often the gateway looks for keys revoked by another process (the
    /// operator CLI, another node) and closes their sockets.
    pub revocation_check_interval_ms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RegistrationMode {
    /// Anyone who reaches the hub may register.
    Open,
    /// Registration requires `registration.secret` in `X-Registration-Secret`.
    Secret,
    /// Only the operator CLI registers.
    Closed,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegistrationConfig {
    pub mode: RegistrationMode,
    pub secret: String,
    pub allow_open_beyond_loopback: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HooksConfig {
    pub min_timeout_ms: u64,
    pub max_timeout_ms: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    pub max_participants: u32,
    pub max_manifest_conversations: usize,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminConfig {
    /// Bearer token of the operator API. Empty disables it.
    pub token: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    pub format: LogFormat,
    /// A tracing filter; `RUST_LOG` wins when set.
    pub level: String,
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

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            database_url: String::new(),
            max_connections: 16,
            migrate_on_start: true,
            sqlite_busy_timeout_ms: 5_000,
            sqlite_synchronous: SqliteSynchronous::Full,
        }
    }
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            auth_timeout_ms: 10_000,
            heartbeat_interval_ms: 20_000,
            heartbeat_timeout_ms: 60_000,
            max_frame_bytes: 1024 * 1024,
            transport_max_frame_bytes: 4 * 1024 * 1024,
            max_in_flight_requests: 64,
            outbound_queue_capacity: 1024,
            rate_limit_per_second: 100,
            rate_limit_burst: 200,
            socket_read_buffer_bytes: 4096,
            socket_write_buffer_bytes: 8192,
            revocation_check_interval_ms: 2_000,
        }
    }
}

impl Default for RegistrationConfig {
    fn default() -> Self {
        RegistrationConfig {
            mode: RegistrationMode::Open,
            secret: String::new(),
            allow_open_beyond_loopback: false,
        }
    }
}

impl Default for HooksConfig {
    fn default() -> Self {
        HooksConfig {
            min_timeout_ms: 10,
            max_timeout_ms: 60_000,
        }
    }
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_participants: 1_000,
            max_manifest_conversations: 32,
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            format: LogFormat::Text,
            level: "info".into(),
        }
    }
}

/// Values given as command-line flags; they win over everything else.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FlagOverrides {
    pub listen: Option<SocketAddr>,
    pub data_dir: Option<PathBuf>,
    pub database_url: Option<String>,
}

impl Config {
    pub fn load(file: Option<&Path>, flags: &FlagOverrides) -> anyhow::Result<Config> {
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        if let Some(file) = file {
            if !file.exists() {
                anyhow::bail!("configuration file {} does not exist", file.display());
            }
            figment = figment.merge(Toml::file(file));
        }
        figment = figment.merge(
            Env::prefixed("SWITCHBOARD_")
                .split("__")
                .ignore(&["config"]),
        );
        if let Some(listen) = flags.listen {
            figment = figment.merge(Serialized::default("server.listen", listen));
        }
        if let Some(dir) = &flags.data_dir {
            figment = figment.merge(Serialized::default("server.data_dir", dir));
        }
        if let Some(url) = &flags.database_url {
            figment = figment.merge(Serialized::default("storage.database_url", url));
        }
        let config: Config = figment
            .extract()
            .map_err(|e| anyhow::anyhow!("invalid configuration: {e}"))?;
        config.validate()?;
        Ok(config)
    }

    /// Every entry parses, and the private override only narrows the
    /// allowlist: an override entry that is not allowlisted would do nothing,
    /// which is almost certainly a mistake worth refusing at startup.
    fn validate_egress(&self) -> anyhow::Result<()> {
        use crate::webhooks::egress_policy::HostPort;
        let e = &self.egress;
        let mut allowed = Vec::new();
        for entry in &e.allowlist {
            allowed.push(
                HostPort::parse(entry).map_err(|m| anyhow::anyhow!("egress.allowlist: {m}"))?,
            );
        }
        for entry in &e.private_override {
            let hp = HostPort::parse(entry)
                .map_err(|m| anyhow::anyhow!("egress.private_override: {m}"))?;
            if !allowed.contains(&hp) {
                anyhow::bail!(
                    "egress.private_override: {entry:?} is not on egress.allowlist; the override never replaces the allowlist"
                );
            }
        }
        if e.connect_timeout_ms > e.request_timeout_ms {
            anyhow::bail!("egress.connect_timeout_ms must not exceed egress.request_timeout_ms");
        }
        Ok(())
    }

    /// Refuses settings that cannot work, with the key named.
    pub fn validate(&self) -> anyhow::Result<()> {
        let g = &self.gateway;
        let positive = [
            ("gateway.auth_timeout_ms", g.auth_timeout_ms),
            ("gateway.heartbeat_interval_ms", g.heartbeat_interval_ms),
            ("gateway.heartbeat_timeout_ms", g.heartbeat_timeout_ms),
            ("gateway.max_frame_bytes", g.max_frame_bytes as u64),
            (
                "gateway.max_in_flight_requests",
                g.max_in_flight_requests as u64,
            ),
            (
                "gateway.outbound_queue_capacity",
                g.outbound_queue_capacity as u64,
            ),
            (
                "gateway.rate_limit_per_second",
                g.rate_limit_per_second as u64,
            ),
            ("gateway.rate_limit_burst", g.rate_limit_burst as u64),
            (
                "gateway.revocation_check_interval_ms",
                g.revocation_check_interval_ms,
            ),
            (
                "gateway.socket_read_buffer_bytes",
                g.socket_read_buffer_bytes as u64,
            ),
            (
                "storage.max_connections",
                self.storage.max_connections as u64,
            ),
            (
                "limits.max_participants",
                self.limits.max_participants as u64,
            ),
            ("hooks.min_timeout_ms", self.hooks.min_timeout_ms),
            ("events.retention_hours", self.events.retention_hours),
            (
                "events.retention_max_per_audience",
                self.events.retention_max_per_audience,
            ),
            ("events.prune_interval_ms", self.events.prune_interval_ms),
            ("events.replay_batch", self.events.replay_batch as u64),
            ("events.page_default", self.events.page_default as u64),
            ("events.page_max", self.events.page_max as u64),
            ("messages.max_parts", self.messages.max_parts as u64),
            ("messages.max_bytes", self.messages.max_bytes as u64),
            (
                "messages.max_group_participants",
                self.messages.max_group_participants as u64,
            ),
            ("messages.page_max", self.messages.page_max as u64),
            ("leases.default_timeout_ms", self.leases.default_timeout_ms),
            ("leases.max_timeout_ms", self.leases.max_timeout_ms),
            ("leases.max_hold_ms", self.leases.max_hold_ms),
            ("jobs.poll_interval_ms", self.jobs.poll_interval_ms),
            ("jobs.lock_ms", self.jobs.lock_ms),
            ("jobs.batch", self.jobs.batch as u64),
            ("jobs.max_concurrent", self.jobs.max_concurrent as u64),
            ("jobs.max_attempts", self.jobs.max_attempts as u64),
            ("egress.connect_timeout_ms", self.egress.connect_timeout_ms),
            ("egress.request_timeout_ms", self.egress.request_timeout_ms),
            (
                "egress.max_response_bytes",
                self.egress.max_response_bytes as u64,
            ),
        ];
        for (key, value) in positive {
            if value == 0 {
                anyhow::bail!("{key} must be greater than 0");
            }
        }
        if self.events.page_default > self.events.page_max {
            anyhow::bail!("events.page_default must not exceed events.page_max");
        }
        if self.webhooks.rotation_overlap_hours > 24 * 365 {
            anyhow::bail!("webhooks.rotation_overlap_hours must be at most 8760 (a year)");
        }
        self.validate_egress()?;
        if self.leases.default_timeout_ms > self.leases.max_timeout_ms {
            anyhow::bail!("leases.default_timeout_ms must not exceed leases.max_timeout_ms");
        }
        // A handler's job is locked from before its insert: the lock must
        // outlast the wait for the writer, the hook and the grace period.
        if self.jobs.lock_ms
            <= self
                .hooks
                .max_timeout_ms
                .saturating_add(self.jobs.inline_grace_ms)
        {
            anyhow::bail!("jobs.lock_ms must exceed hooks.max_timeout_ms plus jobs.inline_grace_ms, or a slow hook's job would run twice");
        }
        if !(1..=crate::domain::message::MAX_DATA_DEPTH).contains(&self.messages.max_data_depth) {
            anyhow::bail!("messages.max_data_depth must be from 1 to {} (deeper data would not fit in its envelope within the JSON parsers' nesting limit)", crate::domain::message::MAX_DATA_DEPTH);
        }
        if self.messages.max_group_participants < 2 {
            anyhow::bail!("messages.max_group_participants must be at least 2");
        }
        if g.transport_max_frame_bytes < g.max_frame_bytes {
            anyhow::bail!(
                "gateway.transport_max_frame_bytes must be at least gateway.max_frame_bytes"
            );
        }
        if g.heartbeat_timeout_ms <= g.heartbeat_interval_ms {
            anyhow::bail!(
                "gateway.heartbeat_timeout_ms must be greater than gateway.heartbeat_interval_ms"
            );
        }
        if self.hooks.max_timeout_ms < self.hooks.min_timeout_ms {
            anyhow::bail!("hooks.max_timeout_ms must be at least hooks.min_timeout_ms");
        }
        if self.registration.mode == RegistrationMode::Secret && self.registration.secret.len() < 16
        {
            anyhow::bail!("registration.secret must be at least 16 characters when registration.mode = \"secret\"");
        }
        Ok(())
    }

    /// Open registration on a hub reachable beyond this machine needs the
    /// operator's explicit consent.
    pub fn check_exposure(&self) -> anyhow::Result<()> {
        if self.registration.mode == RegistrationMode::Open
            && !self.server.listen.ip().is_loopback()
            && !self.registration.allow_open_beyond_loopback
        {
            anyhow::bail!(
                "server.listen = {} is reachable beyond loopback and registration.mode = \"open\": \
                 set registration.mode = \"secret\" (with registration.secret) or \"closed\", \
                 or set registration.allow_open_beyond_loopback = true",
                self.server.listen
            );
        }
        Ok(())
    }

    pub fn database_url(&self) -> String {
        if self.storage.database_url.is_empty() {
            format!(
                "sqlite://{}",
                self.server.data_dir.join("switchboard.db").display()
            )
        } else {
            self.storage.database_url.clone()
        }
    }

    pub fn manifest_bounds(&self) -> ManifestBounds {
        ManifestBounds {
            min_hook_timeout_ms: self.hooks.min_timeout_ms,
            max_hook_timeout_ms: self.hooks.max_timeout_ms,
            max_participants: self.limits.max_participants,
            max_conversations: self.limits.max_manifest_conversations,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_local() {
        let c = Config::default();
        c.validate().unwrap();
        c.check_exposure().unwrap();
        assert!(c.server.listen.ip().is_loopback());
    }

    #[test]
    fn egress_entries_are_checked_and_the_override_only_narrows() {
        let err = |c: &Config| c.validate().unwrap_err().to_string();
        let mut c = Config::default();
        c.egress.allowlist = vec!["hooks.example.com".into(), "ops.example.com:8443".into()];
        c.egress.private_override = vec!["ops.example.com:8443".into()];
        c.validate().unwrap();
        c.egress.private_override = vec!["ops.example.com".into()];
        assert!(
            err(&c).contains("is not on egress.allowlist"),
            "{}",
            err(&c)
        );
        c.egress.private_override = vec!["internal.example.com".into()];
        assert!(err(&c).contains("egress.private_override"));
        c.egress.private_override.clear();
        c.egress.allowlist.push("10.0.0.1".into());
        assert!(err(&c).contains("egress.allowlist") && err(&c).contains("IP literals"));
        c.egress.allowlist.pop();
        c.egress.allowlist.push("host:http".into());
        assert!(err(&c).contains("egress.allowlist"));
        c.egress.allowlist.pop();
        c.egress.connect_timeout_ms = c.egress.request_timeout_ms + 1;
        assert!(err(&c).contains("egress.connect_timeout_ms"));
        c.egress.connect_timeout_ms = 0;
        assert!(err(&c).contains("egress.connect_timeout_ms must be greater than 0"));
    }

    #[test]
    fn data_depth_stays_within_the_envelope_budget() {
        let mut c = Config::default();
        c.messages.max_data_depth = crate::domain::message::MAX_DATA_DEPTH + 1;
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains("messages.max_data_depth must be from 1 to 120"),
            "{e}"
        );
        c.messages.max_data_depth = 0;
        assert!(c.validate().is_err());
        c.messages.max_data_depth = 8;
        c.validate().unwrap();
    }

    #[test]
    fn open_registration_beyond_loopback_is_refused() {
        let mut c = Config::default();
        c.server.listen = "0.0.0.0:7420".parse().unwrap();
        assert!(c.check_exposure().is_err());
        c.registration.allow_open_beyond_loopback = true;
        c.check_exposure().unwrap();
    }

    #[test]
    fn file_values_load_and_flags_win() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(
            &file,
            "[gateway]\nmax_frame_bytes = 2048\n[server]\nlisten = \"127.0.0.1:1\"\n",
        )
        .unwrap();
        let flags = FlagOverrides {
            listen: Some("127.0.0.1:2".parse().unwrap()),
            ..Default::default()
        };
        let c = Config::load(Some(&file), &flags).unwrap();
        assert_eq!(c.gateway.max_frame_bytes, 2048);
        assert_eq!(c.server.listen.port(), 2);
        std::fs::write(&file, "[gateway]\nmax_frame_bytez = 1\n").unwrap();
        let err = Config::load(Some(&file), &FlagOverrides::default()).unwrap_err();
        assert!(err.to_string().contains("max_frame_bytez"), "{err}");
    }
}
