//! Group commit of sends (ADR 0013): the pool writer both stores use and
//! what a group's multi-row write shares between the dialects: each
//! message's seq, its row, its recipients and the events that deliver it.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use uuid::Uuid;

use super::group_commit::{GroupCommit, GroupWriter};
use super::messages::{insert_one, recipient_count};
use super::sql::{to_json, Arg, Executor};
use super::{Fanout, InsertedMessage, NewJob, NewMessage, StoreError, StoreResult, Verdict};
use crate::domain::event::{rfc3339, NewEvent, StoredEvent};
use crate::domain::message::Message;
use crate::domain::Millis;

/// The group committer of sends.
pub type SendCommit = GroupCommit<NewMessage, InsertedMessage>;

/// A backend's multi-row write of a whole group, inside the caller's
/// transaction: the per-dialect part of a group commit.
#[async_trait]
pub trait GroupInsert {
    async fn insert_group_in(&mut self, group: &[&NewMessage])
        -> StoreResult<Vec<InsertedMessage>>;
}

/// The [`GroupWriter`] of sends on a pool: each write in its own
/// transaction, the lone send through the shared [`insert_one`].
pub struct PoolSends<DB: sqlx::Database> {
    pool: sqlx::Pool<DB>,
}

impl<DB: sqlx::Database> PoolSends<DB> {
    pub fn new(pool: sqlx::Pool<DB>) -> PoolSends<DB> {
        PoolSends { pool }
    }
}

#[async_trait]
impl<DB> GroupWriter<NewMessage, InsertedMessage> for PoolSends<DB>
where
    DB: sqlx::Database,
    DB::Connection: Executor + GroupInsert,
{
    async fn write_one(&self, m: &NewMessage) -> StoreResult<InsertedMessage> {
        let mut tx = self.pool.begin().await?;
        let done = insert_one(&mut *tx, m).await?;
        tx.commit().await?;
        Ok(done)
    }

    async fn write_group(&self, group: &[&NewMessage]) -> StoreResult<Vec<InsertedMessage>> {
        let mut tx = self.pool.begin().await?;
        match tx.insert_group_in(group).await {
            Ok(done) => {
                tx.commit().await?;
                Ok(done)
            }
            Err(e) => {
                // Before the lock passes on, so the next writer does not
                // meet this transaction still open.
                let _ = tx.rollback().await;
                Err(e)
            }
        }
    }
}

/// Takes `$1` seqs of conversation `$2`; returns its new last seq.
pub const TAKE_SEQS: &str = "UPDATE conversations SET last_message_seq = last_message_seq + $1 \
                             WHERE id = $2 RETURNING last_message_seq";

/// Each message's seq, in group order: one update per conversation takes
/// its whole count at once.
pub async fn group_seqs(ex: &mut dyn Executor, group: &[&NewMessage]) -> StoreResult<Vec<i64>> {
    let mut first_seq = HashMap::new();
    for (conversation, count) in conversation_counts(group) {
        let last = ex
            .fetch_optional(TAKE_SEQS, &[Arg::Int(count), Arg::Id(conversation)])
            .await?
            .ok_or(StoreError::NotFound)?
            .int("last_message_seq")?;
        first_seq.insert(conversation, last - count + 1);
    }
    Ok(assign_seqs(group, first_seq))
}

/// A row of a group's multi-row message insert.
pub struct MessageRow<'a> {
    pub message: &'a NewMessage,
    pub seq: i64,
    /// Its parts, serialized.
    pub parts: String,
    pub verdict: &'static str,
    /// Whether its recipients are rows (see [`super::recipients`]).
    pub listed: bool,
    pub recipient_count: i64,
}

pub fn message_rows<'a>(
    group: &[&'a NewMessage],
    seqs: &[i64],
    listed: &[bool],
) -> StoreResult<Vec<MessageRow<'a>>> {
    group
        .iter()
        .zip(seqs)
        .zip(listed)
        .map(|((m, seq), listed)| {
            Ok(MessageRow {
                message: m,
                seq: *seq,
                parts: to_json(&m.parts)?,
                verdict: verdict_column(m),
                listed: *listed,
                recipient_count: recipient_count(m),
            })
        })
        .collect()
}

