//! Grants whose subject is an app (ADR 0023 §6, "Grants to apps"): refused
//! while the app has no live installation, and each put or delete audited
//! as `grant.manage`, both in the grant's own transaction.
//!
//! The put holds the app's live installation row (PostgreSQL `FOR UPDATE`,
//! SQLite's write lock) as its transaction's first statement. Uninstall
//! takes the same row before it deletes the app's grants, so of a grant and
//! an uninstall racing, one always wins whole: the grant commits first and
//! the uninstall then deletes it, or the uninstall commits first and the
//! grant finds no live row. Neither waits on the other in a cycle: the put
//! locks nothing before the row, and uninstall nothing the put holds.

use uuid::Uuid;

use super::audit_actions::NewAction;
use super::installations::{installation_row, locked, InstallationDialect, INSTALLATION_COLUMNS};
use super::sql::{Arg, Executor};
use super::{InstallationRecord, StoreError, StoreResult};
use crate::domain::authz::level::Holder;
use crate::domain::installation::{Actor, LifecycleAction};
use crate::domain::Millis;

/// The `Conflict` of a grant to an app without a live installation
/// (pending, or uninstalled): `http` answers it 409 `app_not_installed`.
pub const APP_NOT_INSTALLED: &str = "the app has no live installation";

/// Who the audit records for a grant's `granted_by`: the operator (none)
/// or the person managing the place (the only principals `grant.manage`
/// admits).
pub fn actor_of(by: Option<Uuid>) -> Actor {
    by.map_or(Actor::Operator, Actor::Person)
}

/// The app a grant's subject is, if it is one. A principal's kind never
/// changes, so it is read before the transaction (whose first statement
/// must be the lock, see the module's doc).
pub(super) async fn app_subject(
    ex: &mut dyn Executor,
    subject: Holder,
) -> StoreResult<Option<Uuid>> {
    let Holder::Principal(id) = subject else {
        return Ok(None);
    };
    is_app(ex, id).await.map(|app| app.then_some(id))
}

async fn is_app(ex: &mut dyn Executor, id: Uuid) -> StoreResult<bool> {
    let row = ex
        .fetch_optional(
            "SELECT 1 AS one FROM principals WHERE id = $1 AND kind = 'app'",
            &[Arg::Id(id)],
        )
        .await?;
    Ok(row.is_some())
}

/// The app's live installation, held until commit; `Conflict`
/// [`APP_NOT_INSTALLED`] without one.
pub(super) async fn hold_installation<D: InstallationDialect>(
    ex: &mut dyn Executor,
    app_id: Uuid,
) -> StoreResult<InstallationRecord> {
    locked::<D>(
        ex,
        "app_id = $1 AND state <> 'uninstalled'",
        Arg::Id(app_id),
    )
    .await?
    .ok_or_else(|| StoreError::Conflict(APP_NOT_INSTALLED.into()))
}

/// The app's live installation as the deleting transaction sees it (no
/// lock: a delete is allowed in every state, and the row is only recorded).
async fn live_installation(
    ex: &mut dyn Executor,
    app_id: Uuid,
) -> StoreResult<Option<InstallationRecord>> {
    let sql = format!(
        "SELECT {INSTALLATION_COLUMNS} FROM installations \
         WHERE app_id = $1 AND state <> 'uninstalled'"
    );
    ex.fetch_optional(&sql, &[Arg::Id(app_id)])
        .await?
        .map(|r| installation_row(&r))
        .transpose()
}

/// The `grant.manage` row of a grant put or deleted on `app_id`: the
/// installation as it stands (a grant changes neither its scopes nor its
/// state, so before and after are the same row; both absent for an app
/// without one). No level, place or grant id: `audit_actions` has no column
/// for them, and its state columns hold installation states only.
async fn record(
    ex: &mut dyn Executor,
    actor: Actor,
    app_id: Uuid,
    installation: Option<&InstallationRecord>,
    at: Millis,
) -> StoreResult<()> {
    NewAction {
        actor,
        action: LifecycleAction::GrantManage,
        app_id,
        before: installation,
        after: installation,
        at,
        details: None,
    }
    .record(ex)
    .await
}

/// The audit of a put on an app, with the row [`hold_installation`] holds.
pub(super) async fn record_put(
    ex: &mut dyn Executor,
    actor: Actor,
    installation: &InstallationRecord,
    at: Millis,
) -> StoreResult<()> {
    record(ex, actor, installation.app_id, Some(installation), at).await
}

/// The audit of a deleted grant, when its subject (`subject_kind`,
/// `subject_id` of the deleted row) is an app.
pub(super) async fn record_delete(
    ex: &mut dyn Executor,
    actor: Actor,
    subject_kind: &str,
    subject_id: Uuid,
    at: Millis,
) -> StoreResult<()> {
    if subject_kind != "principal" || !is_app(ex, subject_id).await? {
        return Ok(());
    }
    let installation = live_installation(ex, subject_id).await?;
    record(ex, actor, subject_id, installation.as_ref(), at).await
}
