//! Jobs: work that must follow a commit, written in the transaction that
//! makes it necessary and deleted in the one that completes it.

use async_trait::async_trait;
use uuid::Uuid;

use super::sql::{parsed, Arg, Database, Executor, Row};
use super::StoreResult;
use crate::domain::Millis;

/// Kinds of work that follow a commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobKind {
    /// Run the `task_create` gate of a waiting task.
    TaskCreate,
    /// Run the `message_authorize` gate of a pending message.
    MessageAuthorize,
    /// Run the `dispatch_authorize` gate of a pending lease.
    DispatchAuthorize,
    /// Expire a granted lease at its deadline.
    LeaseExpire,
    /// Deny a held lease at `leases.max_hold_ms`.
    HoldExpire,
    /// Hand a command invocation to its app's way in (ADR 0027 §4).
    AppCommandDispatch,
    /// Hand an interaction to its app's way (ADR 0027 §4, "The job").
    AppInteractionDispatch,
    /// Verify an app's `interactionsUrl` after the commit that named it
    /// (ADR 0032 §2).
    AppUrlVerify,
    /// Start a run of a beatless hosted app that has mail (ADR 0031 §8).
    HostedWake,
}

impl JobKind {
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::TaskCreate => "task_create",
            JobKind::MessageAuthorize => "message_authorize",
            JobKind::DispatchAuthorize => "dispatch_authorize",
            JobKind::LeaseExpire => "lease_expire",
            JobKind::HoldExpire => "hold_expire",
            JobKind::AppCommandDispatch => "app_command_dispatch",
            JobKind::AppInteractionDispatch => "app_interaction_dispatch",
            JobKind::AppUrlVerify => "app_url_verify",
            JobKind::HostedWake => "hosted_wake",
        }
    }

    /// Whether the job may send to an app's `interactionsUrl`: those run
    /// under `app.interaction_max_concurrent`, apart from the others.
    pub fn reaches_app_url(self) -> bool {
        URL_KINDS.contains(&self)
    }

    /// Whether the job is written only for a beatless hosted app
    /// ([`WAKE_INSERT`]); every other kind is written as given.
    pub fn kept_for_beatless_only(self) -> bool {
        self == JobKind::HostedWake
    }

    pub fn parse(s: &str) -> Option<JobKind> {
        [
            JobKind::TaskCreate,
            JobKind::MessageAuthorize,
            JobKind::DispatchAuthorize,
            JobKind::LeaseExpire,
            JobKind::HoldExpire,
            JobKind::AppCommandDispatch,
            JobKind::AppInteractionDispatch,
            JobKind::AppUrlVerify,
            JobKind::HostedWake,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// The kinds that may send to an app's URL (ADR 0032 §3).
const URL_KINDS: [JobKind; 3] = [
    JobKind::AppCommandDispatch,
    JobKind::AppInteractionDispatch,
    JobKind::AppUrlVerify,
];

/// How many due jobs one claim may take of each class: the runner's free
/// slots under `jobs.max_concurrent` and under
/// `app.interaction_max_concurrent`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimRoom {
    /// Jobs that never reach an app's URL (gates, expiries, wakes).
    pub other: u32,
    /// Jobs that may ([`JobKind::reaches_app_url`]).
    pub app_url: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct NewJob {
    pub id: Uuid,
    pub kind: JobKind,
    /// The task, message or lease the job works on.
    pub subject: Uuid,
    pub run_at: Millis,
    /// Set when the writer runs the job at once itself: the job is stored
    /// already claimed (locked until then, attempt 1), which saves a claim
    /// statement on every gated send, task request and lease request.
    pub claimed_until: Option<Millis>,
}

impl NewJob {
    pub fn new(kind: JobKind, subject: Uuid, run_at: Millis) -> NewJob {
        NewJob {
            id: Uuid::now_v7(),
            kind,
            subject,
            run_at,
            claimed_until: None,
        }
    }

    pub fn claimed_until(mut self, until: Millis) -> NewJob {
        self.claimed_until = Some(until);
        self
    }

    /// The `attempts` a new row starts with.
    pub fn initial_attempts(&self) -> i64 {
        i64::from(self.claimed_until.is_some())
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    pub id: Uuid,
    pub kind: JobKind,
    pub subject: Uuid,
    pub attempts: u32,
}

#[async_trait]
pub trait JobStore: Send + Sync + 'static {
    /// Locks one job for the caller until `lock_until`, if it is free.
    async fn claim_job(
        &self,
        id: Uuid,
        now: Millis,
        lock_until: Millis,
    ) -> StoreResult<Option<Job>>;

    /// Locks up to `limit` due, free jobs.
    async fn claim_due_jobs(
        &self,
        now: Millis,
        lock_until: Millis,
        limit: u32,
    ) -> StoreResult<Vec<Job>>;

    /// [`claim_due_jobs`](Self::claim_due_jobs) with a room per class, in
    /// one statement: each class's due jobs oldest first, up to its room.
    async fn claim_due_jobs_by_class(
        &self,
        now: Millis,
        lock_until: Millis,
        room: ClaimRoom,
    ) -> StoreResult<Vec<Job>>;

    /// Marks a claimed job as sending its request now, in a write of its
    /// own before the request (ADR 0032 §3, "One attempt"): true when it
    /// may send. It may not once `allowance` requests were marked, nor when
    /// the last was marked by `sender` itself (this process sent it and only
    /// the store failed after it); a rerun in another process (the first
    /// crashed) may, and repeats the same `webhook-id`.
    async fn mark_job_sent(&self, id: Uuid, sender: &str, allowance: u32) -> StoreResult<bool>;

    /// Deletes a job whose subject no longer exists.
    async fn finish_job(&self, id: Uuid) -> StoreResult<()>;

    /// Unlocks every job. Called at start in single mode only: a lock held
    /// when the hub stopped belongs to a process that no longer runs. In a
    /// cluster the other nodes' locks are live, and a dead node's lapse.
    async fn release_job_locks(&self) -> StoreResult<u64>;

    /// Unlocks a job to run again at `run_at` (after a transient failure).
    async fn retry_job(&self, id: Uuid, run_at: Millis) -> StoreResult<()>;

    /// Puts a claimed job back until `run_at` without counting the claim as
    /// an attempt: the job found nothing wrong, only a reason to wait (a
    /// beatless app's run still live).
    async fn defer_job(&self, id: Uuid, run_at: Millis) -> StoreResult<()>;
}

/// What differs per dialect in this area.
pub trait JobDialect {
    /// Appended to the due-jobs subquery: how concurrent claimers skip
    /// each other's rows (nothing on SQLite, which has one writer).
    const SKIP_LOCKED: &'static str;
}

fn job_row(row: &Row) -> StoreResult<Job> {
    Ok(Job {
        id: row.id("id")?,
        kind: parsed(row.text("kind")?, "job kind", JobKind::parse)?,
        subject: row.id("subject")?,
        attempts: row.int("attempts")? as u32,
    })
}

pub(super) async fn insert_job(
    ex: &mut dyn Executor,
    job: &NewJob,
    now: Millis,
) -> StoreResult<()> {
    let sql = match job.kind.kept_for_beatless_only() {
        true => WAKE_INSERT,
        false => JOB_INSERT,
    };
    ex.execute(sql, &job_args(job, now)).await?;
    Ok(())
}

const JOB_INSERT: &str = "INSERT INTO jobs (id, kind, subject, run_at, created_at, locked_until, \
     attempts) VALUES ($1, $2, $3, $4, $5, $6, $7)";

/// A `hosted_wake` job, kept only if its subject is a beatless hosted app
/// when the transaction writes it (ADR 0031 §8, "Deciding the wake in the
/// write"). Its writers name every app reader a forward reaches; this
/// statement picks the beatless ones, in the same transaction, so the send
/// path reads nothing for it and a wake cannot be missed between a read
/// and the write.
pub const WAKE_INSERT: &str = "INSERT INTO jobs (id, kind, subject, run_at, created_at, \
     locked_until, attempts) SELECT $1, $2, $3, $4, $5, $6, $7 WHERE EXISTS \
     (SELECT 1 FROM hosted_apps WHERE app_id = $3 AND beatless = 1)";

/// The seven columns of a new job row, in the order both statements take.
pub fn job_args(job: &NewJob, now: Millis) -> [Arg<'static>; 7] {
    [
        Arg::Id(job.id),
        Arg::Text(job.kind.as_str()),
        Arg::Id(job.subject),
        Arg::Int(job.run_at),
        Arg::Int(now),
        Arg::OptInt(job.claimed_until),
        Arg::Int(job.initial_attempts()),
    ]
}

/// Deletes the job a change completes, if any.
pub(super) async fn delete_job(ex: &mut dyn Executor, job: Option<Uuid>) -> StoreResult<()> {
    if let Some(id) = job {
        ex.execute("DELETE FROM jobs WHERE id = $1", &[Arg::Id(id)])
            .await?;
    }
    Ok(())
}

/// Deletes finished jobs, many a statement, in a few shapes of `IN` list
/// (`shaped_chunks`), so a verdict group's deletes do not crowd the
/// connection's statement cache with a new text for every length.
pub(super) async fn delete_jobs(ex: &mut dyn Executor, jobs: &[Uuid]) -> StoreResult<()> {
    for chunk in super::sql::shaped_chunks(jobs, 512) {
        let args: Vec<Arg> = chunk.iter().map(|id| Arg::Id(*id)).collect();
        ex.execute(
            &format!(
                "DELETE FROM jobs WHERE id IN ({})",
                super::sql::placeholders(1, chunk.len())
            ),
            &args,
        )
        .await?;
    }
    Ok(())
}

#[async_trait]
impl<D: Database + JobDialect> JobStore for D {
    async fn claim_job(
        &self,
        id: Uuid,
        now: Millis,
        lock_until: Millis,
    ) -> StoreResult<Option<Job>> {
        self.write()
            .await?
            .fetch_optional(
                "UPDATE jobs SET locked_until = $1, attempts = attempts + 1 \
                 WHERE id = $2 AND (locked_until IS NULL OR locked_until < $3) RETURNING id, kind, subject, attempts",
                &[Arg::Int(lock_until), Arg::Id(id), Arg::Int(now)],
            )
            .await?
            .map(|r| job_row(&r))
            .transpose()
    }

    async fn claim_due_jobs(
        &self,
        now: Millis,
        lock_until: Millis,
        limit: u32,
    ) -> StoreResult<Vec<Job>> {
        let sql = format!(
            "UPDATE jobs SET locked_until = $1, attempts = attempts + 1 WHERE id IN \
             (SELECT id FROM jobs WHERE run_at <= $2 AND (locked_until IS NULL OR locked_until < $2) \
             ORDER BY run_at LIMIT $3{}) \
             RETURNING id, kind, subject, attempts",
            D::SKIP_LOCKED
        );
        let rows = self
            .write()
            .await?
            .fetch_all(
                &sql,
                &[
                    Arg::Int(lock_until),
                    Arg::Int(now),
                    Arg::Int(i64::from(limit)),
                ],
            )
            .await?;
        rows.iter().map(job_row).collect()
    }

    async fn claim_due_jobs_by_class(
        &self,
        now: Millis,
        lock_until: Millis,
        room: ClaimRoom,
    ) -> StoreResult<Vec<Job>> {
        // The kinds are this file's constants, never input.
        let kinds = URL_KINDS
            .iter()
            .map(|k| format!("'{}'", k.as_str()))
            .collect::<Vec<_>>()
            .join(", ");
        let due = |in_or_not: &str, limit: &str| {
            format!(
                "SELECT id FROM jobs WHERE run_at <= $2 AND (locked_until IS NULL OR locked_until < $2) \
                 AND kind {in_or_not} ({kinds}) ORDER BY run_at LIMIT {limit}{}",
                D::SKIP_LOCKED
            )
        };
        let sql = format!(
            "UPDATE jobs SET locked_until = $1, attempts = attempts + 1 WHERE id IN ({}) \
             OR id IN ({}) RETURNING id, kind, subject, attempts",
            due("NOT IN", "$3"),
            due("IN", "$4"),
        );
        let rows = self
            .write()
            .await?
            .fetch_all(
                &sql,
                &[
                    Arg::Int(lock_until),
                    Arg::Int(now),
                    Arg::Int(i64::from(room.other)),
                    Arg::Int(i64::from(room.app_url)),
                ],
            )
            .await?;
        rows.iter().map(job_row).collect()
    }

    async fn mark_job_sent(&self, id: Uuid, sender: &str, allowance: u32) -> StoreResult<bool> {
        let marked = self
            .write()
            .await?
            .execute(
                "UPDATE jobs SET sends = sends + 1, sent_by = $2 WHERE id = $1 AND sends < $3 \
                 AND (sent_by IS NULL OR sent_by <> $2)",
                &[
                    Arg::Id(id),
                    Arg::Text(sender),
                    Arg::Int(i64::from(allowance)),
                ],
            )
            .await?;
        Ok(marked == 1)
    }

    async fn finish_job(&self, id: Uuid) -> StoreResult<()> {
        delete_job(&mut *self.write().await?, Some(id)).await
    }

    async fn release_job_locks(&self) -> StoreResult<u64> {
        self.write()
            .await?
            .execute(
                "UPDATE jobs SET locked_until = NULL WHERE locked_until IS NOT NULL",
                &[],
            )
            .await
    }

    async fn defer_job(&self, id: Uuid, run_at: Millis) -> StoreResult<()> {
        self.write()
            .await?
            .execute(
                "UPDATE jobs SET locked_until = NULL, run_at = $1, \
                 attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END WHERE id = $2",
                &[Arg::Int(run_at), Arg::Id(id)],
            )
            .await?;
        Ok(())
    }

    async fn retry_job(&self, id: Uuid, run_at: Millis) -> StoreResult<()> {
        self.write()
            .await?
            .execute(
                "UPDATE jobs SET locked_until = NULL, run_at = $1 WHERE id = $2",
                &[Arg::Int(run_at), Arg::Id(id)],
            )
            .await?;
        Ok(())
    }
}
