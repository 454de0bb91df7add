//! The hosted store's invite links (ADR 0031 §6): a link row per
//! `invite_create`, and its redemption, which spends one use and makes the
//! redeemer a member of the room in one transaction. The use is spent by a
//! conditional `UPDATE` on `uses_left` (and the expiry), whose affected-row
//! count decides: two redemptions racing for the last use cannot both win,
//! on either backend, and the loser writes nothing.

use std::sync::Arc;

use uuid::Uuid;

use super::conversations::{conversation_alone, hold_seq};
use super::hosted_invite_rights::{self as rights, principal_is, Lock, Need};
use super::installations::InstallationDialect;
use super::places::bump_rights_version;
use super::sql::{parsed, Arg, Database, Executor, Tx};
use super::{app_grants, StoreError, StoreResult};
use crate::domain::authz::level::Holder;
use crate::domain::authz::ChannelState;
use crate::domain::conversation::Conversation;
use crate::domain::event::{NewEvent, StoredEvent};
use crate::domain::installation::Actor;
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

/// The events of a task join (the agent's `agent/conversation/joined`),
/// built from the room as the joining transaction left it, so what they
/// tell is what it decided: the caller's, so the store writes them without
/// knowing the protocol's names (as `FailureEvents`).
#[derive(Clone)]
pub struct JoinedEvents(pub Arc<JoinedEventsFn>);

/// What [`JoinedEvents`] calls.
pub type JoinedEventsFn = dyn Fn(&Conversation) -> Vec<NewEvent> + Send + Sync;

impl JoinedEvents {
    pub fn new(f: impl Fn(&Conversation) -> Vec<NewEvent> + Send + Sync + 'static) -> Self {
        JoinedEvents(Arc::new(f))
    }
}

impl std::fmt::Debug for JoinedEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JoinedEvents")
    }
}

