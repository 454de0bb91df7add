//! What the operator's console shows from the store (ADR 0030): counts and
//! short lists of tasks, leases, denials, jobs and event logs, and the apps
//! with their live installations. Read-only, on one read connection, every
//! list bounded by the caller's `limit`; nothing here writes.

use std::collections::HashMap;

use async_trait::async_trait;
use uuid::Uuid;

use super::apps::{app_row, APP_COLUMNS};
use super::audit::{audit_row, COLUMNS as DENIAL_COLUMNS};
use super::installations::{installation_row, INSTALLATION_COLUMNS};
use super::sql::{placeholders, Arg, Database, Executor, Row};
use super::{AppRecord, AuditRecord, InstallationRecord, StoreResult};
use crate::domain::Millis;

/// An app and its live installation (none while it waits for the operator
/// or after an uninstall).
#[derive(Clone, Debug, PartialEq)]
pub struct AppOverview {
    pub app: AppRecord,
    pub installation: Option<InstallationRecord>,
}

/// A task in `waiting`, with when it last changed state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitingTask {
    pub id: Uuid,
    pub app_id: Uuid,
    pub initiator_id: Uuid,
    pub created_at: Millis,
    pub updated_at: Millis,
}

/// A lease still `pending` or `held`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveLease {
    pub id: Uuid,
    pub state: String,
    pub message_id: Uuid,
    pub conversation_id: Uuid,
    pub recipient_id: Uuid,
    pub expires_at: Option<Millis>,
    pub created_at: Millis,
}

/// The jobs of one kind: all of them, those due now, those a worker holds,
/// and the earliest run time among them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobBacklog {
    pub kind: String,
    pub total: i64,
    pub due: i64,
    pub locked: i64,
    pub oldest_run_at: Option<Millis>,
}

/// Event logs with events their reader has not acknowledged, and how many.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventBacklog {
    pub streams: i64,
    pub unacked: i64,
}

/// One read of everything but the apps and the registry.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overview {
    /// Tasks per state; states with none are absent.
    pub tasks: Vec<(String, i64)>,
    /// The longest-waiting tasks first.
    pub waiting: Vec<WaitingTask>,
    /// Live leases per state (`pending`, `held`).
    pub leases: Vec<(String, i64)>,
    /// The oldest live leases first.
    pub live_leases: Vec<LiveLease>,
    /// The most recently seen denial records first.
    pub denials: Vec<AuditRecord>,
    pub jobs: Vec<JobBacklog>,
    pub events: EventBacklog,
}

#[async_trait]
pub trait OverviewStore: Send + Sync + 'static {
    /// Apps by id, at most `limit`, each with its live installation.
    async fn apps_overview(&self, limit: u32) -> StoreResult<Vec<AppOverview>>;

    /// The names of those of `ids` that are principals.
    async fn principal_names(&self, ids: &[Uuid]) -> StoreResult<HashMap<Uuid, String>>;

    /// Counts and the first `limit` rows of each list, as of `now`.
    async fn overview(&self, now: Millis, limit: u32) -> StoreResult<Overview>;
}

/// Ids per `IN (...)` list: far below either dialect's placeholder limit.
const IDS_PER_STATEMENT: usize = 500;

fn counts(rows: &[Row]) -> StoreResult<Vec<(String, i64)>> {
    rows.iter()
        .map(|r| Ok((r.text("state")?, r.int("n")?)))
        .collect()
}

fn waiting_row(r: &Row) -> StoreResult<WaitingTask> {
    Ok(WaitingTask {
        id: r.id("id")?,
        app_id: r.id("app_id")?,
        initiator_id: r.id("initiator_id")?,
        created_at: r.int("created_at")?,
        updated_at: r.int("updated_at")?,
    })
}

fn lease_row(r: &Row) -> StoreResult<LiveLease> {
    Ok(LiveLease {
        id: r.id("id")?,
        state: r.text("state")?,
        message_id: r.id("message_id")?,
        conversation_id: r.id("conversation_id")?,
        recipient_id: r.id("recipient_id")?,
        expires_at: r.opt_int("expires_at")?,
        created_at: r.int("created_at")?,
    })
}

fn job_row(r: &Row) -> StoreResult<JobBacklog> {
    Ok(JobBacklog {
        kind: r.text("kind")?,
        total: r.int("total")?,
        due: r.int("due")?,
        locked: r.int("locked")?,
        oldest_run_at: r.opt_int("oldest")?,
    })
}

/// The overview's statements that would scan whole tables without
/// migration 0018's indexes; public so the plan tests
/// (`tests/it/store_overview.rs`) explain exactly what runs.
pub const TASKS_BY_STATE: &str =
    "SELECT state, COUNT(*) AS n FROM tasks GROUP BY state ORDER BY state";
/// The longest-waiting tasks, along the `waiting` range of `tasks_by_state`.
pub const WAITING_TASKS: &str = "SELECT id, app_id, initiator_id, created_at, updated_at \
     FROM tasks WHERE state = 'waiting' ORDER BY updated_at, id LIMIT $1";
pub const LEASES_BY_STATE: &str = "SELECT state, COUNT(*) AS n FROM leases \
     WHERE state IN ('pending', 'held') GROUP BY state ORDER BY state";
/// The oldest live leases, along `leases_live_by_age`.
pub const LIVE_LEASES: &str = "SELECT id, state, message_id, conversation_id, recipient_id, \
     expires_at, created_at FROM leases WHERE state IN ('pending', 'held') \
     ORDER BY created_at, id LIMIT $1";

