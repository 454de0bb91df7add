//! The steps of `InstallationStore::uninstall` (ADR 0023 §5), all in one
//! transaction: the row's CAS, the keys, the grants, the tasks, the leases,
//! the audit row and the events. A process that sees any of it sees all.

use uuid::Uuid;

use super::audit_actions::{ActionDetails, NewAction};
use super::components::disable_authored_by;
use super::identity::{revoke_active, IdentityDialect};
use super::installations::{
    locked, move_state, Changed, FailedTask, FailureEvents, InstallationDialect, Uninstalled,
};
use super::places::bump_rights_version;
use super::sql::{placeholders, Arg, Database, Executor};
use super::tasks::{participant_row, task_row, TASK_COLUMNS};
use super::{StoreError, StoreResult};
use crate::domain::event::{rfc3339, NewEvent};
use crate::domain::installation::{Actor, Transition};
use crate::domain::task::{Task, TaskFailure, TaskState, APP_UNINSTALLED};
use crate::domain::Millis;

pub(super) async fn run<D>(
    db: &D,
    id: Uuid,
    actor: Actor,
    now: Millis,
    events: FailureEvents<'_>,
) -> StoreResult<Uninstalled>
where
    D: Database + IdentityDialect + InstallationDialect,
{
    // Read before the transaction: on SQLite a transaction that reads
    // first cannot wait for another writer's lock (the upgrade to a write
    // fails at once), so its first statement is the lock below.
    let app_id = app_of(&mut *db.read().await?, id)
        .await?
        .ok_or(StoreError::NotFound)?;
    let mut tx = db.begin().await?;
    // The principal first, as every writer of this area locks: a key
    // rotation cannot mint a key the revoke below misses.
    D::lock_principal(&mut *tx, app_id).await?;
    let before = locked::<D>(&mut *tx, "id = $1", Arg::Id(id))
        .await?
        .ok_or(StoreError::NotFound)?;
    let after = move_state(&mut *tx, &before, Transition::Uninstall, now)
        .await?
        .ok_or_else(|| StoreError::Conflict("the installation is uninstalled".into()))?;
    let revoked_keys = revoke_active(&mut *tx, app_id, now).await?;
    delete_grants(&mut *tx, app_id).await?;
    let failed_tasks = fail_tasks(&mut *tx, app_id, now).await?;
    let ended_leases = end_leases(&mut *tx, app_id, now).await?;
    let commands = super::commands::remove_all(&mut *tx, app_id, now).await?;
    // Cards stay with their author; their components are disabled (ADR
    // 0027 §7), each card's `message.updated` written here, the count in
    // the audit row.
    let (disabled, card_events) = disable_authored_by(&mut *tx, app_id).await?;
    let details = ActionDetails {
        components_disabled: disabled,
        ..commands.details()
    };
    NewAction::of(actor, Transition::Uninstall.action(), Some(&before), &after)
        .with_details(details)
        .record(&mut *tx)
        .await?;
    // One append for the tasks' and the cards' events, after the cards'
    // locks (`components`), so streams are locked in one order.
    let mut new_events: Vec<NewEvent> = failed_tasks.iter().flat_map(events).collect();
    new_events.extend(card_events);
    let events = tx.append_events(&new_events, now).await?;
    tx.commit().await?;
    Ok(Uninstalled {
        change: Changed { before, after },
        revoked_keys,
        failed_tasks,
        ended_leases,
        removed_commands: commands.removed,
        events,
    })
}

/// An installation's app (it never changes, so it is read outside the
/// uninstall's transaction).
async fn app_of(ex: &mut dyn Executor, id: Uuid) -> StoreResult<Option<Uuid>> {
    ex.fetch_optional(
        "SELECT app_id FROM installations WHERE id = $1",
        &[Arg::Id(id)],
    )
    .await?
    .map(|r| r.id("app_id"))
    .transpose()
}

/// The app's own grants go, so a re-install starts without any; the
/// rights version tells other processes to drop their cached channels.
async fn delete_grants(ex: &mut dyn Executor, app_id: Uuid) -> StoreResult<()> {
    let deleted = ex
        .execute(
            "DELETE FROM grants WHERE subject_kind = 'principal' AND subject_id = $1",
            &[Arg::Id(app_id)],
        )
        .await?;
    if deleted > 0 {
        bump_rights_version(ex).await?;
    }
    Ok(())
}

