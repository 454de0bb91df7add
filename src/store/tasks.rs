//! Tasks, their participants and conversations, and the leases on their
//! messages: one area, one trait, the same SQL on both backends.

use async_trait::async_trait;
use uuid::Uuid;

use super::installations::InstallationDialect;

use super::apps::{app_row, AppRecord, APP_COLUMNS};
use super::conversations::{load_conversations, CONVERSATION_COLUMNS};
use super::effects::{apply_effects, Effects};
use super::jobs::{delete_job, insert_job, NewJob};
use super::leases::{CreatedLease, LeaseAccess, LeaseChange, NewLease};
use super::sql::{parsed, Arg, Database, Executor, Keyset, Row};
use super::StoreResult;
use crate::domain::conversation::Conversation;
use crate::domain::event::{rfc3339, StoredEvent};
use crate::domain::lease::Lease;
use crate::domain::task::{Task, TaskFailure, TaskHead, TaskParticipant, TaskRole, TaskState};
use crate::domain::Millis;

#[derive(Clone, Debug)]
pub struct NewTask {
    pub id: Uuid,
    pub app_id: Uuid,
    pub initiator_id: Uuid,
    pub participants: Vec<TaskParticipant>,
    /// JSON of the requested initial conversation.
    pub initial_conversation: Option<String>,
    pub created_at: Millis,
}

#[derive(Clone, Debug)]
pub struct TaskRecord {
    pub task: Task,
    pub initial_conversation: Option<String>,
}

#[async_trait]
pub trait TaskStore: Send + Sync + 'static {
    /// Stores a waiting task, its participants and the job that decides it.
    async fn create_task(&self, t: &NewTask, job: &NewJob) -> StoreResult<()>;

    async fn task(&self, id: Uuid) -> StoreResult<Option<TaskRecord>>;

    /// The task's id, app and state, with its app's record: one read, for
    /// the send path.
    async fn task_head(&self, id: Uuid) -> StoreResult<Option<(TaskHead, AppRecord)>>;

    /// The conversations of a task, oldest first.
    async fn task_conversations(&self, task_id: Uuid) -> StoreResult<Vec<Conversation>>;

    /// Tasks `agent` takes part in, by id, after the given id.
    async fn tasks_of(
        &self,
        agent: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<Task>>;

    /// Moves a task from `from` to `to` with its effects, in one transaction.
    /// `None` (and only the job finished) when the task was not in `from`,
    /// or a move to `active` (the gate's accept) met the app's installation
    /// not active (ADR 0023 §7; the installation read locked first).
    async fn transition_task(
        &self,
        id: Uuid,
        from: TaskState,
        to: TaskState,
        failure: Option<&TaskFailure>,
        effects: &Effects,
        now: Millis,
    ) -> StoreResult<Option<Vec<StoredEvent>>>;

    /// Creates a pending lease and its gate job, unless a live lease for the
    /// recipient and message exists.
    async fn create_lease(&self, lease: &NewLease, job: &NewJob) -> StoreResult<CreatedLease>;

    async fn lease(&self, id: Uuid) -> StoreResult<Option<Lease>>;

    /// The lease with what deciding on it reads, in one statement: the
    /// app of its conversation when that is a task conversation.
    async fn lease_for_access(&self, id: Uuid) -> StoreResult<Option<LeaseAccess>>;

    /// Applies a lease change with its effects. `None` (and only the job
    /// finished) when the lease was not in one of `change.from`, or a grant
    /// in a task met the app's installation not active (ADR 0023 §7).
    async fn transition_lease(
        &self,
        change: &LeaseChange,
        effects: &Effects,
    ) -> StoreResult<Option<(Lease, Vec<StoredEvent>)>>;
}

/// The task's app's installation is active, held until commit; a missing
/// task is left to the CAS (it changes nothing either way).
async fn accept_allowed<D: InstallationDialect>(
    ex: &mut dyn Executor,
    app: Option<Uuid>,
) -> StoreResult<bool> {
    match app {
        Some(app) => super::installation_held::active::<D>(ex, app).await,
        None => Ok(true),
    }
}

pub(super) const TASK_COLUMNS: &str =
    "t.id, t.app_id, t.initiator_id, t.state, t.failure_code, t.failure_reason, t.initial_conversation, t.created_at, t.updated_at";

