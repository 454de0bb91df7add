//! The send group commit on SQLite (ADR 0013, ADR 0022): a group (or a
//! lone send, a group of one) goes to the writer thread whole, which runs
//! `BEGIN IMMEDIATE ... COMMIT` there as plain calls: the same statements,
//! in the same order, as the sqlx send path, over the plans both dialects
//! share ([`crate::store::group_sends`], [`crate::store::recipients`],
//! [`crate::store::events::append`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use rusqlite::types::Value;
use rusqlite::{params_from_iter, Connection, TransactionBehavior};
use uuid::Uuid;

use super::events::{
    INDEX_CHUNK, INDEX_INSERT, PAYLOAD_INSERT, PAYLOAD_RETURNING, RECIPIENT_INSERT, ROW_CHUNK,
    STREAM_CHUNK, STREAM_INSERT, STREAM_UPSERT,
};
use super::uuid;
use super::writer::{bind_numbered, lite_err, value, values_clause, Writer};
use crate::domain::event::{NewEvent, StoredEvent};
use crate::domain::Millis;
use crate::store::events::append::{
    audience_runs, index_rows, payload_rows, stored_events, IndexRow, StreamSeq,
};
use crate::store::group_commit::{GroupWriter, LoneFinish};
use crate::store::group_sends::{
    assign_seqs, conversation_counts, group_delivery, group_jobs, message_rows, recipient_pairs,
    MessageRow, TAKE_SEQS,
};
use crate::store::jobs::{job_args, WAKE_INSERT};
use crate::store::messages::{recipient_count, InsertedMessage, NewMessage};
use crate::store::recipients::{listed_by, rosters_needed, Roster, ROSTER_COUNT, ROSTER_MEMBER};
use crate::store::sql::shaped_chunks;
use crate::store::sql::Arg;
use crate::store::{NewJob, StoreError, StoreResult};

const MESSAGE_INSERT: &str = "INSERT INTO messages (id, conversation_id, seq, sender_id, origin, \
     parts, reply_to, client_msg_id, request_hash, verdict, created_at, listed, recipient_count, \
     thread_id) ";
const JOB_INSERT: &str =
    "INSERT INTO jobs (id, kind, subject, run_at, created_at, locked_until, attempts) ";

/// The largest lone send finished on the writer thread: its publish (a
/// frame and an offer per recipient, about a microsecond each) stays well
/// under one commit's sync, so the next group's write barely waits.
const LONE_MAX_RECIPIENTS: i64 = 64;

/// The [`GroupWriter`] of sends on SQLite: one hand-off per transaction.
pub(super) struct ThreadSends {
    writer: Arc<Writer>,
}

impl ThreadSends {
    pub fn new(writer: Arc<Writer>) -> ThreadSends {
        ThreadSends { writer }
    }
}

#[async_trait]
impl GroupWriter<NewMessage, InsertedMessage> for ThreadSends {
    /// A group of one: the lone send's statements are the group's with
    /// every count 1 (one seq, one row, its copies).
    async fn write_one(&self, m: &NewMessage) -> StoreResult<InsertedMessage> {
        let m = m.clone();
        self.writer.run(move |conn| write_lone_send(conn, m)).await
    }

    async fn write_group(&self, group: &[&NewMessage]) -> StoreResult<Vec<InsertedMessage>> {
        let group: Vec<NewMessage> = group.iter().map(|m| (*m).clone()).collect();
        self.writer.run(move |conn| write_sends(conn, &group)).await
    }

