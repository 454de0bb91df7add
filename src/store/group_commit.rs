//! Group commit for message sends, shared by both stores (ADR 0013).
//!
//! Every send queues its message, then waits for the group lock; whoever
//! gets it writes everything queued so far in one transaction through the
//! backend's [`GroupWriter`] and answers each sender. A send answered by an
//! earlier group returns at once; a send given up while still queued is
//! taken back out, so it is never written behind sends that came after it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use uuid::Uuid;

use super::messages::{insert_one, recipient_count};
use super::sql::{to_json, Arg, Executor};
use super::{Fanout, InsertedMessage, NewJob, NewMessage, StoreError, StoreResult, Verdict};
use crate::domain::event::{rfc3339, NewEvent, StoredEvent};
use crate::domain::message::Message;
use crate::domain::Millis;

/// A backend's two ways of writing sends.
#[async_trait]
pub trait GroupWriter: Send + Sync + 'static {
    /// One message in its own transaction: a lone send, and the fallback
    /// when a group's combined write fails on one message's fault.
    async fn insert_one(&self, m: &NewMessage) -> StoreResult<InsertedMessage>;
    /// The whole group in one transaction, results in group order.
    async fn insert_group(&self, group: &[&NewMessage]) -> StoreResult<Vec<InsertedMessage>>;
}

/// A backend's multi-row write of a whole group, inside the caller's
/// transaction: the per-dialect part of a group commit.
#[async_trait]
pub trait GroupInsert {
    async fn insert_group_in(&mut self, group: &[&NewMessage])
        -> StoreResult<Vec<InsertedMessage>>;
}

/// The [`GroupWriter`] of a pool: each write in its own transaction, the
/// lone send through the shared [`insert_one`].
pub struct PoolSends<DB: sqlx::Database> {
    pool: sqlx::Pool<DB>,
}

impl<DB: sqlx::Database> PoolSends<DB> {
    pub fn new(pool: sqlx::Pool<DB>) -> PoolSends<DB> {
        PoolSends { pool }
    }
}

