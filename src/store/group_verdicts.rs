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
use super::jobs::delete_jobs;
use super::messages::{MessageDecided, MessageOutcome};
use super::recipients::verdict_listed;
use super::sql::Executor;
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
/// close. It records the forward's count and whether its recipients are
/// listed (see [`super::recipients`]) in the same statement.
#[async_trait]
pub trait MarkDecided {
    async fn mark_decided(
        &mut self,
        message_id: Uuid,
        outcome: &MessageOutcome,
        listed: bool,
    ) -> StoreResult<Marked>;
}

/// The [`GroupWriter`] of verdicts on a pool (PostgreSQL; SQLite writes
/// the same transaction on its writer thread, `sqlite::verdict_writer`).
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
/// Two statements a verdict (its listing, its mark); the finished jobs and
/// the events go in a few statements for the whole group.
pub(super) async fn decide_in<C>(
    conn: &mut C,
    group: &[&VerdictWrite],
) -> StoreResult<Vec<MessageDecided>>
where
    C: Executor + MarkDecided,
{
    // Messages (and on PostgreSQL their task rows) are taken in id order,
    // the same in every group, so two groups cannot deadlock on them.
    let mut order: Vec<usize> = (0..group.len()).collect();
    order.sort_by_key(|&i| group[i].message_id);
    let mut decided: Vec<Option<MessageDecided>> = (0..group.len()).map(|_| None).collect();
    let mut finished = Vec::new();
    let mut events = Vec::new();
    let mut owner = HashMap::new();
    for i in order {
        let v = group[i];
        let listed = match &v.outcome {
            MessageOutcome::Forward { recipients } => {
                verdict_listed(conn, v.message_id, recipients).await?
            }
            MessageOutcome::Block { .. } => true,
        };
        let marked = conn.mark_decided(v.message_id, &v.outcome, listed).await?;
        if !matches!(marked, Marked::NotApplicable) {
            finished.extend(v.effects.finish_job);
        }
        decided[i] = Some(match marked {
            Marked::NotApplicable => MessageDecided::NotApplicable,
            Marked::AlreadyDecided => MessageDecided::AlreadyDecided,
            Marked::Applied => {
                apply_verdict(conn, v, listed).await?;
                for e in &v.effects.events {
                    owner.insert(e.id, i);
                }
                events.extend(v.effects.events.iter().cloned());
                MessageDecided::Applied(Vec::new())
            }
        });
    }
    let mut decided: Vec<MessageDecided> = decided.into_iter().flatten().collect();
    delete_jobs(conn, &finished).await?;
    let now = group.iter().map(|v| v.now).max().unwrap_or_default();
    for e in conn.append_events(&events, now).await? {
        if let Some(MessageDecided::Applied(mine)) = decided.get_mut(owner[&e.id]) {
            mine.push(e);
        }
    }
    Ok(decided)
}

/// A marked verdict's rows: a listed forward's recipients, and the effects
/// other than its job and events (which the group writes at once).
async fn apply_verdict(ex: &mut dyn Executor, v: &VerdictWrite, listed: bool) -> StoreResult<()> {
    if let MessageOutcome::Forward { recipients } = &v.outcome {
        if listed {
            ex.insert_recipients(v.message_id, recipients).await?;
        }
    }
    if !v.effects.schedule.is_empty() || !v.effects.conversations.is_empty() {
        let rest = Effects {
            events: Vec::new(),
            finish_job: None,
            ..v.effects.clone()
        };
        apply_effect_rows(ex, &rest, v.now).await?;
    }
    Ok(())
}
