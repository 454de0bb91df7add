//! `[events]`, `[messages]`, `[leases]` and `[jobs]`: retention and pages of
//! the event log, message bounds, lease lengths and the job runner.

use serde::{Deserialize, Serialize};

use super::require_positive;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EventsConfig {
    /// Events older than this are pruned.
    pub retention_hours: u64,
    /// Each audience keeps at most this many of its newest events.
    pub retention_max_per_audience: u64,
    pub prune_interval_ms: u64,
    /// Events read per query while replaying onto a socket.
    pub replay_batch: u32,
    /// Default and largest `limit` of `GET /api/v1/events`.
    pub page_default: u32,
    pub page_max: u32,
    /// Largest `wait` (seconds) of a long-poll.
    pub max_wait_seconds: u64,
}

impl Default for EventsConfig {
    fn default() -> Self {
        EventsConfig {
            retention_hours: 168,
            retention_max_per_audience: 1_000_000,
            prune_interval_ms: 60_000,
            replay_batch: 500,
            page_default: 100,
            page_max: 1000,
            max_wait_seconds: 30,
        }
    }
}

impl EventsConfig {
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        require_positive(&[
            ("events.retention_hours", self.retention_hours),
            (
                "events.retention_max_per_audience",
                self.retention_max_per_audience,
            ),
            ("events.prune_interval_ms", self.prune_interval_ms),
            ("events.replay_batch", self.replay_batch as u64),
            ("events.page_default", self.page_default as u64),
            ("events.page_max", self.page_max as u64),
        ])?;
        if self.page_default > self.page_max {
            anyhow::bail!("events.page_default must not exceed events.page_max");
        }
        Ok(())
    }
}

/// A bound on `messages.membership_cache_entries`: each entry holds up to
/// `messages.max_group_participants` ids, so a million is already gigabytes.
const MAX_MEMBERSHIP_CACHE_ENTRIES: usize = 1_000_000;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MessagesConfig {
    pub max_parts: usize,
    /// Largest total size of a message's parts (text bytes plus data JSON).
    pub max_bytes: usize,
    /// Most participants of a group conversation, the creator included.
    pub max_group_participants: usize,
    /// Largest `limit` of history and list pages.
    pub page_max: u32,
    /// Most nested arrays and objects in a data part (at most
    /// `domain::message::MAX_DATA_DEPTH`, which leaves room for every
    /// envelope within the JSON parsers' limit).
    pub max_data_depth: usize,
    /// Conversations whose membership the hub keeps in memory for the send
    /// path (0: read it from the store on every send).
    pub membership_cache_entries: usize,
}

impl Default for MessagesConfig {
    fn default() -> Self {
        MessagesConfig {
            max_parts: crate::domain::message::DEFAULT_MAX_PARTS,
            max_bytes: 64 * 1024,
            max_group_participants: crate::protocol::conversations::DEFAULT_MAX_GROUP_PARTICIPANTS,
            page_max: crate::protocol::params::DEFAULT_PAGE_MAX,
            max_data_depth: crate::domain::message::MAX_DATA_DEPTH,
            membership_cache_entries: 10_000,
        }
    }
}

impl MessagesConfig {
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        require_positive(&[
            ("messages.max_parts", self.max_parts as u64),
            ("messages.max_bytes", self.max_bytes as u64),
            (
                "messages.max_group_participants",
                self.max_group_participants as u64,
            ),
            ("messages.page_max", self.page_max as u64),
        ])?;
        if self.max_group_participants < 2 {
            anyhow::bail!("messages.max_group_participants must be at least 2");
        }
        if self.membership_cache_entries > MAX_MEMBERSHIP_CACHE_ENTRIES {
            anyhow::bail!("messages.membership_cache_entries must be at most {MAX_MEMBERSHIP_CACHE_ENTRIES} (0 disables the cache)");
        }
        let deepest = crate::domain::message::MAX_DATA_DEPTH;
        if !(1..=deepest).contains(&self.max_data_depth) {
            anyhow::bail!("messages.max_data_depth must be from 1 to {deepest} (deeper data would not fit in its envelope within the JSON parsers' nesting limit)");
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LeasesConfig {
    /// Lease length when a policy grants without naming one.
    pub default_timeout_ms: u64,
    /// Longest lease an app may grant.
    pub max_timeout_ms: u64,
    /// A held lease not resolved by the app within this is denied.
    pub max_hold_ms: u64,
}

impl Default for LeasesConfig {
    fn default() -> Self {
        LeasesConfig {
            default_timeout_ms: 30_000,
            max_timeout_ms: 600_000,
            max_hold_ms: 300_000,
        }
    }
}

impl LeasesConfig {
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        require_positive(&[
            ("leases.default_timeout_ms", self.default_timeout_ms),
            ("leases.max_timeout_ms", self.max_timeout_ms),
            ("leases.max_hold_ms", self.max_hold_ms),
        ])?;
        if self.default_timeout_ms > self.max_timeout_ms {
            anyhow::bail!("leases.default_timeout_ms must not exceed leases.max_timeout_ms");
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JobsConfig {
    /// How often the runner looks for due jobs (lease expiry precision).
    pub poll_interval_ms: u64,
    /// How long a claimed job stays locked; longer than any hook timeout.
    pub lock_ms: u64,
    /// Jobs claimed per poll.
    pub batch: u32,
    /// Extra time a job written for inline execution waits before the
    /// runner may take it (recovery after a crash).
    pub inline_grace_ms: u64,
    /// Most jobs the runner runs at once.
    pub max_concurrent: u32,
    /// Runs of a job that keeps failing before its fail-closed verdict is
    /// applied (the task fails, the message is blocked, the lease denied).
    pub max_attempts: u32,
}

impl Default for JobsConfig {
    fn default() -> Self {
        JobsConfig {
            poll_interval_ms: 100,
            lock_ms: 120_000,
            batch: 64,
            inline_grace_ms: 5_000,
            max_concurrent: 256,
            max_attempts: 10,
        }
    }
}

impl JobsConfig {
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        require_positive(&[
            ("jobs.poll_interval_ms", self.poll_interval_ms),
            ("jobs.lock_ms", self.lock_ms),
            ("jobs.batch", self.batch as u64),
            ("jobs.max_concurrent", self.max_concurrent as u64),
            ("jobs.max_attempts", self.max_attempts as u64),
        ])
    }
}