/// How the redeemer becomes a member, by the room's kind.
#[derive(Clone, Debug)]
pub enum InviteJoin {
    /// A task conversation: the agent becomes a participant of the task
    /// (`invited`) and of the conversation, with the events `joined`
    /// builds, while the task is active, its app's installation active and
    /// fewer than `max_participants` (its app's `limits.maxParticipants`)
    /// take part.
    Task {
        task_id: Uuid,
        agent: Uuid,
        max_participants: u32,
        joined: JoinedEvents,
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

/// A join as it committed: the room as the transaction left it (a task
/// room's participants with the redeemer), and the events it wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct JoinedRoom {
    pub room: Conversation,
    pub events: Vec<StoredEvent>,
}

/// What a redemption did; only `Joined` wrote anything.
#[derive(Clone, Debug, PartialEq)]
pub enum Redeemed {
    /// One use spent and the redeemer joined.
    Joined(JoinedRoom),
    /// The redeemer was a member already (also the later of one
    /// redeemer's racing redemptions): no use spent.
    Member,
    /// No use left, expired, another room, the task no longer active, the
    /// maker's or the task app's installation not active, the maker no
    /// longer writing the room (its grant, its scope, the channel's
    /// state), or the redeemer not an active principal of a kind the room
    /// takes.
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

/// Joins and spends one use in one transaction, deciding there what the
/// link lends (ADR 0031, 2026-12-02 and its third pass): the installations
/// held first (`hosted_invite_rights::hold`: the maker's and, for a task
/// room, the task app's, both active; a redeemer app's on a channel, live),
/// then the room's row (after a task's own row: the order a close and an
/// uninstall take them in), so redemptions into one room queue. The
/// task's state is read under the task's row; the maker's right, the
/// membership and the participant count under the room's; on a channel the
/// maker's level after the rights version is held. One redeemer racing
/// itself spends one use. A join answers the room as it committed, and
/// builds the joined events from it.
pub(super) async fn redeem<D: InstallationDialect>(
    db: &(impl Database + ?Sized),
    r: &InviteRedemption,
) -> StoreResult<Redeemed> {
    let maker = match read(db, r.invite).await? {
        Some(row) if row.conversation_id == r.conversation_id => row.created_by,
        _ => return Ok(Redeemed::NotValid),
    };
    match &r.join {
        InviteJoin::Task {
            task_id,
            agent,
            max_participants,
            joined,
        } => {
            let join = TaskJoin {
                task: *task_id,
                agent: *agent,
                max: *max_participants,
                maker,
            };
            redeem_into_task::<D>(db, r, &join, joined).await
        }
        InviteJoin::Channel {
            principal,
            granted_by,
        } => redeem_into_channel::<D>(db, r, maker, *principal, *granted_by).await,
    }
}

/// A task room's redemption, as its handler asked for it.
struct TaskJoin {
    task: Uuid,
    agent: Uuid,
    max: u32,
    maker: Uuid,
}

async fn redeem_into_task<D: InstallationDialect>(
    db: &(impl Database + ?Sized),
    r: &InviteRedemption,
    j: &TaskJoin,
    joined: &JoinedEvents,
) -> StoreResult<Redeemed> {
    // The room's task and its app never change: read before the
    // transaction, whose first statement must be a lock (see `app_grants`).
    let Some(task_app) =
        task_app_of_room(&mut *db.read().await?, r.conversation_id, j.task).await?
    else {
        return Ok(Redeemed::NotValid);
    };
    let mut tx = db.begin().await?;
    let needs = [
        Need {
            app: j.maker,
            lock: Lock::Shared,
            active: true,
        },
        Need {
            app: task_app,
            lock: Lock::Shared,
            active: true,
        },
    ];
    if rights::hold::<D>(&mut *tx, &needs).await?.is_none() {
        return stop(tx, Redeemed::NotValid).await;
    }
    match task_ready(&mut *tx, j, task_app, r.conversation_id).await? {
        TaskReady::Go => {}
        TaskReady::Stop(o) => return stop(tx, o).await,
    }
    if !room_for(&mut *tx, j.task, j.agent, j.max).await? {
        return stop(tx, Redeemed::Full).await;
    }
    if !spend(&mut *tx, r).await? {
        return stop(tx, Redeemed::NotValid).await;
    }
    join_task(&mut *tx, j.task, r.conversation_id, j.agent, r.now).await?;
    let room = room_as_joined(&mut *tx, r.conversation_id).await?;
    let events = tx.append_events(&(joined.0)(&room), r.now).await?;
    tx.commit().await?;
    Ok(Redeemed::Joined(JoinedRoom { room, events }))
}

async fn redeem_into_channel<D: InstallationDialect>(
    db: &(impl Database + ?Sized),
    r: &InviteRedemption,
    maker: Uuid,
    principal: Uuid,
    granted_by: Uuid,
) -> StoreResult<Redeemed> {
    // A principal's kind never changes: read before the transaction, whose
    // first statement must be a lock (see `app_grants`).
    let redeemer_app =
        app_grants::app_subject(&mut *db.read().await?, Holder::Principal(principal)).await?;
    let mut needs = vec![Need {
        app: maker,
        lock: Lock::Shared,
        active: true,
    }];
    needs.extend(redeemer_app.map(|app| Need {
        app,
        lock: Lock::Exclusive,
        active: false,
    }));
    let mut tx = db.begin().await?;
    let Some(held) = rights::hold::<D>(&mut *tx, &needs).await? else {
        return stop(tx, Redeemed::NotValid).await;
    };
    let redeemer_row = redeemer_app.and_then(|app| held.of(app).cloned());
    let Some(maker_row) = held.of(maker).cloned() else {
        return Err(StoreError::Corrupt(
            "a held installation went missing".into(),
        ));
    };
    let Some((state, space)) = hold_channel(&mut *tx, r.conversation_id).await? else {
        return stop(tx, Redeemed::NotValid).await;
    };
    if !rights::open_to_apps(state)
        || !principal_is(&mut *tx, principal, &["agent", "person", "app"]).await?
    {
        return stop(tx, Redeemed::NotValid).await;
    }
    if writes_already(&mut *tx, r.conversation_id, principal).await? {
        return stop(tx, Redeemed::Member).await;
    }
    if !spend(&mut *tx, r).await? {
        return stop(tx, Redeemed::NotValid).await;
    }
    write_on_channel(&mut *tx, r.conversation_id, principal, granted_by, r.now).await?;
    // The rights version is held now: the maker's level as of this commit.
    if !rights::maker_writes_channel(&mut *tx, &maker_row, r.conversation_id, space).await? {
        return stop(tx, Redeemed::NotValid).await;
    }
    if let Some(installation) = &redeemer_row {
        app_grants::record_put(&mut *tx, Actor::App(granted_by), installation, r.now).await?;
    }
    let room = room_as_joined(&mut *tx, r.conversation_id).await?;
    tx.commit().await?;
    Ok(Redeemed::Joined(JoinedRoom {
        room,
        events: Vec::new(),
    }))
}

/// Ends a redemption that writes nothing.
async fn stop(tx: Tx, outcome: Redeemed) -> StoreResult<Redeemed> {
    tx.rollback().await?;
    Ok(outcome)
}

/// The app of the room's task, when the room is `task`'s.
async fn task_app_of_room(
    ex: &mut dyn Executor,
    room: Uuid,
    task: Uuid,
) -> StoreResult<Option<Uuid>> {
    ex.fetch_optional(
        "SELECT t.app_id FROM conversations c JOIN tasks t ON t.id = c.task_id \
         WHERE c.id = $1 AND t.id = $2",
        &[Arg::Id(room), Arg::Id(task)],
    )
    .await?
    .map(|r| r.id("app_id"))
    .transpose()
}

/// The room as this transaction leaves it: what the join answers and its
/// events tell.
async fn room_as_joined(ex: &mut dyn Executor, room: Uuid) -> StoreResult<Conversation> {
    conversation_alone(ex, room)
        .await?
        .ok_or(StoreError::NotFound)
}

enum TaskReady {
    Go,
    Stop(Redeemed),
}

/// The task active (its row held, so a close waits for the join or the
/// join sees the close), the redeemer an active agent; then, with the
/// room's row held, the maker's right to the room and the redeemer not in
/// it yet.
async fn task_ready(
    ex: &mut dyn Executor,
    j: &TaskJoin,
    task_app: Uuid,
    conversation: Uuid,
) -> StoreResult<TaskReady> {
    let state = ex
        .fetch_optional(
            "UPDATE tasks SET state = state WHERE id = $1 RETURNING state",
            &[Arg::Id(j.task)],
        )
        .await?
        .map(|r| r.text("state"))
        .transpose()?;
    if state.as_deref() != Some(TaskState::Active.as_str())
        || !principal_is(ex, j.agent, &["agent"]).await?
    {
        return Ok(TaskReady::Stop(Redeemed::NotValid));
    }
    hold_seq(ex, conversation).await?;
    if !rights::maker_writes_task_room(ex, j.maker, task_app, conversation).await? {
        return Ok(TaskReady::Stop(Redeemed::NotValid));
    }
    let member = ex
        .fetch_optional(
            "SELECT 1 AS one FROM conversation_participants \
             WHERE conversation_id = $1 AND principal_id = $2",
            &[Arg::Id(conversation), Arg::Id(j.agent)],
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

/// The channel's row held (as `hold_seq` holds it) and its state and
/// space read under it. `set_channel` updates the same row, so a change of
/// the channel's state and a redemption serialize: an archived or
/// read-only channel takes no one by an app's link (ADR 0031, 2026-12-02).
/// `None` when the room is no channel.
async fn hold_channel(
    ex: &mut dyn Executor,
    channel: Uuid,
) -> StoreResult<Option<(ChannelState, Uuid)>> {
    let Some(row) = ex
        .fetch_optional(
            "UPDATE conversations SET last_message_seq = last_message_seq \
             WHERE id = $1 AND kind = 'channel' RETURNING state, space_id",
            &[Arg::Id(channel)],
        )
        .await?
    else {
        return Ok(None);
    };
    let state = parsed(row.text("state")?, "channel state", ChannelState::parse)?;
    let space = row
        .opt_id("space_id")?
        .ok_or_else(|| StoreError::Corrupt("a channel without a space".into()))?;
    Ok(Some((state, space)))
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
