//! Hosted App Card runs (ADR 0031): a run's states and the reasons it ends
//! or is refused, the broker's wire (`wire`) and the primitives' params
//! (`primitives`). Pure: the runner in `crate::hosted` does the I/O.

pub mod invite;
pub mod primitives;
pub mod profile;
pub mod wire;

use serde::{Deserialize, Serialize};

/// Where a run is. `exited` is the child ending by itself (with its exit
/// code); `failed` is the runner ending it, or its start failing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    Starting,
    Running,
    Exited,
    Failed,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Starting => "starting",
            RunState::Running => "running",
            RunState::Exited => "exited",
            RunState::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<RunState> {
        [
            RunState::Starting,
            RunState::Running,
            RunState::Exited,
            RunState::Failed,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }

    pub fn is_live(self) -> bool {
        matches!(self, RunState::Starting | RunState::Running)
    }
}

/// Why the runner ended a run (`failed`); each limit has its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndReason {
    TimeLimit,
    MemoryLimit,
    OutputLimit,
    Stopped,
    /// Killed by a signal the runner did not send.
    Signal,
    SpawnFailed,
    HubShutdown,
    /// The process that ran it stopped beating (killed, crashed): another
    /// hub process ended its row (the orphan sweep).
    OwnerLost,
}

impl EndReason {
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::TimeLimit => "time_limit",
            EndReason::MemoryLimit => "memory_limit",
            EndReason::OutputLimit => "output_limit",
            EndReason::Stopped => "stopped",
            EndReason::Signal => "signal",
            EndReason::SpawnFailed => "spawn_failed",
            EndReason::HubShutdown => "hub_shutdown",
            EndReason::OwnerLost => "owner_lost",
        }
    }
}

/// Why a run is refused before anything starts (no run row is written).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RunRefusal {
    #[error("no card {0:?} is installed")]
    CardNotFound(String),
    #[error("card {0} {1} is not the one the catalogue holds: install it first")]
    CardNotInstalled(String, String),
    #[error("card {0} {1} was installed without its files: install its package")]
    PackageMissing(String, String),
    /// A card check failed on the bytes as read just before the start;
    /// `code` is the card check's (`integrity_mismatch`, ...).
    #[error("{message}")]
    Card { code: &'static str, message: String },
    #[error("the card has no entry script (entry.scripts is empty)")]
    NoEntry,
    #[error("the app of this card is not installed")]
    AppNotInstalled,
    #[error("the app of this card is suspended")]
    AppSuspended,
    #[error("no network namespace for the child ({0}); set hosted.allow_unisolated = true to run without one")]
    NetworkIsolationUnavailable(String),
    #[error("no Landlock file rules for the child ({0}); set hosted.allow_unisolated = true to run without them")]
    FileIsolationUnavailable(String),
    #[error("this hub already runs hosted.max_live_runs runs")]
    TooManyRuns,
    #[error("the entry's interpreter {0:?} is not on the hub's PATH")]
    NoInterpreter(String),
    /// A beatless app runs once at a time; its mail waits for the live run.
    #[error("a run of this beatless app is live")]
    AppBusy,
}

impl RunRefusal {
    pub fn code(&self) -> &'static str {
        match self {
            RunRefusal::CardNotFound(_) => "card_not_found",
            RunRefusal::CardNotInstalled(..) => "card_not_installed",
            RunRefusal::PackageMissing(..) => "package_missing",
            RunRefusal::Card { code, .. } => code,
            RunRefusal::NoEntry => "no_entry",
            RunRefusal::AppNotInstalled => "app_not_installed",
            RunRefusal::AppSuspended => "app_suspended",
            RunRefusal::NetworkIsolationUnavailable(_) => "network_isolation_unavailable",
            RunRefusal::FileIsolationUnavailable(_) => "file_isolation_unavailable",
            RunRefusal::TooManyRuns => "too_many_runs",
            RunRefusal::NoInterpreter(_) => "no_interpreter",
            RunRefusal::AppBusy => "app_busy",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_and_only_two_are_live() {
        for s in [
            RunState::Starting,
            RunState::Running,
            RunState::Exited,
            RunState::Failed,
        ] {
            assert_eq!(RunState::parse(s.as_str()), Some(s));
        }
        assert!(RunState::Running.is_live() && !RunState::Exited.is_live());
        assert_eq!(RunState::parse("stopped"), None);
    }
}
