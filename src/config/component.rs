//! `[component]`: the bounds of the cards apps post (ADR 0027 §5, §11).

use serde::{Deserialize, Serialize};

use super::require_positive;
use crate::domain::component;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ComponentConfig {
    /// Most components on one message.
    pub max_per_message: usize,
    /// A component's lifetime when its app names none, and the longest
    /// one it may name.
    pub default_ttl_seconds: u64,
}

impl Default for ComponentConfig {
    fn default() -> Self {
        ComponentConfig {
            max_per_message: component::DEFAULT_MAX_PER_MESSAGE,
            default_ttl_seconds: component::DEFAULT_TTL_SECONDS,
        }
    }
}

/// A card is one message's worth of controls, and a component lives at
/// most a year.
const MAX_PER_MESSAGE_LIMIT: usize = 100;
const TTL_SECONDS_LIMIT: u64 = 366 * 86_400;

impl ComponentConfig {
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        require_positive(&[
            ("component.max_per_message", self.max_per_message as u64),
            ("component.default_ttl_seconds", self.default_ttl_seconds),
        ])?;
        if self.max_per_message > MAX_PER_MESSAGE_LIMIT {
            anyhow::bail!("component.max_per_message must be at most {MAX_PER_MESSAGE_LIMIT}");
        }
        if self.default_ttl_seconds > TTL_SECONDS_LIMIT {
            anyhow::bail!("component.default_ttl_seconds must be at most {TTL_SECONDS_LIMIT}");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_checked_naming_their_keys() {
        let ok = ComponentConfig::default();
        assert!(ok.validate().is_ok());
        let err = |c: ComponentConfig| c.validate().unwrap_err().to_string();
        assert!(err(ComponentConfig {
            max_per_message: 0,
            ..ComponentConfig::default()
        })
        .contains("component.max_per_message must be greater than 0"));
        assert!(err(ComponentConfig {
            max_per_message: 101,
            ..ComponentConfig::default()
        })
        .contains("component.max_per_message must be at most"));
        assert!(err(ComponentConfig {
            default_ttl_seconds: 0,
            ..ComponentConfig::default()
        })
        .contains("component.default_ttl_seconds must be greater than 0"));
        assert!(err(ComponentConfig {
            default_ttl_seconds: TTL_SECONDS_LIMIT + 1,
            ..ComponentConfig::default()
        })
        .contains("component.default_ttl_seconds must be at most"));
    }
}
