//! The hosted store's invite links (ADR 0031 §6): a link row per
//! `invite_create`, and its redemption, which spends one use and makes the
//! redeemer a member of the room in one transaction. The use is spent by a
//! conditional `UPDATE` on `uses_left` (and the expiry), whose affected-row
//! count decides: two redemptions racing for the last use cannot both win,
//! on either backend, and the loser writes nothing.

use uuid::Uuid;

use super::conversations::hold_seq;
use super::places::bump_rights_version;
use super::sql::{Arg, Database, Executor};
use super::StoreResult;
use crate::domain::event::{NewEvent, StoredEvent};
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
    /// `agent/conversation/joined`).
    Task {
        task_id: Uuid,
        agent: Uuid,
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

pub(super) async fn create(db: &(impl Database + ?Sized), i: &InviteRecord) -> StoreResult<()> {
    let mut tx = db.begin().await?;
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

/// Spends one use and joins; `None` when no use was left (or the link
/// expired) at the moment of the write: nothing is written then.
pub(super) async fn redeem(
    db: &(impl Database + ?Sized),
    r: &InviteRedemption,
) -> StoreResult<Option<Vec<StoredEvent>>> {
    let mut tx = db.begin().await?;
    let spent = tx
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
    if spent != 1 {
        return Ok(None);
    }
    let stored = match &r.join {
        InviteJoin::Task {
            task_id,
            agent,
            events,
        } => {
            join_task(&mut *tx, *task_id, r.conversation_id, *agent, r.now).await?;
            tx.append_events(events, r.now).await?
        }
        InviteJoin::Channel {
            principal,
            granted_by,
        } => {
            write_on_channel(&mut *tx, r.conversation_id, *principal, *granted_by, r.now).await?;
            Vec::new()
        }
    };
    tx.commit().await?;
    Ok(Some(stored))
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
