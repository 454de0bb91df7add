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
    /// Most jobs that send to apps' URLs (command and interaction
    /// deliveries, verifications) running at once. Their own bound, apart
    /// from `jobs.max_concurrent`, so slow apps never hold the slots the
    /// gates and the lease expiries need.
    pub interaction_max_concurrent: u32,
}

impl Default for AppConfig {
    fn default() -> Self {
        AppConfig {
            interaction_timeout_ms: 3_000,
            interaction_max_concurrent: 64,
        }
    }
}

/// A person waits on a command's answer: longer than this is no answer.
pub const INTERACTION_TIMEOUT_LIMIT_MS: u64 = 30_000;

impl AppConfig {
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        require_positive(&[
            ("app.interaction_timeout_ms", self.interaction_timeout_ms),
            (
                "app.interaction_max_concurrent",
                u64::from(self.interaction_max_concurrent),
            ),
        ])?;
        if self.interaction_timeout_ms > INTERACTION_TIMEOUT_LIMIT_MS {
            anyhow::bail!(
                "app.interaction_timeout_ms must be at most {INTERACTION_TIMEOUT_LIMIT_MS}"
            );
        }
        Ok(())
    }
}

impl AppConfig {
    /// A URL job must end before its lock lapses, or another claim runs it
    /// again and the app gets a second request (ADR 0032 §3): a
    /// verification waits for two answers; a delivery waits for one, then
    /// writes a 200's reply as the app, which may pass an inline
    /// `message_authorize` gate (up to `hooks.max_timeout_ms`) and its
    /// grace (`jobs.inline_grace_ms`).
    pub(super) fn check_job_lock(
        &self,
        jobs: &super::JobsConfig,
        hooks: &super::HooksConfig,
    ) -> anyhow::Result<()> {
        let answer = self.interaction_timeout_ms;
        if jobs.lock_ms <= answer.saturating_mul(2) {
            anyhow::bail!("jobs.lock_ms must exceed twice app.interaction_timeout_ms, or a slow app's verification would run twice");
        }
        let delivery = answer
            .saturating_add(hooks.max_timeout_ms)
            .saturating_add(jobs.inline_grace_ms);
        if jobs.lock_ms <= delivery {
            anyhow::bail!("jobs.lock_ms must exceed app.interaction_timeout_ms plus hooks.max_timeout_ms plus jobs.inline_grace_ms, or a delivery whose reply waits on a gate would be sent twice");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn err(c: &Config) -> String {
        c.validate().unwrap_err().to_string()
    }

    #[test]
    fn the_timeout_is_bounded_by_its_documented_limit() {
        let mut c = Config::default();
        c.app.interaction_timeout_ms = 30_000;
        c.validate().unwrap();
        c.app.interaction_timeout_ms = 30_001;
        assert!(err(&c).contains("app.interaction_timeout_ms must be at most 30000"));
        c.app.interaction_timeout_ms = 0;
        assert!(err(&c).contains("app.interaction_timeout_ms must be greater than 0"));
    }

    #[test]
    fn the_delivery_bound_is_its_own_key() {
        let mut c = Config::default();
        assert_eq!(c.app.interaction_max_concurrent, 64);
        c.app.interaction_max_concurrent = 0;
        assert!(err(&c).contains("app.interaction_max_concurrent must be greater than 0"));
    }

    /// The lock covers the POST and the reply's inline gate with its grace,
    /// not only the gate or only the two answers of a verification.
    #[test]
    fn the_job_lock_covers_a_delivery_and_its_reply_gate() {
        let mut c = Config::default();
        c.app.interaction_timeout_ms = 10_000;
        c.hooks.max_timeout_ms = 60_000;
        c.jobs.inline_grace_ms = 5_000;
        c.jobs.lock_ms = 75_000;
        let e = err(&c);
        assert!(
            e.contains("jobs.lock_ms must exceed app.interaction_timeout_ms plus hooks.max_timeout_ms plus jobs.inline_grace_ms"),
            "{e}"
        );
        c.jobs.lock_ms = 75_001;
        c.validate().unwrap();
        c.hooks.max_timeout_ms = 1_000;
        c.hooks.min_timeout_ms = 100;
        c.jobs.lock_ms = 20_000;
        assert!(err(&c).contains("must exceed twice app.interaction_timeout_ms"));
    }
}
