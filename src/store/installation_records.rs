//! The records of the installation area ([`super::InstallationStore`]):
//! the row, what a write takes, and what each write answers.

use uuid::Uuid;

use super::{IdempotencyRecord, NewKey};
use crate::domain::event::{NewEvent, StoredEvent};
use crate::domain::installation::{
    effective_scopes, Actor, InstallationFacts, InstallationState, Scope, ScopeSet,
};
use crate::domain::manifest::Manifest;
use crate::domain::task::{Task, TaskState};
use crate::domain::Millis;

/// An `installations` row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InstallationRecord {
    pub id: Uuid,
    pub app_id: Uuid,
    pub state: InstallationState,
    /// What the manifest asked for at the last install or upgrade.
    pub requested: ScopeSet,
    /// What the operator consented to.
    pub granted: ScopeSet,
    pub created_at: Millis,
    pub updated_at: Millis,
}

impl InstallationRecord {
    /// Granted and still requested: what the app holds.
    pub fn effective(&self) -> ScopeSet {
        effective_scopes(self.requested, self.granted)
    }

    /// Whether events are written to the app's stream (ADR 0023 §6,
    /// "Fan-out"): only while it is active and holds `events:subscribe`.
    pub fn receives_events(&self) -> bool {
        self.state == InstallationState::Active && self.effective().contains(Scope::EventsSubscribe)
    }

    pub fn facts(&self) -> InstallationFacts {
        InstallationFacts {
            state: self.state,
            scopes: self.effective(),
        }
    }
}

/// An operator's install of an app that has no live installation.
#[derive(Clone, Debug)]
pub struct NewInstallation {
    pub id: Uuid,
    pub app_id: Uuid,
    /// What the caller read the manifest to request: the install's
    /// transaction reads it again, and a manifest changed meanwhile is a
    /// `Conflict` (so the answer, and its idempotent replay, say what is
    /// stored).
    pub requested: ScopeSet,
    /// The consent: a subset of `requested`, or a `Conflict`.
    pub granted: ScopeSet,
    /// Stored only when the app has no active key (after an uninstall),
    /// so an installed app always has a way in and never two.
    pub key: Option<NewKey>,
    pub idem: Option<IdempotencyRecord>,
    pub actor: Actor,
    pub now: Millis,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Installed {
    pub installation: InstallationRecord,
    /// True when `NewInstallation::key` was stored.
    pub key_issued: bool,
    /// The events written with it: publish them after the commit.
    pub events: Vec<StoredEvent>,
}

/// A write that changed a live row: the row before and after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Changed {
    pub before: InstallationRecord,
    pub after: InstallationRecord,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Upgraded {
    /// The manifest the upgrade replaced.
    pub previous: Manifest,
    /// The live installation before and after; `None` for an app without
    /// one (pending or uninstalled: only the manifest changed).
    pub installation: Option<Changed>,
    /// What it did to the app's manifest commands (nothing without a live
    /// installation: the install creates them from the manifest it meets).
    pub commands: super::commands::CommandChanges,
    pub events: Vec<StoredEvent>,
    /// A new `interactionsUrl`: unverified, its check a job written with
    /// the upgrade (ADR 0032 §2).
    pub url_check: bool,
}

/// A change and the events written in its transaction.
#[derive(Clone, Debug, PartialEq)]
pub struct Committed<T> {
    pub change: T,
    /// Publish them after the commit.
    pub events: Vec<StoredEvent>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transitioned {
    Moved(Changed),
    /// An idempotent repeat (suspend of a suspended one, resume of an
    /// active one): nothing written, nothing audited.
    Unchanged(InstallationRecord),
}

/// What an uninstall did, in its one transaction.
#[derive(Clone, Debug, PartialEq)]
pub struct Uninstalled {
    pub change: Changed,
    pub revoked_keys: Vec<String>,
    /// The tasks it failed.
    pub failed_tasks: Vec<FailedTask>,
    /// The leases it ended.
    pub ended_leases: Vec<Uuid>,
    /// The names of the commands it removed.
    pub removed_commands: Vec<String>,
    /// Their events, stored: publish them after the commit.
    pub events: Vec<StoredEvent>,
}

/// A task an uninstall failed: as it is now, and the state it failed from
/// (who has heard of it differs: a waiting task only its initiator).
#[derive(Clone, Debug, PartialEq)]
pub struct FailedTask {
    pub task: Task,
    pub was: TaskState,
}

/// The events telling of an installation as a change left it (the app's
/// `app/installation/changed`): the caller's, as [`FailureEvents`] are.
pub type ChangeEvents<'a> = &'a (dyn Fn(&InstallationRecord) -> Vec<NewEvent> + Send + Sync);

/// The events telling of a task an uninstall failed: the caller's, so the
/// store writes them without knowing the protocol's names.
pub type FailureEvents<'a> = &'a (dyn Fn(&FailedTask) -> Vec<NewEvent> + Send + Sync);
