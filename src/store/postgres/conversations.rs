//! The PostgreSQL parts of the conversation area: the group-committed
//! writes of concurrent sends (ADR 0013) and the verdict write, which holds
//! the task row against a concurrent close.

use std::sync::Arc;

use async_trait::async_trait;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::events::append_events;
use super::PgStore;
use crate::store::conversations::{ConversationDialect, Marked};
use crate::store::group_commit::GroupCommit;
use crate::store::group_sends::{
    group_delivery, group_jobs, group_seqs, message_rows, recipient_pairs, GroupInsert, PoolSends,
    SendCommit,
};
use crate::store::group_verdicts::{MarkDecided, PoolVerdicts, VerdictCommit};
use crate::store::messages::{is_pending, InsertedMessage, MessageOutcome, NewMessage};
use crate::store::recipients::listings;
use crate::store::sql::{Arg, Executor};
use crate::store::CommitFeed;
use crate::store::StoreResult;

impl ConversationDialect for PgStore {
    fn sends(&self) -> &SendCommit {
        &self.sends
    }

    fn verdicts(&self) -> &VerdictCommit {
        &self.verdicts
    }
}

#[async_trait]
impl MarkDecided for PgConnection {
    async fn mark_decided(
        &mut self,
        message_id: Uuid,
        outcome: &MessageOutcome,
        listed: bool,
    ) -> StoreResult<Marked> {
        mark_decided(self, message_id, outcome, listed).await
    }
}

/// Writes a pending message's verdict; a forward only while its task and
/// its app's installation are active, and safe against a concurrent close
/// or suspend.
async fn mark_decided(
    ex: &mut dyn Executor,
    message_id: Uuid,
    outcome: &MessageOutcome,
    listed: bool,
) -> StoreResult<Marked> {
    let (verdict, reason) = match outcome {
        MessageOutcome::Forward { .. } => ("forwarded", None),
        MessageOutcome::Block { reason } => ("blocked", Some(reason.as_str())),
    };
    if matches!(outcome, MessageOutcome::Forward { .. })
        && !task_active_held(ex, message_id).await?
        && is_pending(ex, message_id).await?
    {
        return Ok(Marked::NotApplicable);
    }
    let changed = ex
            .execute(
                "UPDATE messages SET verdict = $1, verdict_reason = $2, listed = $4, recipient_count = $5 \
                 WHERE id = $3 AND verdict = 'pending'",
                &[
                    Arg::Text(verdict),
                    Arg::OptText(reason),
                    Arg::Id(message_id),
                    Arg::Bool(listed),
                    Arg::Int(outcome.recipient_count()),
                ],
            )
            .await?;
    Ok(if changed > 0 {
        Marked::Applied
    } else {
        Marked::AlreadyDecided
    })
}

/// Whether the message's task and its app's live installation are both
/// active, holding both rows (FOR SHARE) until commit: a close or a
/// suspend (an UPDATE, a row lock) waits for this forward, or this forward
/// sees it (it re-reads the newest row versions after waiting). No live
/// installation row: no forward (ADR 0023 §7). The installation is held
/// first, then the task, the order uninstall takes them in (installation,
/// then its tasks), so the two never wait on each other in a cycle.
async fn task_active_held(ex: &mut dyn Executor, message_id: Uuid) -> StoreResult<bool> {
    let installation = ex
        .fetch_optional(
            "SELECT i.state FROM messages m JOIN conversations c ON c.id = m.conversation_id \
             JOIN tasks t ON t.id = c.task_id \
             JOIN installations i ON i.app_id = t.app_id AND i.state <> 'uninstalled' \
             WHERE m.id = $1 FOR SHARE OF i",
            &[Arg::Id(message_id)],
        )
        .await?;
    match installation {
        Some(r) if r.text("state")? == "active" => {}
        _ => return Ok(false),
    }
    let row = ex
        .fetch_optional(
            "SELECT t.state FROM messages m JOIN conversations c ON c.id = m.conversation_id \
             JOIN tasks t ON t.id = c.task_id WHERE m.id = $1 FOR SHARE OF t",
            &[Arg::Id(message_id)],
        )
        .await?;
    Ok(match row {
        Some(r) => r.text("state")? == "active",
        None => false,
    })
}

