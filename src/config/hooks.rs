//! `[hooks]` and `[limits]`: the bounds a manifest is checked against.

use serde::{Deserialize, Serialize};

use super::require_positive;
use crate::domain::manifest;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HooksConfig {
    pub min_timeout_ms: u64,
    pub max_timeout_ms: u64,
    /// How far back each app's health figures reach (in memory only).
    pub health_window_secs: u64,
    /// How long `app check` waits past a gate's `timeoutMs`, to tell a late
    /// answer from none.
    pub check_grace_ms: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    pub max_participants: u32,
    pub max_manifest_conversations: usize,
}

impl Default for HooksConfig {
    fn default() -> Self {
        HooksConfig {
            min_timeout_ms: manifest::DEFAULT_MIN_HOOK_TIMEOUT_MS,
            max_timeout_ms: manifest::DEFAULT_MAX_HOOK_TIMEOUT_MS,
            health_window_secs: 300,
            check_grace_ms: 5_000,
        }
    }
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_participants: manifest::DEFAULT_MAX_PARTICIPANTS,
            max_manifest_conversations: manifest::DEFAULT_MAX_CONVERSATIONS,
        }
    }
}

impl HooksConfig {
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        require_positive(&[
            ("hooks.min_timeout_ms", self.min_timeout_ms),
            ("hooks.health_window_secs", self.health_window_secs),
            ("hooks.check_grace_ms", self.check_grace_ms),
        ])?;
        if self.health_window_secs > 86_400 {
            anyhow::bail!("hooks.health_window_secs must be at most 86400 (a day)");
        }
        if self.check_grace_ms > 600_000 {
            anyhow::bail!("hooks.check_grace_ms must be at most 600000");
        }
        if self.max_timeout_ms < self.min_timeout_ms {
            anyhow::bail!("hooks.max_timeout_ms must be at least hooks.min_timeout_ms");
        }
        Ok(())
    }
}

impl LimitsConfig {
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        require_positive(&[("limits.max_participants", self.max_participants as u64)])
    }
}
