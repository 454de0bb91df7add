//! `[hooks]` and `[limits]`: the bounds a manifest is checked against.

use serde::{Deserialize, Serialize};

use super::require_positive;
use crate::domain::manifest;

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

impl Default for HooksConfig {
    fn default() -> Self {
        HooksConfig {
            min_timeout_ms: manifest::DEFAULT_MIN_HOOK_TIMEOUT_MS,
            max_timeout_ms: manifest::DEFAULT_MAX_HOOK_TIMEOUT_MS,
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
        require_positive(&[("hooks.min_timeout_ms", self.min_timeout_ms)])?;
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