/// The group committers of sends and of verdicts, one lock each, draining
/// their queues on the writer runtime; other writes run concurrently.
pub(super) fn group_commits(
    pool: PgPool,
    feed: CommitFeed,
    writer: tokio::runtime::Handle,
) -> (SendCommit, VerdictCommit) {
    (
        GroupCommit::new(
            Arc::new(tokio::sync::Mutex::new(())),
            Arc::new(PoolSends::new(pool.clone())),
            feed.clone(),
        )
        .draining_on(writer.clone()),
        GroupCommit::new(
            Arc::new(tokio::sync::Mutex::new(())),
            Arc::new(PoolVerdicts::new(pool)),
            feed,
        )
        .draining_on(writer),
    )
}

#[async_trait]
impl GroupInsert for PgConnection {
    async fn insert_group_in(
        &mut self,
        group: &[&NewMessage],
    ) -> StoreResult<Vec<InsertedMessage>> {
        insert_group_in(self, group).await
    }
}

async fn insert_group_in(
    conn: &mut PgConnection,
    group: &[&NewMessage],
) -> StoreResult<Vec<InsertedMessage>> {
    let seqs = group_seqs(&mut *conn, group).await?;
    let listed = listings(&mut *conn, group).await?;
    let rows = message_rows(group, &seqs, &listed)?;
    for part in rows.chunks(500) {
        let mut q = sqlx::QueryBuilder::<sqlx::Postgres>::new(
            "INSERT INTO messages (id, conversation_id, seq, sender_id, origin, parts, reply_to, client_msg_id, \
             request_hash, verdict, created_at, listed, recipient_count, thread_id) ",
        );
        q.push_values(part, |mut row, r| {
            let m = r.message;
            row.push_bind(m.id)
                .push_bind(m.conversation_id)
                .push_bind(r.seq)
                .push_bind(m.sender_id)
                .push_bind(m.origin.as_str())
                .push_bind(r.parts.clone())
                .push_unseparated("::jsonb")
                .push_bind(m.reply_to)
                .push_bind(m.client_msg_id.clone())
                .push_bind(m.request_hash.clone())
                .push_bind(r.verdict)
                .push_bind(m.created_at)
                .push_bind(r.listed)
                .push_bind(r.recipient_count)
                .push_bind(m.thread_id);
        });
        q.build().execute(&mut *conn).await?;
    }
    let (jobs, wakes) = group_jobs(group);
    for part in jobs.chunks(500) {
        let mut q = sqlx::QueryBuilder::<sqlx::Postgres>::new(
            "INSERT INTO jobs (id, kind, subject, run_at, created_at, locked_until, attempts) ",
        );
        q.push_values(part, |mut row, (job, now)| {
            row.push_bind(job.id)
                .push_bind(job.kind.as_str())
                .push_bind(job.subject)
                .push_bind(job.run_at)
                .push_bind(*now)
                .push_bind(job.claimed_until)
                .push_bind(job.initial_attempts());
        });
        q.build().execute(&mut *conn).await?;
    }
    for (job, now) in wakes {
        crate::store::jobs::insert_job(&mut *conn, job, now).await?;
    }
    let pairs = recipient_pairs(&rows);
    for part in pairs.chunks(500) {
        let mut q = sqlx::QueryBuilder::<sqlx::Postgres>::new(
            "INSERT INTO message_recipients (message_id, recipient_id) ",
        );
        q.push_values(part, |mut row, (message, recipient)| {
            row.push_bind(*message).push_bind(*recipient);
        });
        q.build().execute(&mut *conn).await?;
    }
    let delivery = group_delivery(group, &seqs);
    let stored = append_events(conn, &delivery.events, delivery.occurred_at).await?;
    Ok(delivery.results(group, stored))
}