    /// The lone send, answered and published from the writer thread: one
    /// hand-off in, one wake-up of its sender out (ADR 0022). Only a small
    /// fan-out: the thread publishes before it takes the next group's
    /// write, and a large one's offers are better overlapped with that
    /// write by a group task.
    fn write_lone(
        &self,
        m: &NewMessage,
        finish: LoneFinish<InsertedMessage>,
    ) -> Result<(), LoneFinish<InsertedMessage>> {
        if recipient_count(m) > LONE_MAX_RECIPIENTS {
            return Err(finish);
        }
        let m = m.clone();
        // A thread that has ended drops the job and `finish` with it: its
        // sender is answered "the group write ended".
        let handed = self.writer.hand_off(move |conn, ran| {
            let done = write_lone_send(conn, m);
            finish.done(done, ran());
        });
        if !handed {
            tracing::error!("the SQLite writer thread has ended; a send was not written");
        }
        Ok(())
    }
}

fn write_lone_send(conn: &mut Connection, m: NewMessage) -> StoreResult<InsertedMessage> {
    write_sends(conn, &[m])?
        .pop()
        .ok_or_else(|| StoreError::Corrupt("a send's write returned no result".into()))
}

/// The group in one immediate transaction, on the writer thread. On any
/// error the transaction rolls back before the answer goes out, so the
/// next holder of the writer lock never meets it open.
fn write_sends(conn: &mut Connection, group: &[NewMessage]) -> StoreResult<Vec<InsertedMessage>> {
    let group: Vec<&NewMessage> = group.iter().collect();
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(lite_err)?;
    let done = insert_group(&tx, &group)?;
    tx.commit().map_err(lite_err)?;
    Ok(done)
}

fn insert_group(conn: &Connection, group: &[&NewMessage]) -> StoreResult<Vec<InsertedMessage>> {
    let seqs = group_seqs(conn, group)?;
    let listed = listings(conn, group)?;
    let rows = message_rows(group, &seqs, &listed)?;
    insert_messages(conn, &rows)?;
    let (jobs, wakes) = group_jobs(group);
    insert_jobs(conn, &jobs)?;
    insert_wakes(conn, &wakes)?;
    insert_recipients(conn, &recipient_pairs(&rows))?;
    let delivery = group_delivery(group, &seqs);
    let stored = append_events(conn, &delivery.events, delivery.occurred_at)?;
    Ok(delivery.results(group, stored))
}

/// [`crate::store::group_sends::group_seqs`] on this connection.
fn group_seqs(conn: &Connection, group: &[&NewMessage]) -> StoreResult<Vec<i64>> {
    let mut first_seq = HashMap::new();
    for (conversation, count) in conversation_counts(group) {
        let last = first_int(conn, TAKE_SEQS, &[Arg::Int(count), Arg::Id(conversation)])?
            .ok_or(StoreError::NotFound)?;
        first_seq.insert(conversation, last - count + 1);
    }
    Ok(assign_seqs(group, first_seq))
}

/// [`crate::store::recipients::listings`] on this connection.
fn listings(conn: &Connection, group: &[&NewMessage]) -> StoreResult<Vec<bool>> {
    let mut rosters = BTreeMap::new();
    for (conversation, senders) in rosters_needed(group) {
        let participants =
            first_int(conn, ROSTER_COUNT, &[Arg::Id(conversation)])?.unwrap_or(0) as usize;
        let mut senders_in = HashSet::new();
        for s in senders {
            if first_int(conn, ROSTER_MEMBER, &[Arg::Id(conversation), Arg::Id(s)])?.is_some() {
                senders_in.insert(s);
            }
        }
        rosters.insert(
            conversation,
            Roster {
                participants,
                senders_in,
            },
        );
    }
    Ok(listed_by(group, &rosters))
}

