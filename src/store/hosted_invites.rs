//! The hosted store's invite links (ADR 0031 §6): a link row per
//! `invite_create`, and its redemption, which spends one use and makes the
//! redeemer a member of the room in one transaction. The use is spent by a
//! conditional `UPDATE` on `uses_left` (and the expiry), whose affected-row
//! count decides: two redemptions racing for the last use cannot both win,
//! on either backend, and the loser writes nothing.

use uuid::Uuid;

use super::conversations::hold_seq;
use super::installations::InstallationDialect;
use super::places::bump_rights_version;
use super::sql::{Arg, Database, Executor, Tx};
use super::{app_grants, installation_held, InstallationRecord, StoreError, StoreResult};
use crate::domain::authz::level::Holder;
use crate::domain::authz::ChannelState;
use crate::domain::event::{NewEvent, StoredEvent};
use crate::domain::installation::{Actor, InstallationState};
use crate::domain::task::TaskState;
use crate::domain::Millis;

/// A link as `invite_create` stores it: the secret's hash, never the secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InviteRecord {
    pub id: Uuid,
    pub secret_hash: Vec<u8>,
    pub conversation_id: Uuid,
    pub created_by: Uuid,
    pub uses_left: i64,
    pub expires_at: Millis,
    pub created_at: Millis,
}

/// How the redeemer becomes a member, by the room's kind.
#[derive(Clone, Debug)]
pub enum InviteJoin {
    /// A task conversation: the agent becomes a participant of the task
    /// (`invited`) and of the conversation, with its events (its
    /// `agent/conversation/joined`), while the task is active and has
    /// fewer than `max_participants` (its app's `limits.maxParticipants`).
    Task {
        task_id: Uuid,
        agent: Uuid,
        max_participants: u32,
        events: Vec<NewEvent>,
    },
    /// A channel: the principal holds `write` on it (a `read` grant of its
    /// own is raised; a higher one is kept), granted by the link's maker.
    Channel { principal: Uuid, granted_by: Uuid },
}

#[derive(Clone, Debug)]
pub struct InviteRedemption {
    pub invite: Uuid,
    pub conversation_id: Uuid,
    pub join: InviteJoin,
    pub now: Millis,
}

/// What a redemption did; only `Joined` wrote anything.
#[derive(Clone, Debug, PartialEq)]
pub enum Redeemed {
    /// One use spent and the redeemer joined; the join's events.
    Joined(Vec<StoredEvent>),
    /// The redeemer was a member already (also the later of one
    /// redeemer's racing redemptions): no use spent.
    Member,
    /// No use left, expired, another room, the task no longer active, the
    /// maker's installation not active, or the redeemer not an active
    /// principal of a kind the room takes.
    NotValid,
    /// The task has its app's `limits.maxParticipants` already.
    Full,
}

/// The `Conflict` of an `invite_create` past `hosted.invite_max_live`.
pub const INVITES_AT_MAX: &str =
    "the app has hosted.invite_max_live live invite links already; wait for one to expire or be used up";

/// Stores the link unless its maker has `max_live` live ones. The maker's
/// `hosted_apps` row is held first, so two creates of one app queue and
/// cannot both pass the count.
pub(super) async fn create(
    db: &(impl Database + ?Sized),
    i: &InviteRecord,
    max_live: u64,
) -> StoreResult<()> {
    let mut tx = db.begin().await?;
    tx.execute(
        "UPDATE hosted_apps SET app_id = app_id WHERE app_id = $1",
        &[Arg::Id(i.created_by)],
    )
    .await?;
    let live = tx
        .fetch_optional(
            "SELECT COUNT(*) AS n FROM app_invites \
             WHERE created_by = $1 AND uses_left > 0 AND expires_at > $2",
            &[Arg::Id(i.created_by), Arg::Int(i.created_at)],
        )
        .await?
        .map(|r| r.int("n"))
        .transpose()?
        .unwrap_or(0);
    if u64::try_from(live).unwrap_or(0) >= max_live {
        tx.rollback().await?;
        return Err(StoreError::Conflict(INVITES_AT_MAX.into()));
    }
    tx.execute(
        "INSERT INTO app_invites (id, secret_hash, conversation_id, created_by, uses_left, \
         expires_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        &[
            Arg::Id(i.id),
            Arg::Bytes(&i.secret_hash),
            Arg::Id(i.conversation_id),
            Arg::Id(i.created_by),
            Arg::Int(i.uses_left),
            Arg::Int(i.expires_at),
            Arg::Int(i.created_at),
        ],
    )
    .await?;
    tx.commit().await
}