#[async_trait]
impl<DB> GroupWriter for PoolSends<DB>
where
    DB: sqlx::Database,
    DB::Connection: Executor + GroupInsert,
{
    async fn insert_one(&self, m: &NewMessage) -> StoreResult<InsertedMessage> {
        let mut tx = self.pool.begin().await?;
        let done = insert_one(&mut *tx, m).await?;
        tx.commit().await?;
        Ok(done)
    }

    async fn insert_group(&self, group: &[&NewMessage]) -> StoreResult<Vec<InsertedMessage>> {
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

struct Queued {
    message: NewMessage,
    reply: tokio::sync::oneshot::Sender<StoreResult<InsertedMessage>>,
}

pub struct GroupCommit {
    /// Held while a group is written. SQLite shares it with every other
    /// write transaction (its single writer); PostgreSQL has one for sends.
    lock: Arc<tokio::sync::Mutex<()>>,
    queued: Arc<Mutex<Vec<Queued>>>,
    writer: Arc<dyn GroupWriter>,
}

impl GroupCommit {
    pub fn new(lock: Arc<tokio::sync::Mutex<()>>, writer: Arc<dyn GroupWriter>) -> GroupCommit {
        GroupCommit {
            lock,
            queued: Arc::new(Mutex::new(Vec::new())),
            writer,
        }
    }

    pub async fn submit(&self, m: &NewMessage) -> StoreResult<InsertedMessage> {
        let (reply, mut answer) = tokio::sync::oneshot::channel();
        self.queue().push(Queued {
            message: m.clone(),
            reply,
        });
        let mut unqueue = Unqueue {
            queued: self.queued.clone(),
            id: m.id,
            armed: true,
        };
        // An earlier group may write this message while we wait for the
        // lock: take its answer at once rather than queueing for the lock
        // behind unrelated writes.
        let holding = tokio::select! {
            biased;
            done = &mut answer => {
                unqueue.armed = false;
                return done.unwrap_or_else(|_| Err(group_ended()));
            }
            holding = self.lock.clone().lock_owned() => holding,
        };
        unqueue.armed = false;
        // The lock passes on only after a group answered all its senders:
        // ours is answered, or still queued.
        if let Ok(done) = answer.try_recv() {
            return done;
        }
        let group = std::mem::take(&mut *self.queue());
        let writer = self.writer.clone();
        // Its own task: the group's other senders wait on this write, so it
        // must finish even if this caller is dropped.
        tokio::spawn(async move {
            write_group(writer.as_ref(), group).await;
            drop(holding);
        });
        answer.await.unwrap_or_else(|_| Err(group_ended()))
    }

    #[cfg(test)]
    pub fn queued_len(&self) -> usize {
        self.queue().len()
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Vec<Queued>> {
        self.queued.lock().expect("send queue poisoned")
    }
}

fn group_ended() -> StoreError {
    StoreError::Database(sqlx::Error::Protocol(
        "the group write ended without an answer".into(),
    ))
}

/// Removes a send's queue entry when the send is dropped before a writer
/// took it (once taken, the write goes ahead and answers nobody).
struct Unqueue {
    queued: Arc<Mutex<Vec<Queued>>>,
    id: Uuid,
    armed: bool,
}

impl Drop for Unqueue {
    fn drop(&mut self) {
        if self.armed {
            if let Ok(mut q) = self.queued.lock() {
                q.retain(|e| e.message.id != self.id);
            }
        }
    }
}

/// Writes a group in one transaction. If one message is at fault (a
/// duplicate `clientMsgId`, a missing conversation) each is written on its
/// own so only that one gets the error; any other failure (the database is
/// unavailable) is every sender's answer, rather than N more attempts.
async fn write_group(writer: &dyn GroupWriter, group: Vec<Queued>) {
    if group.len() > 1 {
        let messages: Vec<&NewMessage> = group.iter().map(|q| &q.message).collect();
        match writer.insert_group(&messages).await {
            Ok(results) => {
                for (q, r) in group.into_iter().zip(results) {
                    let _ = q.reply.send(Ok(r));
                }
                return;
            }
            Err(e) if one_message_at_fault(&e) => {
                tracing::debug!(error = %e, size = messages.len(), "group insert failed; writing one by one")
            }
            Err(e) => {
                tracing::warn!(error = %e, size = messages.len(), "group insert failed");
                let text = e.to_string();
                for q in group {
                    let _ = q.reply.send(Err(StoreError::Database(sqlx::Error::Protocol(
                        text.clone(),
                    ))));
                }
                return;
            }
        }
    }
    for q in group {
        let r = writer.insert_one(&q.message).await;
        let _ = q.reply.send(r);
    }
}

fn one_message_at_fault(e: &StoreError) -> bool {
    match e {
        StoreError::NotFound => true,
        StoreError::Database(sqlx::Error::Database(db)) => {
            db.is_unique_violation() || db.is_foreign_key_violation()
        }
        _ => false,
    }
}

/// Each message's seq, in group order: one update per conversation takes
/// its whole count at once.
pub async fn group_seqs(ex: &mut dyn Executor, group: &[&NewMessage]) -> StoreResult<Vec<i64>> {
    let mut first_seq = HashMap::new();
    for (conversation, count) in conversation_counts(group) {
        let last = ex
            .fetch_optional(
                "UPDATE conversations SET last_message_seq = last_message_seq + $1 WHERE id = $2 \
                 RETURNING last_message_seq",
                &[Arg::Int(count), Arg::Id(conversation)],
            )
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
fn conversation_counts(group: &[&NewMessage]) -> Vec<(Uuid, i64)> {
    let mut counts = std::collections::BTreeMap::new();
    for m in group {
        *counts.entry(m.conversation_id).or_insert(0i64) += 1;
    }
    counts.into_iter().collect()
}

/// Each message's seq, in group order, from each conversation's first seq.
fn assign_seqs(group: &[&NewMessage], mut first_seq: HashMap<Uuid, i64>) -> Vec<i64> {
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

/// The jobs of a group's pending messages, with their messages' times.
pub fn group_jobs<'a>(group: &[&'a NewMessage]) -> Vec<(&'a NewJob, Millis)> {
    group
        .iter()
        .filter_map(|m| m.job.as_ref().map(|j| (j, m.created_at)))
        .collect()
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
            created_at: rfc3339(m.created_at),
        };
        if let Fanout::Forward {
            recipients,
            event_type,
        } = &m.fanout
        {
            let payload = Arc::new(serde_json::json!({ "message": message }));
            let copies = NewEvent::message_copies(recipients, event_type, m.id, payload);
            if let Some(e) = copies.first() {
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