/// A task row with its participants, read on the same connection.
async fn load_task(ex: &mut dyn Executor, row: &Row) -> StoreResult<TaskRecord> {
    let rows = ex
        .fetch_all(
            "SELECT agent_id, role FROM task_participants WHERE task_id = $1 ORDER BY role, agent_id",
            &[Arg::Id(row.id("id")?)],
        )
        .await?;
    let mut participants = Vec::with_capacity(rows.len());
    for r in &rows {
        participants.push(participant_row(r)?);
    }
    task_row(row, participants)
}

/// One task and its participants in ONE statement, whether or not it
/// exists (no rows then): a hidden id costs what a missing one costs (ADR
/// 0020 §3). A row per participant, or one with NULLs.
async fn task_alone(ex: &mut dyn Executor, id: Uuid) -> StoreResult<Option<TaskRecord>> {
    let sql = format!(
        "SELECT {TASK_COLUMNS}, p.agent_id, p.role FROM tasks t \
         LEFT JOIN task_participants p ON p.task_id = t.id \
         WHERE t.id = $1 ORDER BY p.role, p.agent_id"
    );
    let rows = ex.fetch_all(&sql, &[Arg::Id(id)]).await?;
    let Some(first) = rows.first() else {
        return Ok(None);
    };
    let mut participants = Vec::with_capacity(rows.len());
    for r in &rows {
        if r.opt_id("agent_id")?.is_some() {
            participants.push(participant_row(r)?);
        }
    }
    Ok(Some(task_row(first, participants)?))
}

pub(super) fn participant_row(r: &Row) -> StoreResult<TaskParticipant> {
    Ok(TaskParticipant {
        agent_id: r.id("agent_id")?,
        role: parsed(r.text("role")?, "role", TaskRole::parse)?,
    })
}

pub(super) fn task_row(row: &Row, participants: Vec<TaskParticipant>) -> StoreResult<TaskRecord> {
    let failure = match row.opt_text("failure_code")? {
        Some(code) => Some(TaskFailure {
            code,
            reason: row.opt_text("failure_reason")?,
        }),
        None => None,
    };
    Ok(TaskRecord {
        task: Task {
            id: row.id("id")?,
            app_id: row.id("app_id")?,
            initiator_id: row.id("initiator_id")?,
            state: parsed(row.text("state")?, "state", TaskState::parse)?,
            participants,
            failure,
            created_at: rfc3339(row.int("created_at")?),
            updated_at: rfc3339(row.int("updated_at")?),
        },
        initial_conversation: row.opt_text("initial_conversation")?,
    })
}

async fn insert_task(ex: &mut dyn Executor, t: &NewTask) -> StoreResult<()> {
    ex.execute(
        "INSERT INTO tasks (id, app_id, initiator_id, state, initial_conversation, created_at, updated_at) \
         VALUES ($1, $2, $3, 'waiting', $4, $5, $6)",
        &[
            Arg::Id(t.id),
            Arg::Id(t.app_id),
            Arg::Id(t.initiator_id),
            Arg::OptText(t.initial_conversation.as_deref()),
            Arg::Int(t.created_at),
            Arg::Int(t.created_at),
        ],
    )
    .await?;
    for p in &t.participants {
        ex.execute(
            "INSERT INTO task_participants (task_id, agent_id, role) VALUES ($1, $2, $3)",
            &[
                Arg::Id(t.id),
                Arg::Id(p.agent_id),
                Arg::Text(p.role.as_str()),
            ],
        )
        .await?;
    }
    Ok(())
}