/// Deletes the links no one can redeem any more: two `DELETE`s, each on
/// one indexed column (an `OR` of the two would scan the table).
pub(super) async fn prune(db: &(impl Database + ?Sized), now: Millis) -> StoreResult<u64> {
    let mut tx = db.begin().await?;
    let spent = tx
        .execute("DELETE FROM app_invites WHERE uses_left <= 0", &[])
        .await?;
    let expired = tx
        .execute(
            "DELETE FROM app_invites WHERE expires_at <= $1",
            &[Arg::Int(now)],
        )
        .await?;
    tx.commit().await?;
    Ok(spent + expired)
}

pub(super) async fn read(
    db: &(impl Database + ?Sized),
    id: Uuid,
) -> StoreResult<Option<InviteRecord>> {
    let row = db
        .read()
        .await?
        .fetch_optional(
            "SELECT id, secret_hash, conversation_id, created_by, uses_left, expires_at, \
             created_at FROM app_invites WHERE id = $1",
            &[Arg::Id(id)],
        )
        .await?;
    row.map(|r| {
        Ok(InviteRecord {
            id: r.id("id")?,
            secret_hash: r.bytes("secret_hash")?,
            conversation_id: r.id("conversation_id")?,
            created_by: r.id("created_by")?,
            uses_left: r.int("uses_left")?,
            expires_at: r.int("expires_at")?,
            created_at: r.int("created_at")?,
        })
    })
    .transpose()
}

/// Joins and spends one use in one transaction, with `put_grant`'s
/// safeguards (ADR 0031, 2026-12-02): the maker's installation held active
/// (so a suspended or uninstalled app lends nothing), the redeemer an
/// active principal of a kind the room takes, a redeemer app's own live
/// installation held and the grant audited as `grant.manage`. The room's
/// row is held next (after a task's own row: the order a close and an
/// uninstall take them in), so redemptions into one room queue. The
/// task's state is read under the task's row; membership and the
/// participant count under the room's, and one redeemer racing itself
/// spends one use.
pub(super) async fn redeem<D: InstallationDialect>(
    db: &(impl Database + ?Sized),
    r: &InviteRedemption,
) -> StoreResult<Redeemed> {
    let maker = match read(db, r.invite).await? {
        Some(row) if row.conversation_id == r.conversation_id => row.created_by,
        _ => return Ok(Redeemed::NotValid),
    };
    // A principal's kind never changes: read before the transaction, whose
    // first statement must be a lock (see `app_grants`).
    let redeemer_app = match &r.join {
        InviteJoin::Channel { principal, .. } => {
            app_grants::app_subject(&mut *db.read().await?, Holder::Principal(*principal)).await?
        }
        InviteJoin::Task { .. } => None,
    };
    let mut tx = db.begin().await?;
    let Some(held) = hold_installations::<D>(&mut *tx, maker, redeemer_app).await? else {
        tx.rollback().await?;
        return Ok(Redeemed::NotValid);
    };
    let outcome = match &r.join {
        InviteJoin::Task {
            task_id,
            agent,
            max_participants,
            events,
        } => {
            let ready = task_ready(&mut *tx, *task_id, r.conversation_id, *agent).await?;
            match ready {
                TaskReady::Go => {}
                TaskReady::Stop(o) => return stop(tx, o).await,
            }
            if !room_for(&mut *tx, *task_id, *agent, *max_participants).await? {
                return stop(tx, Redeemed::Full).await;
            }
            if !spend(&mut *tx, r).await? {
                return stop(tx, Redeemed::NotValid).await;
            }
            join_task(&mut *tx, *task_id, r.conversation_id, *agent, r.now).await?;
            Redeemed::Joined(tx.append_events(events, r.now).await?)
        }
        InviteJoin::Channel {
            principal,
            granted_by,
        } => {
            if !hold_open_channel(&mut *tx, r.conversation_id).await? {
                return stop(tx, Redeemed::NotValid).await;
            }
            if !principal_is(&mut *tx, *principal, &["agent", "person", "app"]).await? {
                return stop(tx, Redeemed::NotValid).await;
            }
            if writes_already(&mut *tx, r.conversation_id, *principal).await? {
                return stop(tx, Redeemed::Member).await;
            }
            if !spend(&mut *tx, r).await? {
                return stop(tx, Redeemed::NotValid).await;
            }
            write_on_channel(&mut *tx, r.conversation_id, *principal, *granted_by, r.now).await?;
            if let Some(installation) = &held {
                app_grants::record_put(&mut *tx, Actor::App(*granted_by), installation, r.now)
                    .await?;
            }
            Redeemed::Joined(Vec::new())
        }
    };
    tx.commit().await?;
    Ok(outcome)
}

