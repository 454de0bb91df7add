//! `[hosted]`: hosted App Card runs and their capability broker (ADR 0031).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HostedConfig {
    /// Longest a run may live before it ends `time_limit`.
    pub wall_time_ms: u64,
    /// Most resident memory of a run's child before it ends `memory_limit`.
    pub memory_bytes: u64,
    /// How often the child's resident memory is sampled.
    pub memory_sample_ms: u64,
    /// The kernel's address-space cap (`RLIMIT_AS`), the backstop between
    /// two samples.
    pub address_space_bytes: u64,
    /// Most bytes of stdout and stderr together before the run ends
    /// `output_limit`; also the per-run log's cap.
    pub output_max_bytes: u64,
    /// Most bytes of a live run's log kept on its row while it runs: the
    /// last ones, so a reader sees what the run printed most recently and
    /// one write costs at most this much. The whole log is stored at the end.
    pub live_log_max_bytes: u64,
    /// `RLIMIT_NOFILE` of the child.
    pub max_open_files: u64,
    /// Longest broker request line; a longer one is `too_large`.
    pub broker_max_line_bytes: usize,
    /// How often a running run beats on its row (its heartbeat, for the
    /// orphan sweep) and reads a stop another process requested.
    pub control_interval_ms: u64,
    /// Most keys of one app's `remember` memory.
    pub memory_max_keys: u64,
    /// Longest `remember`/`recall`/`coord` key, in bytes.
    pub memory_key_max_bytes: usize,
    /// Longest `remember`/`coord` value, in bytes.
    pub memory_value_max_bytes: usize,
    /// The interpreter of a `.py` entry, resolved on the hub's `PATH`.
    pub python: String,
    /// Where each run's fresh copy of its files is made (default: the
    /// system's temp dir).
    pub work_dir: Option<PathBuf>,
    /// Start runs without their own network namespace when the kernel
    /// refuses one (recorded on the run as `isolated: false`).
    pub allow_unisolated: bool,
    /// Most runs one hub process keeps alive at once.
    pub max_live_runs: usize,
    /// What a run's child may read and execute beside its own copy (its
    /// interpreter's install tree is added); it writes only its copy.
    pub read_paths: Vec<PathBuf>,
    /// How long a live run's owner may go without a heartbeat (it beats
    /// every `control_interval_ms`) before another hub process ends the run
    /// `owner_lost`; also how often a serving hub sweeps.
    pub orphan_after_ms: u64,
    /// How long a beatless app's wake job waits while one of its runs is
    /// live before it looks again.
    pub wake_retry_ms: u64,
    /// Longest persona an app may `set_persona`, in bytes.
    pub persona_max_bytes: usize,
    /// Longest profile (its JSON) an app may `set_profile`, in bytes.
    pub profile_max_bytes: usize,
    /// Most uses one invite link may be made with (`invite_create`'s
    /// `max_uses`).
    pub invite_max_uses: u64,
    /// Longest an invite link may live (`invite_create`'s `ttl_seconds`).
    pub invite_max_ttl_seconds: u64,
    /// The uses of a link made without `max_uses`.
    pub invite_default_uses: u64,
    /// How long a link made without `ttl_seconds` lives.
    pub invite_default_ttl_seconds: u64,
    /// Most live links (not expired, a use left) one app may hold; an
    /// `invite_create` past it is refused. Expired and used-up rows are
    /// deleted by the retention task.
    pub invite_max_live: u64,
}

impl Default for HostedConfig {
    fn default() -> Self {
        HostedConfig {
            wall_time_ms: 300_000,
            memory_bytes: 256 << 20,
            memory_sample_ms: 20,
            address_space_bytes: 4 << 30,
            output_max_bytes: 1 << 20,
            live_log_max_bytes: 65_536,
            max_open_files: 64,
            broker_max_line_bytes: 131_072,
            control_interval_ms: 500,
            memory_max_keys: 1_000,
            memory_key_max_bytes: 128,
            memory_value_max_bytes: 16_384,
            python: "python3".into(),
            work_dir: None,
            allow_unisolated: false,
            max_live_runs: 16,
            read_paths: ["/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc"]
                .into_iter()
                .map(PathBuf::from)
                .collect(),
            orphan_after_ms: 10_000,
            wake_retry_ms: 200,
            persona_max_bytes: 16_384,
            profile_max_bytes: 2_048,
            invite_max_uses: 100,
            invite_max_ttl_seconds: 7 * 24 * 3600,
            invite_default_uses: 1,
            invite_default_ttl_seconds: 24 * 3600,
            invite_max_live: 1_000,
        }
    }
}

