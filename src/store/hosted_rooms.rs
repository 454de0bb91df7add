//! The hosted store's queries on the app's rooms (ADR 0031 §6, §9): the
//! conversations of the app's tasks and the channels it reads, who takes
//! part in them, and the card's `reply_policy` that asks whether a
//! requester does.

use uuid::Uuid;

use super::conversations::{load_conversations, CONVERSATION_COLUMNS};
use super::sql::{Arg, Database};
use super::{StoreError, StoreResult};
use crate::domain::card::ReplyPolicy;
use crate::domain::conversation::Conversation;

pub(super) async fn app_rooms(
    db: &(impl Database + ?Sized),
    app_id: Uuid,
    after: Option<Uuid>,
    limit: u32,
) -> StoreResult<Vec<Conversation>> {
    let mut ex = db.read().await?;
    let rows = ex
        .fetch_all(
            &format!(
                "SELECT {CONVERSATION_COLUMNS} FROM conversations c \
                 JOIN tasks t ON t.id = c.task_id \
                 WHERE t.app_id = $1 AND ($2 IS NULL OR c.id > $2) ORDER BY c.id LIMIT $3"
            ),
            &[
                Arg::Id(app_id),
                Arg::OptId(after),
                Arg::Int(i64::from(limit)),
            ],
        )
        .await?;
    load_conversations(ex.as_mut(), &rows).await
}

/// The channels app `$1` reads: a grant reaching it, directly or through
/// a group, on the channel or on its space (ADR 0020 §5; grants are at
/// least `read`, so every one reaching it lets it read).
const APP_CHANNELS: &str = "WITH app_grants AS (SELECT g.place_kind, g.place_id FROM grants g \
       WHERE (g.subject_kind = 'principal' AND g.subject_id = $1) \
          OR (g.subject_kind = 'group' AND g.subject_id IN \
              (SELECT group_id FROM group_members WHERE principal_id = $1))), \
     app_channels AS (SELECT c.id, c.space_id FROM conversations c WHERE c.kind = 'channel' \
       AND (c.id IN (SELECT place_id FROM app_grants WHERE place_kind = 'channel') \
         OR c.space_id IN (SELECT place_id FROM app_grants WHERE place_kind = 'space'))) ";

/// The active principals (but the app) a grant reaches on one of the
/// app's channels, groups resolved: its co-readers.
const CO_READERS: &str = "SELECT r.id AS principal_id FROM app_channels c \
     JOIN grants g ON (g.place_kind = 'channel' AND g.place_id = c.id) \
       OR (g.place_kind = 'space' AND g.place_id = c.space_id) \
     LEFT JOIN group_members m ON g.subject_kind = 'group' AND m.group_id = g.subject_id \
     JOIN principals r ON r.id = CASE g.subject_kind WHEN 'group' THEN m.principal_id ELSE g.subject_id END \
     WHERE r.disabled_at IS NULL AND r.id <> $1";

/// The participants of the app's tasks' conversations.
const TASK_MEMBERS: &str =
    "SELECT p.principal_id AS principal_id FROM conversation_participants p \
     JOIN conversations c ON c.id = p.conversation_id \
     JOIN tasks t ON t.id = c.task_id WHERE t.app_id = $1";

/// Everyone the app shares a room with (ADR 0031 §6): its tasks' rooms'
/// participants and its channels' co-readers, distinct, by id. Only rooms
/// the app itself reads count, so nobody else's room is revealed.
pub(super) async fn app_connections(
    db: &(impl Database + ?Sized),
    app_id: Uuid,
    after: Option<Uuid>,
    limit: u32,
) -> StoreResult<Vec<Uuid>> {
    let rows = db
        .read()
        .await?
        .fetch_all(
            &format!(
                "{APP_CHANNELS}SELECT u.principal_id FROM ({TASK_MEMBERS} UNION {CO_READERS}) u \
                 WHERE ($2 IS NULL OR u.principal_id > $2) ORDER BY u.principal_id LIMIT $3"
            ),
            &[
                Arg::Id(app_id),
                Arg::OptId(after),
                Arg::Int(i64::from(limit)),
            ],
        )
        .await?;
    rows.iter().map(|r| r.id("principal_id")).collect()
}

pub(super) async fn set_reply_policy(
    db: &(impl Database + ?Sized),
    app_id: Uuid,
    policy: ReplyPolicy,
) -> StoreResult<()> {
    if policy == ReplyPolicy::Metered {
        return Err(StoreError::Conflict(
            "reply_policy metered is not defined".into(),
        ));
    }
    let mut tx = db.begin().await?;
    tx.execute(
        "UPDATE hosted_apps SET reply_policy = $1 WHERE app_id = $2",
        &[Arg::Text(policy.as_str()), Arg::Id(app_id)],
    )
    .await?;
    tx.commit().await
}

pub(super) async fn reply_policy(
    db: &(impl Database + ?Sized),
    app_id: Uuid,
) -> StoreResult<Option<ReplyPolicy>> {
    let row = db
        .read()
        .await?
        .fetch_optional(
            "SELECT reply_policy FROM hosted_apps WHERE app_id = $1",
            &[Arg::Id(app_id)],
        )
        .await?;
    row.map(|r| {
        let p = r.text("reply_policy")?;
        ReplyPolicy::parse(&p).ok_or_else(|| StoreError::Corrupt(format!("reply_policy {p:?}")))
    })
    .transpose()
}

/// Whether `principal` takes part in one of the app's tasks' rooms or
/// reads one of the channels the app reads (`reply_policy: members`).
pub(super) async fn shares_room(
    db: &(impl Database + ?Sized),
    app_id: Uuid,
    principal: Uuid,
) -> StoreResult<bool> {
    let row = db
        .read()
        .await?
        .fetch_optional(
            &format!(
                "{APP_CHANNELS}SELECT u.principal_id FROM ({TASK_MEMBERS} UNION {CO_READERS}) u \
                 WHERE u.principal_id = $2 LIMIT 1"
            ),
            &[Arg::Id(app_id), Arg::Id(principal)],
        )
        .await?;
    Ok(row.is_some())
}