/// Ends a redemption that writes nothing.
async fn stop(tx: Tx, outcome: Redeemed) -> StoreResult<Redeemed> {
    tx.rollback().await?;
    Ok(outcome)
}

/// The maker's installation held active (shared) and, when the redeemer
/// of a channel is an app, the redeemer's live one locked as `put_grant`
/// locks it, the two taken in id order so two apps redeeming each other's
/// links do not wait on each other in a cycle. `None` when the maker's is
/// not active or the redeemer app has no live installation; else the
/// redeemer app's row, if any, for the audit.
async fn hold_installations<D: InstallationDialect>(
    ex: &mut dyn Executor,
    maker: Uuid,
    redeemer_app: Option<Uuid>,
) -> StoreResult<Option<Option<InstallationRecord>>> {
    if redeemer_app == Some(maker) {
        return own_row::<D>(ex, maker).await;
    }
    let Some(app) = redeemer_app else {
        let active = installation_held::active::<D>(ex, maker).await?;
        return Ok(active.then_some(None));
    };
    if maker < app {
        if !installation_held::active::<D>(ex, maker).await? {
            return Ok(None);
        }
        return redeemer_row::<D>(ex, app).await;
    }
    let row = redeemer_row::<D>(ex, app).await?;
    if row.is_none() || !installation_held::active::<D>(ex, maker).await? {
        return Ok(None);
    }
    Ok(row)
}

/// The maker redeeming its own link: its row taken once, exclusively, and
/// required active. A shared lock then an exclusive one on the same row
/// would deadlock two such redemptions on PostgreSQL (each holding the
/// shared lock the other's upgrade waits on).
async fn own_row<D: InstallationDialect>(
    ex: &mut dyn Executor,
    app: Uuid,
) -> StoreResult<Option<Option<InstallationRecord>>> {
    Ok(redeemer_row::<D>(ex, app).await?.filter(|row| {
        row.as_ref()
            .is_some_and(|i| i.state == InstallationState::Active)
    }))
}

