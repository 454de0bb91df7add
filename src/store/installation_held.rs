//! The installation check inside a verdict's transaction (ADR 0023 §7):
//! the task gate's accept and the lease's grant apply only while the app's
//! installation is active, read *held* (shared) in the same transaction, so a
//! suspend's compare-and-swap waits for the verdict or the verdict sees the
//! suspend. The installation is locked before the task or lease row, the
//! order uninstall takes them in, so neither waits on the other in a cycle.
//! (The message verdict checks it in its own statement: `sqlite` and
//! `postgres` `conversations.rs`.)

use uuid::Uuid;

use super::installations::{shared, InstallationDialect};
use super::sql::{Arg, Executor};
use super::StoreResult;
use crate::domain::installation::InstallationState;

/// Whether the app's live installation is active, held (shared) until
/// commit.
pub(super) async fn active<D: InstallationDialect>(
    ex: &mut dyn Executor,
    app_id: Uuid,
) -> StoreResult<bool> {
    let live = shared::<D>(
        ex,
        "app_id = $1 AND state <> 'uninstalled'",
        Arg::Id(app_id),
    )
    .await?;
    Ok(live.is_some_and(|i| i.state == InstallationState::Active))
}

/// The task's app, if the task exists.
pub(super) async fn app_of_task(ex: &mut dyn Executor, task: Uuid) -> StoreResult<Option<Uuid>> {
    ex.fetch_optional("SELECT app_id FROM tasks WHERE id = $1", &[Arg::Id(task)])
        .await?
        .map(|r| r.id("app_id"))
        .transpose()
}

/// The app of the task whose conversation holds the lease; `None` for a
/// lease outside tasks (no app decides it).
pub(super) async fn app_of_lease(ex: &mut dyn Executor, lease: Uuid) -> StoreResult<Option<Uuid>> {
    ex.fetch_optional(
        "SELECT t.app_id FROM leases l JOIN conversations c ON c.id = l.conversation_id \
         JOIN tasks t ON t.id = c.task_id WHERE l.id = $1",
        &[Arg::Id(lease)],
    )
    .await?
    .map(|r| r.id("app_id"))
    .transpose()
}