/// The app's waiting and active tasks with their participants, in one
/// statement.
async fn open_tasks(ex: &mut dyn Executor, app_id: Uuid) -> StoreResult<Vec<Task>> {
    let sql = format!(
        "SELECT {TASK_COLUMNS}, p.agent_id, p.role FROM tasks t \
         LEFT JOIN task_participants p ON p.task_id = t.id \
         WHERE t.app_id = $1 AND t.state IN ('waiting', 'active') \
         ORDER BY t.id, p.role, p.agent_id"
    );
    let rows = ex.fetch_all(&sql, &[Arg::Id(app_id)]).await?;
    let mut tasks: Vec<Task> = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        let id = r.id("id")?;
        if i == 0 || tasks.last().map(|t| t.id) != Some(id) {
            tasks.push(task_row(r, Vec::new())?.task);
        }
        if r.opt_id("agent_id")?.is_some() {
            let last = tasks.last_mut().expect("pushed above");
            last.participants.push(participant_row(r)?);
        }
    }
    Ok(tasks)
}

/// Fails each open task with `app_uninstalled`, a CAS from the state it was
/// read in. A task the gate accepted meanwhile (waiting, then active) is
/// read again and failed from there; states only move forward, so that
/// ends. Its `task_create` job, if any, goes with it.
async fn fail_tasks(
    ex: &mut dyn Executor,
    app_id: Uuid,
    now: Millis,
) -> StoreResult<Vec<FailedTask>> {
    let mut failed = Vec::new();
    for mut task in open_tasks(ex, app_id).await? {
        loop {
            let was = task.state;
            if !was.can_fail_with(APP_UNINSTALLED) {
                break;
            }
            if cas_failed(ex, task.id, was, now).await? {
                ex.execute("DELETE FROM jobs WHERE subject = $1", &[Arg::Id(task.id)])
                    .await?;
                failed.push(FailedTask {
                    task: Task {
                        state: TaskState::Failed,
                        failure: Some(TaskFailure {
                            code: APP_UNINSTALLED.into(),
                            reason: None,
                        }),
                        updated_at: rfc3339(now),
                        ..task
                    },
                    was,
                });
                break;
            }
            task.state = current_state(ex, task.id).await?;
        }
    }
    Ok(failed)
}

async fn cas_failed(
    ex: &mut dyn Executor,
    task: Uuid,
    from: TaskState,
    now: Millis,
) -> StoreResult<bool> {
    let changed = ex
        .execute(
            "UPDATE tasks SET state = 'failed', failure_code = $1, failure_reason = NULL, updated_at = $2 \
             WHERE id = $3 AND state = $4",
            &[
                Arg::Text(APP_UNINSTALLED),
                Arg::Int(now),
                Arg::Id(task),
                Arg::Text(from.as_str()),
            ],
        )
        .await?;
    Ok(changed > 0)
}

async fn current_state(ex: &mut dyn Executor, task: Uuid) -> StoreResult<TaskState> {
    let row = ex
        .fetch_optional("SELECT state FROM tasks WHERE id = $1", &[Arg::Id(task)])
        .await?
        .ok_or(StoreError::NotFound)?;
    super::sql::parsed(row.text("state")?, "state", TaskState::parse)
}

/// Ends every live lease on the messages of the app's task conversations:
/// a pending or held one is denied, a granted one expired (the only final
/// states each may reach), with reason `app_uninstalled`; their gate and
/// expiry jobs go with them.
async fn end_leases(ex: &mut dyn Executor, app_id: Uuid, now: Millis) -> StoreResult<Vec<Uuid>> {
    let rows = ex
        .fetch_all(
            "UPDATE leases SET state = CASE WHEN state = 'granted' THEN 'expired' ELSE 'denied' END, \
             reason = $1, updated_at = $2 \
             WHERE state IN ('pending', 'held', 'granted') AND conversation_id IN \
             (SELECT c.id FROM conversations c JOIN tasks t ON t.id = c.task_id WHERE t.app_id = $3) \
             RETURNING id",
            &[Arg::Text(APP_UNINSTALLED), Arg::Int(now), Arg::Id(app_id)],
        )
        .await?;
    let ended = rows
        .iter()
        .map(|r| r.id("id"))
        .collect::<StoreResult<Vec<_>>>()?;
    for chunk in ended.chunks(500) {
        let args: Vec<Arg> = chunk.iter().map(|id| Arg::Id(*id)).collect();
        let sql = format!(
            "DELETE FROM jobs WHERE subject IN ({})",
            placeholders(1, chunk.len())
        );
        ex.execute(&sql, &args).await?;
    }
    Ok(ended)
}
