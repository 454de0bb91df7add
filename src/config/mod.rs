//! Configuration: defaults, then a TOML file, then `SWITCHBOARD_*` environment
//! variables (`__` separates sections: `SWITCHBOARD_GATEWAY__MAX_FRAME_BYTES`),
//! then command-line flags. Every key is documented in docs/configuration.md.
//!
//! One file per group of sections, each with its structs, defaults and the
//! checks that need only that section; checks across sections live here.

mod app;
mod audit;
mod cluster;
mod command;
mod component;
mod console;
mod events;
mod gateway;
mod hooks;
mod hosted;
mod installation;
mod log;
mod ratelimit;
mod registration;
mod server;
mod storage;
mod webhooks;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::{Deserialize, Serialize};

use crate::domain::egress_policy::HostPort;
use crate::domain::manifest::ManifestBounds;

pub use app::AppConfig;
pub use audit::AuditConfig;
pub use cluster::{check_node_id, ClusterConfig, ClusterMode};
pub use command::CommandConfig;
pub use component::ComponentConfig;
pub use console::ConsoleConfig;
pub use events::{EventsConfig, JobsConfig, LeasesConfig, MessagesConfig};
pub use gateway::GatewayConfig;
pub use hooks::{HooksConfig, LimitsConfig};
pub use hosted::HostedConfig;
pub use installation::InstallationConfig;
pub use log::{LogConfig, LogFormat};
pub use ratelimit::{RateLimitConfig, RateQuota};
pub use registration::{AdminConfig, InstallMode, RegistrationConfig, RegistrationMode};
pub use server::ServerConfig;
pub use storage::{SqliteSynchronous, StorageConfig};
pub use webhooks::{EgressConfig, WebhooksConfig};

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
    pub audit: AuditConfig,
    pub ratelimit: RateLimitConfig,
    pub command: CommandConfig,
    pub component: ComponentConfig,
    pub installation: InstallationConfig,
    pub hosted: HostedConfig,
    pub console: ConsoleConfig,
    pub app: AppConfig,
    pub cluster: ClusterConfig,
}

