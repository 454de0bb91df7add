//! `[ratelimit]`: the per-principal call limits, one per rate class
//! (ADR 0020 §4). `ratelimit.default` replaces the old
//! `gateway.rate_limit_per_second` and `gateway.rate_limit_burst`.

use serde::{Deserialize, Serialize};

use super::require_positive;

/// One class's limit: a sustained rate and the burst above it, per
/// principal across all its sockets (governor, GCRA).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateQuota {
    pub per_second: u32,
    pub burst: u32,
}

impl RateQuota {
    const fn of(per_second: u32, burst: u32) -> RateQuota {
        RateQuota { per_second, burst }
    }
}

/// A section per class, named as `protocol::RateClass::as_str` names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimitConfig {
    pub message: RateQuota,
    pub trigger: RateQuota,
    pub interaction: RateQuota,
    pub write: RateQuota,
    pub agent_runtime: RateQuota,
    pub default: RateQuota,
}

impl Default for RateLimitConfig {
    /// Every class keeps the limit all calls shared before classes existed,
    /// now in a bucket of its own.
    fn default() -> Self {
        let today = RateQuota::of(100, 200);
        RateLimitConfig {
            message: today,
            trigger: today,
            interaction: today,
            write: today,
            agent_runtime: today,
            default: today,
        }
    }
}

impl RateLimitConfig {
    /// Each class with its section's name.
    pub fn classes(&self) -> [(&'static str, RateQuota); 6] {
        [
            ("message", self.message),
            ("trigger", self.trigger),
            ("interaction", self.interaction),
            ("write", self.write),
            ("agent_runtime", self.agent_runtime),
            ("default", self.default),
        ]
    }

    pub(super) fn validate(&self) -> anyhow::Result<()> {
        for (class, q) in self.classes() {
            require_positive(&[
                (
                    &format!("ratelimit.{class}.per_second"),
                    u64::from(q.per_second),
                ),
                (&format!("ratelimit.{class}.burst"), u64::from(q.burst)),
            ])?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_names_its_class_and_key() {
        let mut c = RateLimitConfig::default();
        c.validate().unwrap();
        c.agent_runtime.burst = 0;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("ratelimit.agent_runtime.burst"), "{e}");
        c.agent_runtime.burst = 1;
        c.message.per_second = 0;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("ratelimit.message.per_second"), "{e}");
    }
}