#[async_trait]
impl<D: Database + Keyset + InstallationDialect> TaskStore for D {
    async fn create_task(&self, t: &NewTask, job: &NewJob) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        insert_task(&mut *tx, t).await?;
        insert_job(&mut *tx, job, t.created_at).await?;
        tx.commit().await
    }

    async fn task(&self, id: Uuid) -> StoreResult<Option<TaskRecord>> {
        task_alone(&mut *self.read().await?, id).await
    }

    async fn task_head(&self, id: Uuid) -> StoreResult<Option<(TaskHead, AppRecord)>> {
        let sql = format!(
            "SELECT t.id AS task_id, t.state, {APP_COLUMNS} FROM tasks t \
             JOIN principals p ON p.id = t.app_id JOIN apps a ON a.app_id = t.app_id \
             WHERE t.id = $1"
        );
        let row = self
            .read()
            .await?
            .fetch_optional(&sql, &[Arg::Id(id)])
            .await?;
        row.map(|r| {
            let app = app_row(&r)?;
            let head = TaskHead {
                id: r.id("task_id")?,
                app_id: app.principal.id,
                state: parsed(r.text("state")?, "state", TaskState::parse)?,
            };
            Ok((head, app))
        })
        .transpose()
    }

    async fn task_conversations(&self, task_id: Uuid) -> StoreResult<Vec<Conversation>> {
        let mut conn = self.read().await?;
        let sql = format!(
            "SELECT {CONVERSATION_COLUMNS} FROM conversations c WHERE c.task_id = $1 ORDER BY c.id"
        );
        let rows = conn.fetch_all(&sql, &[Arg::Id(task_id)]).await?;
        load_conversations(&mut *conn, &rows).await
    }

    async fn tasks_of(
        &self,
        agent: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<Task>> {
        let mut conn = self.read().await?;
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM tasks t JOIN task_participants p ON p.task_id = t.id \
             WHERE p.agent_id = $1 AND {} ORDER BY t.id LIMIT $3",
            D::after("t.id", 2)
        );
        let rows = conn
            .fetch_all(
                &sql,
                &[
                    Arg::Id(agent),
                    Arg::OptId(after),
                    Arg::Int(i64::from(limit)),
                ],
            )
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            out.push(load_task(&mut *conn, r).await?.task);
        }
        Ok(out)
    }

    async fn transition_task(
        &self,
        id: Uuid,
        from: TaskState,
        to: TaskState,
        failure: Option<&TaskFailure>,
        effects: &Effects,
        now: Millis,
    ) -> StoreResult<Option<Vec<StoredEvent>>> {
        // The task's app never changes, so it is read before the
        // transaction: on SQLite a transaction whose first statement reads
        // cannot wait for another process's writer ("database is locked").
        let app = match to {
            TaskState::Active => {
                super::installation_held::app_of_task(&mut *self.read().await?, id).await?
            }
            _ => None,
        };
        let mut tx = self.begin().await?;
        // An accept applies only while the app's installation is active
        // (ADR 0023 §7), held before the task row. Refused, nothing is
        // written and the job stays: the gate decides again on the store's
        // installation and its failure finishes the job, or the runner
        // retries it.
        if to == TaskState::Active && !accept_allowed::<D>(&mut *tx, app).await? {
            tx.rollback().await?;
            return Ok(None);
        }
        let changed = tx
            .execute(
                "UPDATE tasks SET state = $1, failure_code = $2, failure_reason = $3, updated_at = $4 \
                 WHERE id = $5 AND state = $6",
                &[
                    Arg::Text(to.as_str()),
                    Arg::OptText(failure.map(|f| f.code.as_str())),
                    Arg::OptText(failure.and_then(|f| f.reason.as_deref())),
                    Arg::Int(now),
                    Arg::Id(id),
                    Arg::Text(from.as_str()),
                ],
            )
            .await?;
        if changed == 0 {
            delete_job(&mut *tx, effects.finish_job).await?;
            tx.commit().await?;
            return Ok(None);
        }
        let events = apply_effects(&mut *tx, effects, now).await?;
        tx.commit().await?;
        Ok(Some(events))
    }

    async fn create_lease(&self, lease: &NewLease, job: &NewJob) -> StoreResult<CreatedLease> {
        super::leases::create(self, lease, job).await
    }

    async fn lease(&self, id: Uuid) -> StoreResult<Option<Lease>> {
        super::leases::lease(&mut *self.read().await?, id).await
    }

    async fn lease_for_access(&self, id: Uuid) -> StoreResult<Option<LeaseAccess>> {
        super::leases::lease_for_access(&mut *self.read().await?, id).await
    }

    async fn transition_lease(
        &self,
        change: &LeaseChange,
        effects: &Effects,
    ) -> StoreResult<Option<(Lease, Vec<StoredEvent>)>> {
        super::leases::transition(self, change, effects).await
    }
}