/// The first column of a shared query's first row, if it has one.
fn first_int(conn: &Connection, sql: &str, args: &[Arg<'_>]) -> StoreResult<Option<i64>> {
    let mut stmt = conn.prepare_cached(sql).map_err(lite_err)?;
    super::writer::note_statement();
    bind_numbered(&mut stmt, args).map_err(lite_err)?;
    let mut rows = stmt.raw_query();
    match rows.next().map_err(lite_err)? {
        Some(row) => Ok(Some(row.get(0).map_err(lite_err)?)),
        None => Ok(None),
    }
}

/// Runs `f` on `sql`, prepared once and kept: every multi-row statement
/// comes in [`shaped_chunks`]' few shapes.
fn with_statement<R>(
    conn: &Connection,
    sql: &str,
    f: impl FnOnce(&mut rusqlite::Statement<'_>) -> StoreResult<R>,
) -> StoreResult<R> {
    super::writer::note_statement();
    let mut cached = conn.prepare_cached(sql).map_err(lite_err)?;
    f(&mut cached)
}

/// One multi-row insert of `values`, `columns` to a row.
fn insert_rows(
    conn: &Connection,
    head: &str,
    columns: usize,
    values: Vec<Value>,
) -> StoreResult<()> {
    let rows = values.len() / columns;
    let sql = format!("{head}{}", values_clause(rows, columns));
    with_statement(conn, &sql, |stmt| {
        stmt.execute(params_from_iter(values)).map_err(lite_err)?;
        Ok(())
    })
}

fn insert_messages(conn: &Connection, rows: &[MessageRow<'_>]) -> StoreResult<()> {
    for part in shaped_chunks(rows, ROW_CHUNK) {
        let mut values = Vec::with_capacity(part.len() * 14);
        for r in part {
            let m = r.message;
            values.extend(
                [
                    Arg::Id(m.id),
                    Arg::Id(m.conversation_id),
                    Arg::Int(r.seq),
                    Arg::Id(m.sender_id),
                    Arg::Text(m.origin.as_str()),
                    Arg::Json(&r.parts),
                    Arg::OptId(m.reply_to),
                    Arg::OptText(m.client_msg_id.as_deref()),
                    Arg::OptText(m.request_hash.as_deref()),
                    Arg::Text(r.verdict),
                    Arg::Int(m.created_at),
                    Arg::Bool(r.listed),
                    Arg::Int(r.recipient_count),
                    Arg::OptId(m.thread_id),
                ]
                .iter()
                .map(value),
            );
        }
        insert_rows(conn, MESSAGE_INSERT, 14, values)?;
    }
    Ok(())
}

fn insert_jobs(conn: &Connection, jobs: &[(&NewJob, Millis)]) -> StoreResult<()> {
    for part in shaped_chunks(jobs, ROW_CHUNK) {
        let mut values = Vec::with_capacity(part.len() * 7);
        for (job, now) in part {
            values.extend(
                [
                    Arg::Id(job.id),
                    Arg::Text(job.kind.as_str()),
                    Arg::Id(job.subject),
                    Arg::Int(job.run_at),
                    Arg::Int(*now),
                    Arg::OptInt(job.claimed_until),
                    Arg::Int(job.initial_attempts()),
                ]
                .iter()
                .map(value),
            );
        }
        insert_rows(conn, JOB_INSERT, 7, values)?;
    }
    Ok(())
}

/// Each wake by its own statement: it is kept only for a beatless hosted
/// app ([`WAKE_INSERT`]).
fn insert_wakes(conn: &Connection, wakes: &[(&NewJob, Millis)]) -> StoreResult<()> {
    for (job, now) in wakes {
        let mut stmt = conn.prepare_cached(WAKE_INSERT).map_err(lite_err)?;
        bind_numbered(&mut stmt, &job_args(job, *now)).map_err(lite_err)?;
        stmt.raw_execute().map_err(lite_err)?;
        super::writer::note_statement();
    }
    Ok(())
}

pub(super) fn insert_recipients(conn: &Connection, pairs: &[(Uuid, Uuid)]) -> StoreResult<()> {
    for part in shaped_chunks(pairs, ROW_CHUNK) {
        let values = part
            .iter()
            .flat_map(|(message, recipient)| [Arg::Id(*message), Arg::Id(*recipient)])
            .map(|a| value(&a))
            .collect();
        insert_rows(conn, RECIPIENT_INSERT, 2, values)?;
    }
    Ok(())
}

/// `super::events::append_events` on this connection: payload rows, then
/// per chunk of audiences the stream upsert and the index rows.
pub(super) fn append_events(
    conn: &Connection,
    events: &[NewEvent],
    now: Millis,
) -> StoreResult<Vec<StoredEvent>> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let payload_of = insert_payloads(conn, events, now)?;
    let (sorted, runs) = audience_runs(events);
    let mut stored = Vec::with_capacity(sorted.len());
    for chunk in shaped_chunks(&runs, STREAM_CHUNK) {
        let streams = take_stream_seqs(conn, chunk)?;
        let rows = index_rows(&sorted, chunk, &streams, &payload_of)?;
        insert_index(conn, &rows)?;
        stored_events(rows, now, &mut stored);
    }
    Ok(stored)
}

/// The payload rows; returns each event id's payload key.
fn insert_payloads(
    conn: &Connection,
    events: &[NewEvent],
    now: Millis,
) -> StoreResult<HashMap<Uuid, i64>> {
    let payloads = payload_rows(events)?;
    let mut payload_of = HashMap::with_capacity(payloads.len());
    for part in shaped_chunks(&payloads, ROW_CHUNK) {
        let mut values = Vec::with_capacity(part.len() * 6);
        for p in part {
            values.extend(
                [
                    Arg::Id(p.event_id),
                    Arg::Text(p.event_type),
                    Arg::Int(now),
                    Arg::OptId(p.message_id),
                    Arg::OptText(p.body.as_deref()),
                    Arg::Int(p.refs),
                ]
                .iter()
                .map(value),
            );
        }
        let sql = format!(
            "{PAYLOAD_INSERT}{}{PAYLOAD_RETURNING}",
            values_clause(part.len(), 6)
        );
        with_statement(conn, &sql, |stmt| {
            let mut rows = stmt.query(params_from_iter(values)).map_err(lite_err)?;
            while let Some(r) = rows.next().map_err(lite_err)? {
                let id: i64 = r.get(0).map_err(lite_err)?;
                let event: String = r.get(1).map_err(lite_err)?;
                payload_of.insert(uuid(&event)?, id);
            }
            Ok(())
        })?;
    }
    Ok(payload_of)
}

/// Adds each audience's count to its stream (made on first use) and
/// returns the stream's key and new last seq.
fn take_stream_seqs(
    conn: &Connection,
    chunk: &[(Uuid, usize, usize)],
) -> StoreResult<HashMap<Uuid, StreamSeq>> {
    let values: Vec<Value> = chunk
        .iter()
        .flat_map(|(audience, _, count)| [Arg::Id(*audience), Arg::Int(*count as i64)])
        .map(|a| value(&a))
        .collect();
    let sql = format!(
        "{STREAM_INSERT}{}{STREAM_UPSERT}",
        values_clause(chunk.len(), 2)
    );
    with_statement(conn, &sql, |stmt| {
        let mut rows = stmt.query(params_from_iter(values)).map_err(lite_err)?;
        let mut streams = HashMap::with_capacity(chunk.len());
        while let Some(r) = rows.next().map_err(lite_err)? {
            let audience: String = r.get(1).map_err(lite_err)?;
            streams.insert(
                uuid(&audience)?,
                StreamSeq {
                    stream: r.get(0).map_err(lite_err)?,
                    last_seq: r.get(2).map_err(lite_err)?,
                },
            );
        }
        Ok(streams)
    })
}

fn insert_index(conn: &Connection, rows: &[IndexRow<'_>]) -> StoreResult<()> {
    for part in shaped_chunks(rows, INDEX_CHUNK) {
        let values = part
            .iter()
            .flat_map(|r| [r.stream, r.seq, r.payload])
            .map(Value::Integer)
            .collect();
        insert_rows(conn, INDEX_INSERT, 3, values)?;
    }
    Ok(())
}
