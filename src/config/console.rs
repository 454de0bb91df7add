//! `[console]`: the operator's web console at `/console` (ADR 0030): its
//! sessions' lifetimes and number, how often its live view reads the store,
//! when a waiting task counts as stuck, and how many rows a list shows.

use serde::{Deserialize, Serialize};

use super::require_positive;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsoleConfig {
    /// A session unused this long (no login, page load or action) ends.
    pub session_idle_secs: u64,
    /// A session ends this long after its login, however used.
    pub session_max_secs: u64,
    /// Sessions held at most, over every node (they are in the database,
    /// ADR 0036); a login past it ends the oldest.
    pub max_sessions: usize,
    /// How often the live view reads the store and the registry, while at
    /// least one console is open (one reader for all of them).
    pub poll_interval_ms: u64,
    /// A task `waiting` for longer than this is shown as stuck.
    pub stuck_waiting_secs: u64,
    /// Rows each list of the live view holds at most (connections, apps,
    /// waiting tasks, leases, denials); counts are always whole.
    pub list_limit: u32,
    /// Mark the session cookie `Secure` even when the request did not come
    /// through a TLS proxy (`X-Forwarded-Proto: https` marks it always).
    pub secure_cookie: bool,
    /// Live streams (`/console/api/stream`) open at once, over all
    /// sessions; each holds a connection, so a stuck tab cannot pile them
    /// up.
    pub max_streams: usize,
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        ConsoleConfig {
            session_idle_secs: 1_800,
            session_max_secs: 43_200,
            max_sessions: 64,
            poll_interval_ms: 2_000,
            stuck_waiting_secs: 300,
            list_limit: 200,
            secure_cookie: false,
            max_streams: 16,
        }
    }
}

/// The store is read at most ten times a second, and at least once a minute.
pub const POLL_INTERVAL_MS: std::ops::RangeInclusive<u64> = 100..=60_000;
/// A list past this is no longer a page an operator reads.
const LIST_LIMIT_MAX: u32 = 2_000;
/// A week: a session meant to outlive it is a credential left lying about.
const SESSION_MAX_SECS_LIMIT: u64 = 7 * 86_400;
const MAX_SESSIONS_LIMIT: usize = 10_000;
const MAX_STREAMS_LIMIT: usize = 1_000;

impl ConsoleConfig {
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        require_positive(&[
            ("console.session_idle_secs", self.session_idle_secs),
            ("console.session_max_secs", self.session_max_secs),
            ("console.max_sessions", self.max_sessions as u64),
            ("console.stuck_waiting_secs", self.stuck_waiting_secs),
            ("console.list_limit", u64::from(self.list_limit)),
            ("console.max_streams", self.max_streams as u64),
        ])?;
        if !POLL_INTERVAL_MS.contains(&self.poll_interval_ms) {
            anyhow::bail!(
                "console.poll_interval_ms must be from {} to {}",
                POLL_INTERVAL_MS.start(),
                POLL_INTERVAL_MS.end()
            );
        }
        if self.session_max_secs > SESSION_MAX_SECS_LIMIT {
            anyhow::bail!("console.session_max_secs must be at most {SESSION_MAX_SECS_LIMIT}");
        }
        if self.session_idle_secs > self.session_max_secs {
            anyhow::bail!("console.session_idle_secs must not exceed console.session_max_secs");
        }
        if self.max_sessions > MAX_SESSIONS_LIMIT {
            anyhow::bail!("console.max_sessions must be at most {MAX_SESSIONS_LIMIT}");
        }
        if self.max_streams > MAX_STREAMS_LIMIT {
            anyhow::bail!("console.max_streams must be at most {MAX_STREAMS_LIMIT}");
        }
        if self.list_limit > LIST_LIMIT_MAX {
            anyhow::bail!("console.list_limit must be at most {LIST_LIMIT_MAX}");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_checked_naming_their_keys() {
        let err = |c: &ConsoleConfig| c.validate().unwrap_err().to_string();
        let mut c = ConsoleConfig::default();
        c.validate().unwrap();
        c.poll_interval_ms = 99;
        assert!(err(&c).contains("console.poll_interval_ms must be from 100"));
        c.poll_interval_ms = 60_001;
        assert!(err(&c).contains("console.poll_interval_ms"));
        c.poll_interval_ms = 100;
        c.session_idle_secs = c.session_max_secs + 1;
        assert!(err(&c).contains("console.session_idle_secs must not exceed"));
        c.session_idle_secs = 0;
        assert!(err(&c).contains("console.session_idle_secs must be greater than 0"));
        c.session_idle_secs = 60;
        c.session_max_secs = SESSION_MAX_SECS_LIMIT + 1;
        assert!(err(&c).contains("console.session_max_secs must be at most"));
        c.session_max_secs = 3_600;
        c.list_limit = LIST_LIMIT_MAX + 1;
        assert!(err(&c).contains("console.list_limit"));
        c.list_limit = 10;
        c.max_sessions = 0;
        assert!(err(&c).contains("console.max_sessions must be greater than 0"));
        c.max_sessions = 1;
        c.validate().unwrap();
    }
}
