//! Lease records and queries (part of the task area, [`super::TaskStore`]).

use uuid::Uuid;

use super::installations::InstallationDialect;

use super::effects::{apply_effects, Effects};
use super::jobs::{delete_job, insert_job, NewJob};
use super::sql::{is_unique_violation, parsed, placeholders, Arg, Database, Executor, Row};
use super::{StoreError, StoreResult};
use crate::domain::conversation::ConversationKind;
use crate::domain::event::{rfc3339, StoredEvent};
use crate::domain::lease::{Lease, LeaseState};
use crate::domain::Millis;

#[derive(Clone, Debug)]
pub struct NewLease {
    pub id: Uuid,
    pub message_id: Uuid,
    pub conversation_id: Uuid,
    pub recipient_id: Uuid,
    pub created_at: Millis,
}

#[derive(Clone, Debug)]
pub enum CreatedLease {
    Created(Lease),
    /// A live lease for this recipient and message already existed.
    Existing(Lease),
}

/// A lease state change, applied only if the lease is in one of `from`.
#[derive(Clone, Debug)]
pub struct LeaseChange {
    pub lease_id: Uuid,
    pub from: Vec<LeaseState>,
    pub to: LeaseState,
    pub reason: Option<String>,
    pub expires_at: Option<Millis>,
    pub now: Millis,
}

const LEASE_COLUMNS: &str =
    "id, message_id, conversation_id, recipient_id, state, reason, expires_at, created_at";

fn lease_row(row: &Row) -> StoreResult<Lease> {
    Ok(Lease {
        lease_id: row.id("id")?,
        message_id: row.id("message_id")?,
        conversation_id: row.id("conversation_id")?,
        recipient_id: row.id("recipient_id")?,
        state: parsed(row.text("state")?, "lease state", LeaseState::parse)?,
        reason: row.opt_text("reason")?,
        expires_at: row.opt_int("expires_at")?.map(rfc3339),
        created_at: rfc3339(row.int("created_at")?),
    })
}

pub(super) async fn lease(ex: &mut dyn Executor, id: Uuid) -> StoreResult<Option<Lease>> {
    let sql = format!("SELECT {LEASE_COLUMNS} FROM leases WHERE id = $1");
    ex.fetch_optional(&sql, &[Arg::Id(id)])
        .await?
        .map(|r| lease_row(&r))
        .transpose()
}

/// A lease as the access layer decides on it (ADR 0020 §3).
#[derive(Clone, Debug)]
pub struct LeaseAccess {
    pub lease: Lease,
    /// The app of the lease's conversation when it is a task conversation
    /// (its `created_by`, see `access::load`), else `None`.
    pub task_app: Option<Uuid>,
}

/// The lease and its conversation's kind and creator in one statement,
/// whether or not the lease exists: the lease loader reads nothing else.
pub(super) async fn lease_for_access(
    ex: &mut dyn Executor,
    id: Uuid,
) -> StoreResult<Option<LeaseAccess>> {
    let sql = "SELECT l.id, l.message_id, l.conversation_id, l.recipient_id, l.state, l.reason, \
               l.expires_at, l.created_at, c.kind AS conversation_kind, \
               c.created_by AS conversation_created_by \
               FROM leases l LEFT JOIN conversations c ON c.id = l.conversation_id WHERE l.id = $1";
    let Some(row) = ex.fetch_optional(sql, &[Arg::Id(id)]).await? else {
        return Ok(None);
    };
    let task = Some(ConversationKind::Task.as_str());
    let task_app = match row.opt_text("conversation_kind")?.as_deref() == task {
        true => row.opt_id("conversation_created_by")?,
        false => None,
    };
    Ok(Some(LeaseAccess {
        lease: lease_row(&row)?,
        task_app,
    }))
}

async fn live_lease(
    ex: &mut dyn Executor,
    recipient: Uuid,
    message: Uuid,
) -> StoreResult<Option<Lease>> {
    let sql = format!(
        "SELECT {LEASE_COLUMNS} FROM leases WHERE recipient_id = $1 AND message_id = $2 \
         AND state IN ('pending', 'held', 'granted')"
    );
    ex.fetch_optional(&sql, &[Arg::Id(recipient), Arg::Id(message)])
        .await?
        .map(|r| lease_row(&r))
        .transpose()
}

