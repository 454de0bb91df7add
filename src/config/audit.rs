//! `[audit]`: how denials are aggregated, flushed and kept (ADR 0020 §4).

use serde::{Deserialize, Serialize};

use super::require_positive;

/// The longest retention the audit accepts: ten years.
const MAX_RETENTION_DAYS: u64 = 3650;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuditConfig {
    /// A record's window: it opens at its first denial, and later denials
    /// of the same key open a new record.
    pub deny_aggregate_window_ms: u64,
    /// How often open records are written to the store.
    pub flush_interval_ms: u64,
    /// Records held in memory at most; past it, a denial is counted as
    /// dropped and a flush starts at once.
    pub max_open_records: usize,
    /// Records whose last denial is older than this are pruned.
    pub retention_days: u64,
    /// Default and largest `limit` of `GET /api/v1/audit` and
    /// `switchboard audit list`.
    pub page_default: u32,
    pub page_max: u32,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            deny_aggregate_window_ms: 60_000,
            flush_interval_ms: 1_000,
            max_open_records: 10_000,
            retention_days: 90,
            page_default: 100,
            page_max: 1000,
        }
    }
}

impl AuditConfig {
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        require_positive(&[
            (
                "audit.deny_aggregate_window_ms",
                self.deny_aggregate_window_ms,
            ),
            ("audit.flush_interval_ms", self.flush_interval_ms),
            ("audit.max_open_records", self.max_open_records as u64),
            ("audit.page_default", u64::from(self.page_default)),
            ("audit.page_max", u64::from(self.page_max)),
        ])?;
        if self.page_default > self.page_max {
            anyhow::bail!("audit.page_default must not exceed audit.page_max");
        }
        if !(1..=MAX_RETENTION_DAYS).contains(&self.retention_days) {
            anyhow::bail!("audit.retention_days must be from 1 to {MAX_RETENTION_DAYS}");
        }
        Ok(())
    }

    pub fn retention_ms(&self) -> i64 {
        self.retention_days as i64 * 86_400_000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_bad_value_names_its_key() {
        let err = |c: &AuditConfig| c.validate().unwrap_err().to_string();
        AuditConfig::default().validate().unwrap();
        type Spoil = fn(&mut AuditConfig);
        let cases: [(Spoil, &str); 8] = [
            (
                |c| c.deny_aggregate_window_ms = 0,
                "audit.deny_aggregate_window_ms",
            ),
            (|c| c.flush_interval_ms = 0, "audit.flush_interval_ms"),
            (|c| c.max_open_records = 0, "audit.max_open_records"),
            (|c| c.retention_days = 0, "audit.retention_days"),
            (|c| c.retention_days = 3651, "audit.retention_days"),
            (|c| c.page_default = 0, "audit.page_default"),
            (|c| c.page_max = 0, "audit.page_max"),
            (|c| c.page_default = c.page_max + 1, "audit.page_default"),
        ];
        for (spoil, key) in cases {
            let mut c = AuditConfig::default();
            spoil(&mut c);
            assert!(err(&c).contains(key), "{key}: {}", err(&c));
        }
        let edge = AuditConfig {
            retention_days: 3650,
            ..AuditConfig::default()
        };
        edge.validate().unwrap();
    }
}