async fn task_figures(
    ex: &mut dyn Executor,
    limit: &Arg<'_>,
) -> StoreResult<(Vec<(String, i64)>, Vec<WaitingTask>)> {
    let by_state = ex.fetch_all(TASKS_BY_STATE, &[]).await?;
    let waiting = ex.fetch_all(WAITING_TASKS, &[*limit]).await?;
    Ok((
        counts(&by_state)?,
        waiting
            .iter()
            .map(waiting_row)
            .collect::<StoreResult<_>>()?,
    ))
}

async fn lease_figures(
    ex: &mut dyn Executor,
    limit: &Arg<'_>,
) -> StoreResult<(Vec<(String, i64)>, Vec<LiveLease>)> {
    let by_state = ex.fetch_all(LEASES_BY_STATE, &[]).await?;
    let rows = ex.fetch_all(LIVE_LEASES, &[*limit]).await?;
    Ok((
        counts(&by_state)?,
        rows.iter().map(lease_row).collect::<StoreResult<_>>()?,
    ))
}

/// Per stream with something unacknowledged, the events after its acked
/// seq that still exist: retention deletes a log's prefix (never a hole), so
/// they run from the first stored seq past the ack to `last_seq`. A stream
/// whose unacknowledged events were all pruned has none left to read and
/// is not counted. The first seq is one step of the `(stream, seq)` key.
pub const EVENT_BACKLOG: &str = "SELECT COUNT(*) AS streams, \
     CAST(COALESCE(SUM(b.unread), 0) AS BIGINT) AS unacked FROM \
     (SELECT s.last_seq + 1 - (SELECT MIN(i.seq) FROM event_index i \
       WHERE i.stream = s.stream AND i.seq > s.acked_seq) AS unread \
      FROM event_streams s WHERE s.last_seq > s.acked_seq) b \
     WHERE b.unread IS NOT NULL";

async fn backlog_figures(
    ex: &mut dyn Executor,
    now: Millis,
) -> StoreResult<(Vec<JobBacklog>, EventBacklog)> {
    let jobs = ex
        .fetch_all(
            "SELECT kind, COUNT(*) AS total, \
             CAST(COALESCE(SUM(CASE WHEN run_at <= $1 THEN 1 ELSE 0 END), 0) AS BIGINT) AS due, \
             CAST(COALESCE(SUM(CASE WHEN locked_until > $1 THEN 1 ELSE 0 END), 0) AS BIGINT) AS locked, \
             MIN(run_at) AS oldest FROM jobs GROUP BY kind ORDER BY kind",
            &[Arg::Int(now)],
        )
        .await?;
    let events = ex.fetch_optional(EVENT_BACKLOG, &[]).await?;
    let events = match events {
        Some(r) => EventBacklog {
            streams: r.int("streams")?,
            unacked: r.int("unacked")?,
        },
        None => EventBacklog::default(),
    };
    Ok((
        jobs.iter().map(job_row).collect::<StoreResult<_>>()?,
        events,
    ))
}

#[async_trait]
impl<D: Database> OverviewStore for D {
    async fn apps_overview(&self, limit: u32) -> StoreResult<Vec<AppOverview>> {
        let mut ex = self.read().await?;
        let limit = Arg::Int(i64::from(limit));
        let apps = ex
            .fetch_all(
                &format!(
                    "SELECT {APP_COLUMNS} FROM principals p JOIN apps a ON a.app_id = p.id \
                     ORDER BY p.id LIMIT $1"
                ),
                &[limit],
            )
            .await?;
        let installations = ex
            .fetch_all(
                &format!(
                    "SELECT {INSTALLATION_COLUMNS} FROM installations \
                     WHERE state <> 'uninstalled' AND app_id IN \
                     (SELECT a.app_id FROM apps a ORDER BY a.app_id LIMIT $1)"
                ),
                &[limit],
            )
            .await?;
        let mut live: HashMap<Uuid, InstallationRecord> = installations
            .iter()
            .map(|r| installation_row(r).map(|i| (i.app_id, i)))
            .collect::<StoreResult<_>>()?;
        apps.iter()
            .map(|r| {
                let app = app_row(r)?;
                let installation = live.remove(&app.principal.id);
                Ok(AppOverview { app, installation })
            })
            .collect()
    }

    async fn principal_names(&self, ids: &[Uuid]) -> StoreResult<HashMap<Uuid, String>> {
        let mut names = HashMap::with_capacity(ids.len());
        if ids.is_empty() {
            return Ok(names);
        }
        let mut ex = self.read().await?;
        for chunk in ids.chunks(IDS_PER_STATEMENT) {
            let sql = format!(
                "SELECT id, name FROM principals WHERE id IN ({})",
                placeholders(1, chunk.len())
            );
            let args: Vec<Arg<'_>> = chunk.iter().map(|id| Arg::Id(*id)).collect();
            for r in ex.fetch_all(&sql, &args).await? {
                names.insert(r.id("id")?, r.text("name")?);
            }
        }
        Ok(names)
    }

    async fn overview(&self, now: Millis, limit: u32) -> StoreResult<Overview> {
        let mut ex = self.read().await?;
        let rows = Arg::Int(i64::from(limit));
        let (tasks, waiting) = task_figures(ex.as_mut(), &rows).await?;
        let (leases, live_leases) = lease_figures(ex.as_mut(), &rows).await?;
        let denials = ex
            .fetch_all(
                &format!(
                    "SELECT {DENIAL_COLUMNS} FROM audit_denials ORDER BY last_at DESC, id DESC LIMIT $1"
                ),
                &[rows],
            )
            .await?
            .iter()
            .map(audit_row)
            .collect::<StoreResult<_>>()?;
        let (jobs, events) = backlog_figures(ex.as_mut(), now).await?;
        Ok(Overview {
            tasks,
            waiting,
            leases,
            live_leases,
            denials,
            jobs,
            events,
        })
    }
}
