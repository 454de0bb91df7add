//! `[webhooks]` and `[egress]`: the sealing key of webhook signing keys, and
//! the rules for every request the hub sends out.

use serde::{Deserialize, Serialize};

use super::require_positive;

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

impl EgressConfig {
    /// Every entry parses, and the private override only narrows the
    /// allowlist: an override entry that is not allowlisted would do nothing,
    /// which is almost certainly a mistake worth refusing at startup.
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        use crate::domain::egress_policy::HostPort;
        require_positive(&[
            ("egress.connect_timeout_ms", self.connect_timeout_ms),
            ("egress.request_timeout_ms", self.request_timeout_ms),
            ("egress.max_response_bytes", self.max_response_bytes as u64),
        ])?;
        let mut allowed = Vec::new();
        for entry in &self.allowlist {
            allowed.push(
                HostPort::parse(entry).map_err(|m| anyhow::anyhow!("egress.allowlist: {m}"))?,
            );
        }
        for entry in &self.private_override {
            let hp = HostPort::parse(entry)
                .map_err(|m| anyhow::anyhow!("egress.private_override: {m}"))?;
            if !allowed.contains(&hp) {
                anyhow::bail!(
                    "egress.private_override: {entry:?} is not on egress.allowlist; the override never replaces the allowlist"
                );
            }
        }
        if self.connect_timeout_ms > self.request_timeout_ms {
            anyhow::bail!("egress.connect_timeout_ms must not exceed egress.request_timeout_ms");
        }
        Ok(())
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
    /// Subscriptions (ADR 0033): how often the delivery worker looks for
    /// due subscriptions.
    pub poll_interval_ms: u64,
    /// Subscriptions delivering at once per hub.
    pub max_concurrent: u32,
    /// How long a claim on a subscription lasts; at least twice
    /// `egress.request_timeout_ms`, so a live delivery is never repeated by
    /// another hub process.
    pub claim_ms: u64,
    /// Events read from the app's log per step while looking for the next
    /// one a subscription takes.
    pub read_batch: u32,
    /// The first retry's delay; each further one doubles it.
    pub retry_base_ms: u64,
    /// No retry waits longer, whatever the backoff or `Retry-After` says.
    pub retry_max_delay_secs: u64,
    /// A subscription failing this long is disabled.
    pub disable_after_hours: u64,
    /// How long the delivery log keeps an attempt.
    pub delivery_log_retention_hours: u64,
    /// Subscriptions an app may hold.
    pub max_subscriptions_per_app: u32,
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
            .field("poll_interval_ms", &self.poll_interval_ms)
            .field("max_concurrent", &self.max_concurrent)
            .field("claim_ms", &self.claim_ms)
            .field("read_batch", &self.read_batch)
            .field("retry_base_ms", &self.retry_base_ms)
            .field("retry_max_delay_secs", &self.retry_max_delay_secs)
            .field("disable_after_hours", &self.disable_after_hours)
            .field(
                "delivery_log_retention_hours",
                &self.delivery_log_retention_hours,
            )
            .field("max_subscriptions_per_app", &self.max_subscriptions_per_app)
            .finish()
    }
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        WebhooksConfig {
            key_encryption_key: String::new(),
            key_encryption_key_file: String::new(),
            rotation_overlap_hours: 24,
            poll_interval_ms: 500,
            max_concurrent: 16,
            claim_ms: 60_000,
            read_batch: 100,
            retry_base_ms: 1_000,
            retry_max_delay_secs: 3_600,
            disable_after_hours: 72,
            delivery_log_retention_hours: 168,
            max_subscriptions_per_app: 20,
        }
    }
}

impl WebhooksConfig {
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        if self.rotation_overlap_hours > 24 * 365 {
            anyhow::bail!("webhooks.rotation_overlap_hours must be at most 8760 (a year)");
        }
        require_positive(&[
            ("webhooks.poll_interval_ms", self.poll_interval_ms),
            ("webhooks.max_concurrent", u64::from(self.max_concurrent)),
            ("webhooks.claim_ms", self.claim_ms),
            ("webhooks.read_batch", u64::from(self.read_batch)),
            ("webhooks.retry_base_ms", self.retry_base_ms),
            ("webhooks.retry_max_delay_secs", self.retry_max_delay_secs),
            ("webhooks.disable_after_hours", self.disable_after_hours),
            (
                "webhooks.delivery_log_retention_hours",
                self.delivery_log_retention_hours,
            ),
            (
                "webhooks.max_subscriptions_per_app",
                u64::from(self.max_subscriptions_per_app),
            ),
        ])?;
        if self.read_batch > 1_000 {
            anyhow::bail!("webhooks.read_batch must be at most 1000");
        }
        if self.retry_base_ms > self.retry_max_delay_secs.saturating_mul(1_000) {
            anyhow::bail!("webhooks.retry_base_ms must not exceed webhooks.retry_max_delay_secs");
        }
        Ok(())
    }
}
