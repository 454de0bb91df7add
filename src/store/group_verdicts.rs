//! Group commit of message verdicts (issue 13): concurrent verdicts of
//! gated messages share one transaction, as sends do (ADR 0013). Each
//! verdict is marked, its recipients recorded and its effects applied in
//! queue order; then every applied verdict's events are appended at once,
//! so on PostgreSQL the stream rows are locked in one sorted order for the
//! whole group and cannot deadlock against a send group.

use std::collections::HashMap;

use async_trait::async_trait;
use uuid::Uuid;

use super::conversations::Marked;
use super::effects::{apply_effect_rows, Effects};
use super::group_commit::{GroupCommit, GroupWriter};
use super::jobs::delete_job;
use super::messages::{MessageDecided, MessageOutcome};
use super::recipients::listed_for;
use super::sql::{Arg, Executor};
use super::{StoreError, StoreResult};
use crate::domain::Millis;

/// A verdict to record, as
/// [`ConversationStore::decide_message`](super::ConversationStore::decide_message)
/// is handed it.
#[derive(Clone, Debug)]
pub struct VerdictWrite {
    pub message_id: Uuid,
    pub outcome: MessageOutcome,
    pub effects: Effects,
    pub now: Millis,
}

/// The group committer of verdicts.
pub type VerdictCommit = GroupCommit<VerdictWrite, MessageDecided>;

/// A connection's verdict write, per dialect: a pending message's verdict,
/// a forward only while its task is active, safe against a concurrent
/// close.
#[async_trait]
pub trait MarkDecided {
    async fn mark_decided(
        &mut self,
        message_id: Uuid,
        outcome: &MessageOutcome,
    ) -> StoreResult<Marked>;
}

/// The [`GroupWriter`] of verdicts on a pool.
pub struct PoolVerdicts<DB: sqlx::Database> {
    pool: sqlx::Pool<DB>,
}

impl<DB: sqlx::Database> PoolVerdicts<DB> {
    pub fn new(pool: sqlx::Pool<DB>) -> PoolVerdicts<DB> {
        PoolVerdicts { pool }
    }
}

#[async_trait]
impl<DB> GroupWriter<VerdictWrite, MessageDecided> for PoolVerdicts<DB>
where
    DB: sqlx::Database,
    DB::Connection: Executor + MarkDecided,
{
    async fn write_one(&self, v: &VerdictWrite) -> StoreResult<MessageDecided> {
        let mut decided = self.write_group(&[v]).await?;
        decided
            .pop()
            .ok_or_else(|| StoreError::Corrupt("a verdict went unanswered".into()))
    }

    async fn write_group(&self, group: &[&VerdictWrite]) -> StoreResult<Vec<MessageDecided>> {
        let mut tx = self.pool.begin().await?;
        match decide_in(&mut *tx, group).await {
            Ok(done) => {
                tx.commit().await?;
                Ok(done)
            }
            Err(e) => {
                let _ = tx.rollback().await;
                Err(e)
            }
        }
    }
}

/// The group's verdicts inside the caller's transaction, results in group
/// order. A forward whose task is no longer active writes nothing (the
/// caller decides again); a message decided already only finishes its job.
async fn decide_in<C>(conn: &mut C, group: &[&VerdictWrite]) -> StoreResult<Vec<MessageDecided>>
where
    C: Executor + MarkDecided,
{
    let mut decided = Vec::with_capacity(group.len());
    let mut events = Vec::new();
    let mut owner = HashMap::new();
    for (i, v) in group.iter().enumerate() {
        match conn.mark_decided(v.message_id, &v.outcome).await? {
            Marked::TaskNotActive => decided.push(MessageDecided::TaskNotActive),
            Marked::AlreadyDecided => {
                delete_job(conn, v.effects.finish_job).await?;
                decided.push(MessageDecided::AlreadyDecided);
            }
            Marked::Applied => {
                if let MessageOutcome::Forward { recipients } = &v.outcome {
                    record_recipients(conn, v.message_id, recipients).await?;
                }
                apply_effect_rows(conn, &v.effects, v.now).await?;
                for e in &v.effects.events {
                    owner.insert(e.id, i);
                }
                events.extend(v.effects.events.iter().cloned());
                decided.push(MessageDecided::Applied(Vec::new()));
            }
        }
    }
    let now = group.iter().map(|v| v.now).max().unwrap_or_default();
    for e in conn.append_events(&events, now).await? {
        if let Some(MessageDecided::Applied(mine)) = decided.get_mut(owner[&e.id]) {
            mine.push(e);
        }
    }
    Ok(decided)
}

/// A forward's count, and its rows when it names a subset.
async fn record_recipients(
    ex: &mut dyn Executor,
    message_id: Uuid,
    recipients: &[Uuid],
) -> StoreResult<()> {
    let m = ex
        .fetch_optional(
            "SELECT conversation_id, sender_id FROM messages WHERE id = $1",
            &[Arg::Id(message_id)],
        )
        .await?
        .ok_or(StoreError::NotFound)?;
    let listed = listed_for(ex, m.id("conversation_id")?, m.id("sender_id")?, recipients).await?;
    ex.execute(
        "UPDATE messages SET listed = $1, recipient_count = $2 WHERE id = $3",
        &[
            Arg::Bool(listed),
            Arg::Int(recipients.len() as i64),
            Arg::Id(message_id),
        ],
    )
    .await?;
    if listed {
        ex.insert_recipients(message_id, recipients).await?;
    }
    Ok(())
}