async fn redeemer_row<D: InstallationDialect>(
    ex: &mut dyn Executor,
    app: Uuid,
) -> StoreResult<Option<Option<InstallationRecord>>> {
    match app_grants::hold_installation::<D>(ex, app).await {
        Ok(row) => Ok(Some(Some(row))),
        Err(StoreError::Conflict(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

enum TaskReady {
    Go,
    Stop(Redeemed),
}

/// The task active (its row held, so a close waits for the join or the
/// join sees the close), the redeemer an active agent, not yet in the room
/// (read with the room's row held).
async fn task_ready(
    ex: &mut dyn Executor,
    task: Uuid,
    conversation: Uuid,
    agent: Uuid,
) -> StoreResult<TaskReady> {
    let state = ex
        .fetch_optional(
            "UPDATE tasks SET state = state WHERE id = $1 RETURNING state",
            &[Arg::Id(task)],
        )
        .await?
        .map(|r| r.text("state"))
        .transpose()?;
    if state.as_deref() != Some(TaskState::Active.as_str())
        || !principal_is(ex, agent, &["agent"]).await?
    {
        return Ok(TaskReady::Stop(Redeemed::NotValid));
    }
    hold_seq(ex, conversation).await?;
    let member = ex
        .fetch_optional(
            "SELECT 1 AS one FROM conversation_participants \
             WHERE conversation_id = $1 AND principal_id = $2",
            &[Arg::Id(conversation), Arg::Id(agent)],
        )
        .await?;
    Ok(match member {
        Some(_) => TaskReady::Stop(Redeemed::Member),
        None => TaskReady::Go,
    })
}

/// Whether the agent may join the task: it takes part already (another
/// room of the task), or the task has fewer than `max` participants.
async fn room_for(ex: &mut dyn Executor, task: Uuid, agent: Uuid, max: u32) -> StoreResult<bool> {
    let row = ex
        .fetch_optional(
            "SELECT COUNT(*) AS n, \
             SUM(CASE WHEN agent_id = $2 THEN 1 ELSE 0 END) AS mine \
             FROM task_participants WHERE task_id = $1",
            &[Arg::Id(task), Arg::Id(agent)],
        )
        .await?
        .ok_or_else(|| StoreError::Corrupt("a count answered no row".into()))?;
    let n = row.int("n")?;
    let mine = row.opt_int("mine")?.unwrap_or(0);
    Ok(mine > 0 || n < i64::from(max))
}

/// The channel's row held (as `hold_seq` holds it) and its state read
/// under it: `false` when it is archived. `set_channel` updates the same
/// row, so an archive and a redemption serialize: the handler's recheck of
/// the maker's right ran before the transaction, and a channel archived
/// since then must not take a new member (ADR 0031, 2026-12-02).
async fn hold_open_channel(ex: &mut dyn Executor, channel: Uuid) -> StoreResult<bool> {
    let state = ex
        .fetch_optional(
            "UPDATE conversations SET last_message_seq = last_message_seq WHERE id = $1 \
             RETURNING state",
            &[Arg::Id(channel)],
        )
        .await?
        .ok_or(StoreError::NotFound)?
        .opt_text("state")?;
    Ok(state.as_deref() != Some(ChannelState::Archived.as_str()))
}

/// An existing, active principal of one of `kinds`.
async fn principal_is(ex: &mut dyn Executor, id: Uuid, kinds: &[&str]) -> StoreResult<bool> {
    let kind = ex
        .fetch_optional(
            "SELECT kind FROM principals WHERE id = $1 AND disabled_at IS NULL",
            &[Arg::Id(id)],
        )
        .await?
        .map(|r| r.text("kind"))
        .transpose()?;
    Ok(kind.is_some_and(|k| kinds.contains(&k.as_str())))
}

/// Whether the principal's own grant on the channel is `write` or above.
async fn writes_already(ex: &mut dyn Executor, channel: Uuid, who: Uuid) -> StoreResult<bool> {
    let row = ex
        .fetch_optional(
            "SELECT 1 AS one FROM grants WHERE place_kind = 'channel' AND place_id = $1 \
             AND subject_kind = 'principal' AND subject_id = $2 AND level <> 'read'",
            &[Arg::Id(channel), Arg::Id(who)],
        )
        .await?;
    Ok(row.is_some())
}

/// Spends one use by a conditional `UPDATE`: its affected-row count
/// decides, so two redemptions racing for the last use cannot both win.
async fn spend(ex: &mut dyn Executor, r: &InviteRedemption) -> StoreResult<bool> {
    let spent = ex
        .execute(
            "UPDATE app_invites SET uses_left = uses_left - 1 \
             WHERE id = $1 AND conversation_id = $2 AND uses_left > 0 AND expires_at > $3",
            &[
                Arg::Id(r.invite),
                Arg::Id(r.conversation_id),
                Arg::Int(r.now),
            ],
        )
        .await?;
    Ok(spent == 1)
}

async fn join_task(
    ex: &mut dyn Executor,
    task: Uuid,
    conversation: Uuid,
    agent: Uuid,
    now: Millis,
) -> StoreResult<()> {
    ex.execute(
        "INSERT INTO task_participants (task_id, agent_id, role) VALUES ($1, $2, 'invited') \
         ON CONFLICT DO NOTHING",
        &[Arg::Id(task), Arg::Id(agent)],
    )
    .await?;
    let joined_seq = hold_seq(ex, conversation).await?;
    ex.execute(
        "INSERT INTO conversation_participants (conversation_id, principal_id, joined_at, joined_seq) \
         VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
        &[
            Arg::Id(conversation),
            Arg::Id(agent),
            Arg::Int(now),
            Arg::Int(joined_seq),
        ],
    )
    .await?;
    Ok(())
}

/// A principal grant of `write` on the channel; an existing `read` is
/// raised, a higher level left as it is. Rights change, so the version is
/// bumped in this transaction (ADR 0020 §3).
async fn write_on_channel(
    ex: &mut dyn Executor,
    channel: Uuid,
    principal: Uuid,
    granted_by: Uuid,
    now: Millis,
) -> StoreResult<()> {
    ex.execute(
        "INSERT INTO grants (id, subject_kind, subject_id, place_kind, place_id, level, \
         granted_by, created_at) VALUES ($1, 'principal', $2, 'channel', $3, 'write', $4, $5) \
         ON CONFLICT (place_kind, place_id, subject_kind, subject_id) DO UPDATE SET \
         level = 'write', granted_by = $4, created_at = $5 WHERE grants.level = 'read'",
        &[
            Arg::Id(Uuid::now_v7()),
            Arg::Id(principal),
            Arg::Id(channel),
            Arg::Id(granted_by),
            Arg::Int(now),
        ],
    )
    .await?;
    bump_rights_version(ex).await
}
