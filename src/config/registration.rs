//! `[registration]` and `[admin]`: who may register agents and apps, and the
//! operator API's token.

use serde::{Deserialize, Serialize};

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

/// What a registered app holds at once (ADR 0023 §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InstallMode {
    /// Registration installs the app, granted every scope it requests.
    Auto,
    /// The app waits, without an installation, for the operator's install.
    Pending,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegistrationConfig {
    pub mode: RegistrationMode,
    pub secret: String,
    pub allow_open_beyond_loopback: bool,
    /// `registration.install`: whether registering an app installs it.
    pub install: InstallMode,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminConfig {
    /// Bearer token of the operator API. Empty disables it.
    pub token: String,
}

impl Default for RegistrationConfig {
    fn default() -> Self {
        RegistrationConfig {
            mode: RegistrationMode::Open,
            secret: String::new(),
            allow_open_beyond_loopback: false,
            install: InstallMode::Auto,
        }
    }
}

impl RegistrationConfig {
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        if self.mode == RegistrationMode::Secret && self.secret.len() < 16 {
            anyhow::bail!("registration.secret must be at least 16 characters when registration.mode = \"secret\"");
        }
        Ok(())
    }
}
