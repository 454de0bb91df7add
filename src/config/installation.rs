//! `[installation]`: the hub's cache of app installations (ADR 0023 §6).

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InstallationConfig {
    /// Most installations the hub keeps cached (`hub::installation_cache`).
    pub cache_capacity: usize,
}

impl Default for InstallationConfig {
    fn default() -> Self {
        InstallationConfig {
            cache_capacity: 10_000,
        }
    }
}

/// Each entry is a few dozen bytes; a million is far beyond any hub's apps.
const CACHE_CAPACITY_LIMIT: usize = 1_000_000;

impl InstallationConfig {
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        if !(1..=CACHE_CAPACITY_LIMIT).contains(&self.cache_capacity) {
            anyhow::bail!(
                "installation.cache_capacity must be between 1 and {CACHE_CAPACITY_LIMIT}"
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_capacity_is_bounded_and_named() {
        let mut c = InstallationConfig::default();
        assert!(c.validate().is_ok());
        for bad in [0, CACHE_CAPACITY_LIMIT + 1] {
            c.cache_capacity = bad;
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains("installation.cache_capacity"), "{e}");
        }
        c.cache_capacity = CACHE_CAPACITY_LIMIT;
        assert!(c.validate().is_ok());
    }
}
