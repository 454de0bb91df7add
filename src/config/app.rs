//! `[app]`: how the hub talks to an app at its `interactionsUrl` (ADR
//! 0032).

use serde::{Deserialize, Serialize};

use super::require_positive;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AppConfig {
    /// The wait for one answer of an app at its `interactionsUrl` (a
    /// delivery, or one request of the verification), from the lookup to
    /// the answer's last byte.
    pub interaction_timeout_ms: u64,
}

impl Default for AppConfig {
    fn default() -> Self {
        AppConfig {
            interaction_timeout_ms: 3_000,
        }
    }
}

/// A person waits on a command's answer: longer than this is no answer.
pub const INTERACTION_TIMEOUT_LIMIT_MS: u64 = 30_000;

impl AppConfig {
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        require_positive(&[("app.interaction_timeout_ms", self.interaction_timeout_ms)])?;
        if self.interaction_timeout_ms > INTERACTION_TIMEOUT_LIMIT_MS {
            anyhow::bail!(
                "app.interaction_timeout_ms must be at most {INTERACTION_TIMEOUT_LIMIT_MS}"
            );
        }
        Ok(())
    }
}