async fn insert_lease(ex: &mut dyn Executor, lease: &NewLease) -> StoreResult<()> {
    ex.execute(
        "INSERT INTO leases (id, message_id, conversation_id, recipient_id, state, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, 'pending', $5, $6)",
        &[
            Arg::Id(lease.id),
            Arg::Id(lease.message_id),
            Arg::Id(lease.conversation_id),
            Arg::Id(lease.recipient_id),
            Arg::Int(lease.created_at),
            Arg::Int(lease.created_at),
        ],
    )
    .await?;
    Ok(())
}

/// Creates a pending lease and its gate job, unless a live lease for the
/// recipient and message exists (found before, or raced in meanwhile).
pub(super) async fn create<D: Database + ?Sized>(
    db: &D,
    lease: &NewLease,
    job: &NewJob,
) -> StoreResult<CreatedLease> {
    let (recipient, message) = (lease.recipient_id, lease.message_id);
    if let Some(found) = live_lease(&mut *db.read().await?, recipient, message).await? {
        return Ok(CreatedLease::Existing(found));
    }
    let mut tx = db.begin().await?;
    if let Err(e) = insert_lease(&mut *tx, lease).await {
        if !is_unique_violation(&e) {
            return Err(e);
        }
        // Read the winner while this transaction still holds SQLite's
        // writer lock, so no other writer moves it out of a live state in
        // between; then roll back before the lock passes on.
        let found = live_lease(&mut *db.read().await?, recipient, message).await;
        tx.rollback().await?;
        return found?.map(CreatedLease::Existing).ok_or(e);
    }
    insert_job(&mut *tx, job, lease.created_at).await?;
    tx.commit().await?;
    let created = self::lease(&mut *db.read().await?, lease.id)
        .await?
        .ok_or(StoreError::NotFound)?;
    Ok(CreatedLease::Created(created))
}

/// A lease outside tasks is granted by no app; one in a task only while
/// its app's installation is active.
async fn grant_allowed<D: InstallationDialect>(
    ex: &mut dyn Executor,
    app: Option<Uuid>,
) -> StoreResult<bool> {
    match app {
        Some(app) => super::installation_held::active::<D>(ex, app).await,
        None => Ok(true),
    }
}

/// Applies a lease change with its effects. `None` (and only the job
/// finished) when the lease was not in one of `change.from`, or a grant
/// met an installation that is not active.
pub(super) async fn transition<D: Database + InstallationDialect>(
    db: &D,
    change: &LeaseChange,
    effects: &Effects,
) -> StoreResult<Option<(Lease, Vec<StoredEvent>)>> {
    let sql = format!(
        "UPDATE leases SET state = $1, reason = $2, expires_at = $3, updated_at = $4 WHERE id = $5 AND state IN ({}) \
         RETURNING {LEASE_COLUMNS}",
        placeholders(6, change.from.len())
    );
    let mut args = vec![
        Arg::Text(change.to.as_str()),
        Arg::OptText(change.reason.as_deref()),
        Arg::OptInt(change.expires_at),
        Arg::Int(change.now),
        Arg::Id(change.lease_id),
    ];
    args.extend(change.from.iter().map(|s| Arg::Text(s.as_str())));
    // The lease's app never changes: read before the transaction, whose
    // first statement must write on SQLite (see `transition_task`).
    let app = match change.to {
        LeaseState::Granted => {
            super::installation_held::app_of_lease(&mut *db.read().await?, change.lease_id).await?
        }
        _ => None,
    };
    let mut tx = db.begin().await?;
    // A grant applies only while the task's app's installation is active
    // (ADR 0023 §7), held before the lease row. Refused, nothing is written
    // and the job stays for the gate's second round or the runner's retry.
    if change.to == LeaseState::Granted && !grant_allowed::<D>(&mut *tx, app).await? {
        tx.rollback().await?;
        return Ok(None);
    }
    let Some(row) = tx.fetch_optional(&sql, &args).await? else {
        delete_job(&mut *tx, effects.finish_job).await?;
        tx.commit().await?;
        return Ok(None);
    };
    let lease = lease_row(&row)?;
    let events = apply_effects(&mut *tx, effects, change.now).await?;
    tx.commit().await?;
    Ok(Some((lease, events)))
}