/// The broker reads a line into memory: 16 MiB bounds what one run costs.
const LINE_LIMIT: usize = 16 << 20;
/// Stored with the run: 64 MiB bounds one row.
const OUTPUT_LIMIT: u64 = 64 << 20;

impl HostedConfig {
    /// The live copy's cap: `hosted.live_log_max_bytes`, but never more
    /// than the run's whole log may be (`hosted.output_max_bytes`).
    pub fn live_log_bytes(&self) -> usize {
        self.live_log_max_bytes.min(self.output_max_bytes) as usize
    }

    pub(super) fn validate(&self) -> anyhow::Result<()> {
        super::require_positive(&[
            ("hosted.wall_time_ms", self.wall_time_ms),
            ("hosted.memory_bytes", self.memory_bytes),
            ("hosted.memory_sample_ms", self.memory_sample_ms),
            ("hosted.address_space_bytes", self.address_space_bytes),
            ("hosted.output_max_bytes", self.output_max_bytes),
            ("hosted.live_log_max_bytes", self.live_log_max_bytes),
            ("hosted.max_open_files", self.max_open_files),
            ("hosted.control_interval_ms", self.control_interval_ms),
            ("hosted.memory_max_keys", self.memory_max_keys),
            (
                "hosted.memory_key_max_bytes",
                self.memory_key_max_bytes as u64,
            ),
            (
                "hosted.memory_value_max_bytes",
                self.memory_value_max_bytes as u64,
            ),
            ("hosted.max_live_runs", self.max_live_runs as u64),
            ("hosted.wake_retry_ms", self.wake_retry_ms),
            ("hosted.persona_max_bytes", self.persona_max_bytes as u64),
            ("hosted.profile_max_bytes", self.profile_max_bytes as u64),
            ("hosted.invite_max_uses", self.invite_max_uses),
            ("hosted.invite_max_ttl_seconds", self.invite_max_ttl_seconds),
            ("hosted.invite_default_uses", self.invite_default_uses),
            (
                "hosted.invite_default_ttl_seconds",
                self.invite_default_ttl_seconds,
            ),
            ("hosted.invite_max_live", self.invite_max_live),
        ])?;
        if !(2..=LINE_LIMIT).contains(&self.broker_max_line_bytes) {
            anyhow::bail!("hosted.broker_max_line_bytes must be from 2 to {LINE_LIMIT}");
        }
        self.check_fits_a_line()?;
        if self.invite_default_uses > self.invite_max_uses {
            anyhow::bail!("hosted.invite_default_uses must be at most hosted.invite_max_uses");
        }
        if self.invite_default_ttl_seconds > self.invite_max_ttl_seconds {
            anyhow::bail!(
                "hosted.invite_default_ttl_seconds must be at most hosted.invite_max_ttl_seconds"
            );
        }
        if self.output_max_bytes > OUTPUT_LIMIT {
            anyhow::bail!("hosted.output_max_bytes must be at most {OUTPUT_LIMIT}");
        }
        if self.address_space_bytes < self.memory_bytes {
            anyhow::bail!("hosted.address_space_bytes must be at least hosted.memory_bytes");
        }
        if let Some(p) = self.read_paths.iter().find(|p| !p.is_absolute()) {
            anyhow::bail!(
                "hosted.read_paths entries must be absolute ({})",
                p.display()
            );
        }
        if self.orphan_after_ms < 3 * self.control_interval_ms {
            anyhow::bail!(
                "hosted.orphan_after_ms must be at least 3 times hosted.control_interval_ms"
            );
        }
        if self.python.is_empty() {
            anyhow::bail!("hosted.python must name an interpreter");
        }
        Ok(())
    }
}

/// What a `set_persona`/`set_profile` request carries beside its value:
/// the request's other members and quoting. A maximum that leaves less
/// than this under `hosted.broker_max_line_bytes` cannot be reached.
const REQUEST_OVERHEAD: usize = 256;

/// How many bytes one byte of a value may take in a request line once
/// JSON-escaped: a control character is written `\u00XX`, six bytes for
/// one. Nothing grows more: `"` and `\\` take two, and a non-ASCII
/// character escaped as `\uXXXX` (Python's `json.dumps` by default) takes
/// six for its two to four bytes (twelve, a surrogate pair, for four).
/// For a profile it is a conservative bound: its maximum already counts
/// its JSON (control characters escaped), so only `\uXXXX` re-escaping
/// of its non-ASCII text, at most three times, is left; one factor for
/// both keeps the rule one rule.
const ESCAPE_FACTOR: usize = 6;