/// Seq ranges for a group: one update per conversation, each taking its
/// count at once. Conversations come in id order, so two groups (on two
/// nodes) lock their rows in the same order.
pub fn conversation_counts(group: &[&NewMessage]) -> Vec<(Uuid, i64)> {
    let mut counts = std::collections::BTreeMap::new();
    for m in group {
        *counts.entry(m.conversation_id).or_insert(0i64) += 1;
    }
    counts.into_iter().collect()
}

/// Each message's seq, in group order, from each conversation's first seq.
pub fn assign_seqs(group: &[&NewMessage], mut first_seq: HashMap<Uuid, i64>) -> Vec<i64> {
    group
        .iter()
        .map(|m| {
            let next = first_seq
                .get_mut(&m.conversation_id)
                .expect("every conversation was counted");
            let seq = *next;
            *next += 1;
            seq
        })
        .collect()
}

/// The column value of a new message's verdict.
fn verdict_column(m: &NewMessage) -> &'static str {
    match &m.fanout {
        Fanout::Forward { .. } => "forwarded",
        Fanout::Pending => "pending",
    }
}

/// The jobs of a group's messages, with their messages' times: the ones
/// written as given (many a statement), then the wakes, each written by
/// [`crate::store::jobs::WAKE_INSERT`] only for a beatless hosted app.
pub type TimedJobs<'a> = Vec<(&'a NewJob, Millis)>;

pub fn group_jobs<'a>(group: &[&'a NewMessage]) -> (TimedJobs<'a>, TimedJobs<'a>) {
    group
        .iter()
        .flat_map(|m| m.jobs.iter().map(|j| (j, m.created_at)))
        .partition(|(j, _)| !j.kind.kept_for_beatless_only())
}

/// `(message, recipient)` rows of a group's listed forwards.
pub fn recipient_pairs(rows: &[MessageRow<'_>]) -> Vec<(Uuid, Uuid)> {
    rows.iter()
        .filter(|r| r.listed)
        .flat_map(|r| match &r.message.fanout {
            Fanout::Forward { recipients, .. } => {
                recipients.iter().map(|p| (r.message.id, *p)).collect()
            }
            Fanout::Pending => Vec::new(),
        })
        .collect()
}

/// A group's messages as stored, the events that deliver them, and which
/// message each event belongs to.
pub struct GroupDelivery {
    pub messages: Vec<Message>,
    pub events: Vec<NewEvent>,
    owner: HashMap<Uuid, usize>,
    /// One time for the group's events (the sends are milliseconds apart).
    pub occurred_at: Millis,
}

pub fn group_delivery(group: &[&NewMessage], seqs: &[i64]) -> GroupDelivery {
    let mut messages = Vec::with_capacity(group.len());
    let mut events = Vec::new();
    let mut owner = HashMap::new();
    for (i, (m, seq)) in group.iter().zip(seqs).enumerate() {
        let message = Message {
            id: m.id,
            conversation_id: m.conversation_id,
            seq: *seq as u64,
            sender_id: m.sender_id,
            origin: m.origin,
            parts: m.parts.clone(),
            reply_to: m.reply_to,
            thread_id: m.thread_id,
            created_at: rfc3339(m.created_at),
            reply_to_interaction: None,
            card: None,
        };
        if let Fanout::Forward { .. } = &m.fanout {
            let payload = Arc::new(serde_json::json!({ "message": message }));
            let copies = super::messages::forward_copies(&m.fanout, m.id, payload);
            // One event per recipient kind: each id is this message's.
            for e in &copies {
                owner.insert(e.id, i);
            }
            events.extend(copies);
        }
        messages.push(message);
    }
    GroupDelivery {
        messages,
        events,
        owner,
        occurred_at: group.iter().map(|m| m.created_at).max().unwrap_or_default(),
    }
}

impl GroupDelivery {
    /// Each sender's result, in group order, from the stored events.
    pub fn results(self, group: &[&NewMessage], stored: Vec<StoredEvent>) -> Vec<InsertedMessage> {
        let mut events_of: Vec<Vec<StoredEvent>> = vec![Vec::new(); group.len()];
        for e in stored {
            events_of[self.owner[&e.id]].push(e);
        }
        group
            .iter()
            .zip(self.messages)
            .zip(events_of)
            .map(|((m, message), events)| InsertedMessage::Inserted {
                verdict: match &m.fanout {
                    Fanout::Forward { recipients, .. } => Verdict::Forwarded {
                        recipients: recipients.len() as u32,
                    },
                    Fanout::Pending => Verdict::Pending,
                },
                message,
                events,
            })
            .collect()
    }
}
