//! The hosted store's queries on the app's rooms (ADR 0031 §6, §9): the
//! conversations of the app's tasks, who takes part in them, and the card's
//! `reply_policy` that asks whether a requester does.

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
            "SELECT DISTINCT p.principal_id FROM conversation_participants p \
             JOIN conversations c ON c.id = p.conversation_id \
             JOIN tasks t ON t.id = c.task_id \
             WHERE t.app_id = $1 AND ($2 IS NULL OR p.principal_id > $2) \
             ORDER BY p.principal_id LIMIT $3",
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

pub(super) async fn shares_room(
    db: &(impl Database + ?Sized),
    app_id: Uuid,
    principal: Uuid,
) -> StoreResult<bool> {
    let row = db
        .read()
        .await?
        .fetch_optional(
            "SELECT 1 AS one FROM conversation_participants p \
             JOIN conversations c ON c.id = p.conversation_id \
             JOIN tasks t ON t.id = c.task_id \
             WHERE t.app_id = $1 AND p.principal_id = $2 LIMIT 1",
            &[Arg::Id(app_id), Arg::Id(principal)],
        )
        .await?;
    Ok(row.is_some())
}
