//! The SQLite event appends and recipient rows: multi-row statements on the
//! send path, kept per dialect (ADR 0013, ADR 0014), over the plan in
//! [`crate::store::events::append`] (ADR 0018). Bulk statements bind with
//! `?`: sqlx looks each `$N` up by name on SQLite, a linear scan.

use std::collections::HashMap;

use sqlx::{Row as _, SqliteConnection};
use uuid::Uuid;

use super::uuid;
use crate::domain::event::{NewEvent, StoredEvent};
use crate::domain::Millis;
use crate::store::events::append::{
    audience_runs, index_rows, payload_rows, stored_events, IndexRow, PayloadRow, StreamSeq,
};
use crate::store::events::read::StoredJson;
use crate::store::events::EventDialect;
use crate::store::StoreResult;

impl EventDialect for super::SqliteStore {
    const STORED_JSON: StoredJson = StoredJson::AsWritten;
}

// The heads and tails of the bulk statements, shared with the writer
// thread's group write (`super::send_writer`), and their chunk sizes.
pub(super) const RECIPIENT_INSERT: &str =
    "INSERT INTO message_recipients (message_id, recipient_id) ";
pub(super) const PAYLOAD_INSERT: &str =
    "INSERT INTO event_payloads (event_id, type, occurred_at, message_id, body, refs) ";
pub(super) const PAYLOAD_RETURNING: &str = " RETURNING id, event_id";
pub(super) const STREAM_INSERT: &str = "INSERT INTO event_streams (audience, last_seq) ";
pub(super) const STREAM_UPSERT: &str =
    " ON CONFLICT (audience) DO UPDATE SET last_seq = event_streams.last_seq + excluded.last_seq \
     RETURNING stream, audience, last_seq";
pub(super) const INDEX_INSERT: &str = "INSERT INTO event_index (stream, seq, payload) ";
pub(super) const ROW_CHUNK: usize = 500;
pub(super) const STREAM_CHUNK: usize = 400;
pub(super) const INDEX_CHUNK: usize = 1000;

/// One statement per 500 recipients instead of one per recipient.
pub(super) async fn insert_recipients(
    conn: &mut SqliteConnection,
    message_id: Uuid,
    recipients: &[Uuid],
) -> StoreResult<()> {
    for chunk in recipients.chunks(ROW_CHUNK) {
        let mut q = sqlx::QueryBuilder::<sqlx::Sqlite>::new(RECIPIENT_INSERT);
        q.push_values(chunk, |mut row, r| {
            row.push_bind(message_id.to_string())
                .push_bind(r.to_string());
        });
        q.build().execute(&mut *conn).await?;
    }
    Ok(())
}

/// Appends events to their audiences' logs inside the caller's transaction:
/// one payload row per distinct event, then per 400 audiences one upsert
/// that hands out their seqs and one insert of their index rows. SQLite's
/// single writer makes commit order equal seq order.
pub(super) async fn append_events(
    conn: &mut SqliteConnection,
    events: &[NewEvent],
    now: Millis,
) -> StoreResult<Vec<StoredEvent>> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let payload_of = insert_payloads(conn, &payload_rows(events)?, now).await?;
    let (sorted, runs) = audience_runs(events);
    let mut stored = Vec::with_capacity(sorted.len());
    for chunk in runs.chunks(STREAM_CHUNK) {
        let streams = take_seqs(conn, chunk).await?;
        let rows = index_rows(&sorted, chunk, &streams, &payload_of)?;
        insert_index(conn, &rows).await?;
        stored_events(rows, now, &mut stored);
    }
    Ok(stored)
}

/// The payload rows; returns each event id's payload key.
async fn insert_payloads(
    conn: &mut SqliteConnection,
    payloads: &[PayloadRow],
    now: Millis,
) -> StoreResult<HashMap<Uuid, i64>> {
    let mut payload_of = HashMap::with_capacity(payloads.len());
    for chunk in payloads.chunks(ROW_CHUNK) {
        let mut q = sqlx::QueryBuilder::<sqlx::Sqlite>::new(PAYLOAD_INSERT);
        q.push_values(chunk, |mut row, p| {
            row.push_bind(p.event_id.to_string())
                .push_bind(p.event_type)
                .push_bind(now)
                .push_bind(p.message_id.map(|m| m.to_string()))
                .push_bind(p.body.clone())
                .push_bind(p.refs);
        });
        q.push(PAYLOAD_RETURNING);
        for r in q.build().fetch_all(&mut *conn).await? {
            payload_of.insert(uuid(r.try_get("event_id")?)?, r.try_get("id")?);
        }
    }
    Ok(payload_of)
}

/// Adds each audience's count to its stream (made on first use) and
/// returns the stream's key and new last seq.
async fn take_seqs(
    conn: &mut SqliteConnection,
    chunk: &[(Uuid, usize, usize)],
) -> StoreResult<HashMap<Uuid, StreamSeq>> {
    let mut upsert = sqlx::QueryBuilder::<sqlx::Sqlite>::new(STREAM_INSERT);
    upsert.push_values(chunk, |mut row, (audience, _, count)| {
        row.push_bind(audience.to_string()).push_bind(*count as i64);
    });
    upsert.push(STREAM_UPSERT);
    let mut streams = HashMap::with_capacity(chunk.len());
    for r in upsert.build().fetch_all(&mut *conn).await? {
        streams.insert(
            uuid(r.try_get("audience")?)?,
            StreamSeq {
                stream: r.try_get("stream")?,
                last_seq: r.try_get("last_seq")?,
            },
        );
    }
    Ok(streams)
}

async fn insert_index(conn: &mut SqliteConnection, rows: &[IndexRow<'_>]) -> StoreResult<()> {
    for part in rows.chunks(INDEX_CHUNK) {
        let mut insert = sqlx::QueryBuilder::<sqlx::Sqlite>::new(INDEX_INSERT);
        insert.push_values(part, |mut row, r| {
            row.push_bind(r.stream)
                .push_bind(r.seq)
                .push_bind(r.payload);
        });
        insert.build().execute(&mut *conn).await?;
    }
    Ok(())
}
