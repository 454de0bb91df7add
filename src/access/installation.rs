//! An app subject's installation in the decision (ADR 0023 §6): read for
//! every app subject, whatever the target, from the hub's installation
//! cache. Step 2b is about the subject alone, so an inactive installation
//! is refused before the target is loaded at all (a hidden target and a
//! missing one cost nothing then), and only after the store confirmed it:
//! a resume the cache missed heals at once. A `scope_missing` decided on a
//! cached entry is decided again on a store read; it comes after
//! readability, so the target exists and nothing needs reloading.

use uuid::Uuid;

use super::load::{Reads, Source};
use crate::domain::authz::{check_subject, Action, Denial, Reason, Subject};
use crate::domain::installation::{InstallationFacts, InstallationState};
use crate::domain::PrincipalKind;
use crate::store::StoreResult;

/// The installation an app subject decides with, and whether it was read
/// from the store.
pub(super) struct Read {
    pub facts: Option<InstallationFacts>,
    pub from_store: bool,
}

/// The app subject's id; `None` for every other subject.
pub(super) fn app_of(subject: &Subject) -> Option<Uuid> {
    match *subject {
        Subject::Principal {
            id,
            kind: PrincipalKind::App,
            ..
        } => Some(id),
        _ => None,
    }
}

/// The app's installation: cached, but one that is not active only as the
/// store confirms it.
pub(super) async fn read(reads: &impl Reads, app_id: Uuid) -> StoreResult<Read> {
    let (facts, from_store) = reads.installation(app_id, Source::Cache).await?;
    let active = facts.is_some_and(|f| f.state == InstallationState::Active);
    if from_store || active {
        return Ok(Read { facts, from_store });
    }
    let (facts, _) = reads.installation(app_id, Source::Store).await?;
    Ok(Read {
        facts,
        from_store: true,
    })
}

/// Steps 1 to 2b on what [`read`] found: the denial that needs no target.
pub(super) fn refused(subject: &Subject, action: Action, read: &Read) -> Option<Denial> {
    check_subject(subject, action, read.facts).err()
}

/// A `scope_missing` on a cached entry: the store's installation to decide
/// again with, `None` when the denial stands as it is.
pub(super) async fn recheck_scope(
    reads: &impl Reads,
    app_id: Uuid,
    read: &Read,
    denial: &Denial,
) -> StoreResult<Option<Option<InstallationFacts>>> {
    if denial.reason != Reason::ScopeMissing || read.from_store {
        return Ok(None);
    }
    Ok(Some(reads.installation(app_id, Source::Store).await?.0))
}