impl HostedConfig {
    /// A persona or profile of its maximum, escaped at its worst, must fit
    /// in one broker line with its request around it: the maxima count the
    /// value's bytes, the line its JSON, so a smaller line would refuse a
    /// value the maximum allows.
    fn check_fits_a_line(&self) -> anyhow::Result<()> {
        for (key, max) in [
            ("hosted.persona_max_bytes", self.persona_max_bytes),
            ("hosted.profile_max_bytes", self.profile_max_bytes),
        ] {
            let line = max
                .saturating_mul(ESCAPE_FACTOR)
                .saturating_add(REQUEST_OVERHEAD);
            if line > self.broker_max_line_bytes {
                anyhow::bail!(
                    "{key} ({max}) JSON-escaped ({ESCAPE_FACTOR} times, {line} bytes with a \
                     request's {REQUEST_OVERHEAD}) must fit in hosted.broker_max_line_bytes \
                     ({}): a value of the maximum could not be sent",
                    self.broker_max_line_bytes
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_checked_naming_their_keys() {
        let err = |c: &HostedConfig| c.validate().unwrap_err().to_string();
        let mut c = HostedConfig::default();
        c.validate().unwrap();
        c.wall_time_ms = 0;
        assert!(err(&c).contains("hosted.wall_time_ms"));
        c = HostedConfig::default();
        c.broker_max_line_bytes = LINE_LIMIT + 1;
        assert!(err(&c).contains("hosted.broker_max_line_bytes"));
        c = HostedConfig::default();
        c.address_space_bytes = c.memory_bytes - 1;
        assert!(err(&c).contains("hosted.address_space_bytes"));
        c = HostedConfig::default();
        c.output_max_bytes = OUTPUT_LIMIT + 1;
        assert!(err(&c).contains("hosted.output_max_bytes"));
        c = HostedConfig::default();
        c.persona_max_bytes = c.broker_max_line_bytes;
        assert!(err(&c).contains("hosted.persona_max_bytes"));
        c = HostedConfig::default();
        c.broker_max_line_bytes = 2_048;
        c.persona_max_bytes = 128;
        assert!(err(&c).contains("hosted.profile_max_bytes"));
        c = HostedConfig::default();
        c.live_log_max_bytes = 0;
        assert!(err(&c).contains("hosted.live_log_max_bytes"));
        // Above the output cap it is no error (a deployment with a small
        // output cap needs no new key): the live copy is then the whole log.
        c = HostedConfig::default();
        c.output_max_bytes = 20_000;
        c.validate().unwrap();
        assert_eq!(c.live_log_bytes(), 20_000);
        c.output_max_bytes = c.live_log_max_bytes + 1;
        assert_eq!(c.live_log_bytes(), c.live_log_max_bytes as usize);
        c = HostedConfig::default();
        c.invite_default_uses = c.invite_max_uses + 1;
        assert!(err(&c).contains("hosted.invite_default_uses"));
        c = HostedConfig::default();
        c.invite_default_ttl_seconds = c.invite_max_ttl_seconds + 1;
        assert!(err(&c).contains("hosted.invite_default_ttl_seconds"));
        c = HostedConfig::default();
        c.invite_max_live = 0;
        assert!(err(&c).contains("hosted.invite_max_live"));
    }

    #[test]
    fn the_default_persona_fits_the_default_line_escaped() {
        let c = HostedConfig::default();
        assert_eq!(c.broker_max_line_bytes, 131_072);
        assert!(6 * c.persona_max_bytes + 256 <= c.broker_max_line_bytes);
        c.validate().unwrap();
    }

    #[test]
    fn a_maximum_that_exactly_fits_escaped_passes_and_one_more_byte_fails() {
        let line = 1_024;
        // 6 * 128 + 256 = 1024: exactly one line.
        let fits = 128;
        for key in ["hosted.persona_max_bytes", "hosted.profile_max_bytes"] {
            let mut c = HostedConfig {
                broker_max_line_bytes: line,
                persona_max_bytes: fits,
                profile_max_bytes: fits,
                ..HostedConfig::default()
            };
            c.validate().unwrap();
            if key == "hosted.persona_max_bytes" {
                c.persona_max_bytes = fits + 1;
            } else {
                c.profile_max_bytes = fits + 1;
            }
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(key) && e.contains("1030 bytes"), "{e}");
            c.broker_max_line_bytes = line + 6;
            c.validate().unwrap();
        }
    }
}