/// Refuses the first key whose value is 0, naming it.
fn require_positive(keys: &[(&str, u64)]) -> anyhow::Result<()> {
    for (key, value) in keys {
        if *value == 0 {
            anyhow::bail!("{key} must be greater than 0");
        }
    }
    Ok(())
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
                // Read by the command line, not configuration keys.
                .ignore(&["config", "hub_url", "app_key"]),
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

    /// Refuses settings that cannot work, with the key named.
    pub fn validate(&self) -> anyhow::Result<()> {
        self.server.validate()?;
        self.gateway.validate()?;
        self.storage.validate()?;
        self.limits.validate()?;
        self.hooks.validate()?;
        self.events.validate()?;
        self.messages.validate()?;
        self.leases.validate()?;
        self.jobs.validate()?;
        self.webhooks.validate()?;
        self.egress.validate()?;
        self.registration.validate()?;
        self.audit.validate()?;
        self.ratelimit.validate()?;
        self.command.validate()?;
        self.component.validate()?;
        self.installation.validate()?;
        self.hosted.validate()?;
        self.console.validate()?;
        self.app.validate()?;
        self.app.check_job_lock(&self.jobs, &self.hooks)?;
        self.cluster.validate()?;
        self.check_cluster()?;
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
        self.check_webhook_deliveries()
    }

    /// Several nodes need one database they all reach (SQLite is a file of
    /// one machine, written by one process), and the database sweep, the
    /// fallback of the control subject, must run within the bound it backs
    /// (ADR 0034).
    fn check_cluster(&self) -> anyhow::Result<()> {
        if self.cluster.mode != ClusterMode::Nats {
            return Ok(());
        }
        let url = self.database_url();
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            anyhow::bail!("cluster.mode = \"nats\" needs PostgreSQL: SQLite is one process's file, so several nodes cannot share it; set storage.database_url to a postgres:// URL or cluster.mode = \"single\"");
        }
        self.check_sweep_margin()
    }

    /// The sweep is the control subject's fallback within
    /// `cluster.control_latency_ms`: a sweep 1 ms below the bound would
    /// meet it only when the sweep's own read took no time, so it must run
    /// at least twice within the bound (ADR 0034, 2026-12-02).
    fn check_sweep_margin(&self) -> anyhow::Result<()> {
        let sweep = self.gateway.revocation_check_interval_ms;
        let latency = self.cluster.control_latency_ms;
        if sweep.saturating_mul(2) > latency {
            anyhow::bail!(
                "gateway.revocation_check_interval_ms ({sweep}) must be at most half of \
                 cluster.control_latency_ms ({latency}) in nats mode: the database sweep is \
                 the control subject's fallback within that bound, with room for its own read"
            );
        }
        Ok(())
    }

    /// A subscription's claim outlasts a request with room for its record
    /// (twice the timeout: a loop renews its claim at each record, and a
    /// request started just before that record's deadline still ends
    /// within it), and a failing one is disabled before retention takes the
    /// events it still owes (ADR 0033).
    fn check_webhook_deliveries(&self) -> anyhow::Result<()> {
        let needed = self.egress.request_timeout_ms.saturating_mul(2);
        if self.webhooks.claim_ms < needed {
            anyhow::bail!(
                "webhooks.claim_ms ({}) must be at least twice egress.request_timeout_ms ({}), \
                 or a slow delivery could be sent twice at once by two hubs",
                self.webhooks.claim_ms,
                self.egress.request_timeout_ms
            );
        }
        if self.webhooks.disable_after_hours >= self.events.retention_hours {
            anyhow::bail!("webhooks.disable_after_hours must be below events.retention_hours, or a failing subscription's events would age out before it is disabled");
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

    /// What a manifest is checked against. The allowlist entries were
    /// parsed by `validate`, so one that fails here cannot happen on a
    /// loaded configuration; it is left out rather than widening anything.
    pub fn manifest_bounds(&self) -> ManifestBounds {
        ManifestBounds {
            min_hook_timeout_ms: self.hooks.min_timeout_ms,
            max_hook_timeout_ms: self.hooks.max_timeout_ms,
            max_participants: self.limits.max_participants,
            max_conversations: self.limits.max_manifest_conversations,
            max_commands: self.command.max_per_principal,
            command_description_max_chars: self.command.description_max_chars,
            egress_allowlist: self
                .egress
                .allowlist
                .iter()
                .filter_map(|entry| HostPort::parse(entry).ok())
                .collect(),
            app_event_types: crate::protocol::app_event_types(),
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
    fn a_webhook_claim_lasts_twice_a_request() {
        let mut c = Config::default();
        c.egress.request_timeout_ms = 2_000;
        c.egress.connect_timeout_ms = 1_000;
        c.webhooks.claim_ms = 3_999;
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains(
                "webhooks.claim_ms (3999) must be at least twice egress.request_timeout_ms (2000)"
            ),
            "{e}"
        );
        c.webhooks.claim_ms = 4_000;
        c.validate().unwrap();
    }

    #[test]
    fn the_membership_cache_is_bounded_and_may_be_off() {
        let mut c = Config::default();
        c.messages.membership_cache_entries = 1_000_001;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("messages.membership_cache_entries"), "{e}");
        c.messages.membership_cache_entries = 0;
        c.validate().unwrap();
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
    fn command_bounds_are_checked_naming_their_keys() {
        let err = |c: &Config| c.validate().unwrap_err().to_string();
        let mut c = Config::default();
        assert_eq!(c.command.max_per_principal, 100);
        assert_eq!(c.command.description_max_chars, 100);
        c.command.max_per_principal = 0;
        assert!(err(&c).contains("command.max_per_principal must be greater than 0"));
        c.command.max_per_principal = 10_001;
        assert!(err(&c).contains("command.max_per_principal must be at most"));
        c.command.max_per_principal = 5;
        c.command.description_max_chars = 0;
        assert!(err(&c).contains("command.description_max_chars must be greater than 0"));
        c.command.description_max_chars = 2_001;
        assert!(err(&c).contains("command.description_max_chars must be at most"));
        c.command.description_max_chars = 40;
        c.egress.allowlist = vec!["hooks.example.com".into(), "ops.example.com:8443".into()];
        let bounds = c.manifest_bounds();
        assert_eq!(
            (bounds.max_commands, bounds.command_description_max_chars),
            (5, 40)
        );
        assert_eq!(bounds.egress_allowlist.len(), 2);
        assert_eq!(bounds.egress_allowlist[1].port, 8443);
        assert!(bounds.app_event_types.contains(&"app/task/activated"));
    }

    #[test]
    fn autocomplete_bounds_are_checked_naming_their_keys() {
        let err = |c: &Config| c.validate().unwrap_err().to_string();
        let mut c = Config::default();
        assert_eq!(c.command.autocomplete_timeout_ms, 3_000);
        assert_eq!(c.command.autocomplete_max_choices, 25);
        c.command.autocomplete_timeout_ms = 0;
        assert!(err(&c).contains("command.autocomplete_timeout_ms must be greater than 0"));
        c.command.autocomplete_timeout_ms = 30_001;
        assert!(err(&c).contains("command.autocomplete_timeout_ms must be at most"));
        c.command.autocomplete_timeout_ms = 100;
        c.command.autocomplete_max_choices = 0;
        assert!(err(&c).contains("command.autocomplete_max_choices must be greater than 0"));
        c.command.autocomplete_max_choices = 101;
        assert!(err(&c).contains("command.autocomplete_max_choices must be at most"));
        c.command.autocomplete_max_choices = 3;
        assert!(c.validate().is_ok());
    }

    #[test]
    fn the_old_gateway_rate_keys_are_refused_naming_their_replacements() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        for (old, new) in [
            ("rate_limit_per_second", "ratelimit.default.per_second"),
            ("rate_limit_burst", "ratelimit.default.burst"),
        ] {
            std::fs::write(&file, format!("[gateway]\n{old} = 100\n")).unwrap();
            let err = Config::load(Some(&file), &FlagOverrides::default())
                .unwrap_err()
                .to_string();
            assert!(err.contains(new) && err.contains(old), "{err}");
        }
        std::fs::write(&file, "[ratelimit.message]\nburst = 3\n").unwrap();
        let c = Config::load(Some(&file), &FlagOverrides::default()).unwrap();
        assert_eq!(c.ratelimit.message.burst, 3);
        assert_eq!(
            c.ratelimit.message.per_second,
            RateLimitConfig::default().message.per_second,
            "a key left out keeps its default"
        );
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

    #[test]
    fn registration_install_is_auto_by_default_and_names_itself_when_wrong() {
        assert_eq!(Config::default().registration.install, InstallMode::Auto);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "[registration]\ninstall = \"pending\"\n").unwrap();
        let c = Config::load(Some(&file), &FlagOverrides::default()).unwrap();
        assert_eq!(c.registration.install, InstallMode::Pending);
        std::fs::write(&file, "[registration]\ninstall = \"later\"\n").unwrap();
        let err = Config::load(Some(&file), &FlagOverrides::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("registration.install"), "{err}");
    }

    #[test]
    fn nats_mode_refuses_sqlite_and_a_slow_sweep() {
        let mut c = Config::default();
        c.cluster.mode = ClusterMode::Nats;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("needs PostgreSQL"), "{e}");
        c.storage.database_url = "postgres://127.0.0.1/sb".into();
        c.validate().unwrap();
        c.gateway.revocation_check_interval_ms = c.cluster.control_latency_ms;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("at most half of"), "{e}");
        // A sweep just below the bound leaves no room for its own read.
        c.gateway.revocation_check_interval_ms = c.cluster.control_latency_ms - 1;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("at most half of"), "{e}");
        c.gateway.revocation_check_interval_ms = c.cluster.control_latency_ms / 2;
        c.validate().unwrap();
    }
}
