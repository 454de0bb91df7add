//! The PostgreSQL event appends and recipient rows: multi-row statements on
//! the send path, kept per dialect (ADR 0013, ADR 0014), over the plan in
//! [`crate::store::events::append`] (ADR 0018).

use std::collections::HashMap;

use sqlx::{PgConnection, Row as _};
use uuid::Uuid;

use crate::domain::event::{NewEvent, StoredEvent};
use crate::domain::Millis;
use crate::store::events::append::{
    audience_runs, index_rows, payload_rows, stored_events, IndexRow, PayloadRow, StreamSeq,
};
use crate::store::events::read::StoredJson;
use crate::store::events::EventDialect;
use crate::store::StoreResult;

impl EventDialect for super::PgStore {
    const STORED_JSON: StoredJson = StoredJson::Spaced;
}

/// One statement for any number of recipients: its columns bound as
/// arrays, so the text (and its prepared plan) is the same for every send.
pub(super) async fn insert_recipients(
    conn: &mut PgConnection,
    message_id: Uuid,
    recipients: &[Uuid],
) -> StoreResult<()> {
    if recipients.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO message_recipients (message_id, recipient_id) \
         SELECT $1, r FROM unnest($2::uuid[]) AS u(r)",
    )
    .bind(message_id)
    .bind(recipients)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Appends events inside the caller's transaction in three statements
/// whatever their number: the payload rows of the distinct events, one
/// upsert that hands out every audience's seqs, and the index rows. Each
/// binds its columns as arrays (`unnest`), so its text and its prepared
/// plan do not vary with the fan-out, and PostgreSQL neither parses nor
/// plans a `VALUES` row per delivery. (One statement of data-modifying
/// `WITH` parts, joining the three, saved two round trips but took longer
/// in PostgreSQL than the three together: `docs/benchmarks.md`.)
///
/// The upsert takes each audience's `event_streams` row lock until commit,
/// so a second writer to the same audience gets the next seq only after
/// the first committed: commit order equals seq order, and a reader never
/// sees a later seq before an earlier one. Rows are locked in audience
/// order in every transaction (the arrays are sorted by audience and a
/// function scan keeps their order), so two writers to overlapping
/// audiences cannot deadlock.
pub(super) async fn append_events(
    conn: &mut PgConnection,
    events: &[NewEvent],
    now: Millis,
) -> StoreResult<Vec<StoredEvent>> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let payload_of = insert_payloads(conn, &payload_rows(events)?, now).await?;
    let (sorted, runs) = audience_runs(events);
    let streams = take_seqs(conn, &runs).await?;
    let rows = index_rows(&sorted, &runs, &streams, &payload_of)?;
    insert_index(conn, &rows).await?;
    let mut stored = Vec::with_capacity(rows.len());
    stored_events(rows, now, &mut stored);
    Ok(stored)
}

/// The payload rows; returns each event id's payload key.
async fn insert_payloads(
    conn: &mut PgConnection,
    payloads: &[PayloadRow],
    now: Millis,
) -> StoreResult<HashMap<Uuid, i64>> {
    let returned = sqlx::query(
        "INSERT INTO event_payloads (event_id, type, occurred_at, message_id, body, refs) \
         SELECT e, t, $3, m, b::jsonb, r \
         FROM unnest($1::uuid[], $2::text[], $4::uuid[], $5::text[], $6::bigint[]) AS u(e, t, m, b, r) \
         RETURNING id, event_id",
    )
    .bind(payloads.iter().map(|p| p.event_id).collect::<Vec<_>>())
    .bind(payloads.iter().map(|p| p.event_type).collect::<Vec<_>>())
    .bind(now)
    .bind(payloads.iter().map(|p| p.message_id).collect::<Vec<_>>())
    .bind(payloads.iter().map(|p| p.body.as_deref()).collect::<Vec<_>>())
    .bind(payloads.iter().map(|p| p.refs).collect::<Vec<_>>())
    .fetch_all(&mut *conn)
    .await?;
    let mut payload_of = HashMap::with_capacity(payloads.len());
    for r in returned {
        payload_of.insert(r.try_get::<Uuid, _>("event_id")?, r.try_get("id")?);
    }
    Ok(payload_of)
}

/// Adds each audience's count to its stream (made on first use) and
/// returns the stream's key and new last seq.
async fn take_seqs(
    conn: &mut PgConnection,
    runs: &[(Uuid, usize, usize)],
) -> StoreResult<HashMap<Uuid, StreamSeq>> {
    let returned = sqlx::query(
        "INSERT INTO event_streams (audience, last_seq) \
         SELECT a, n FROM unnest($1::uuid[], $2::bigint[]) AS u(a, n) \
         ON CONFLICT (audience) DO UPDATE SET last_seq = event_streams.last_seq + excluded.last_seq \
         RETURNING stream, audience, last_seq",
    )
    .bind(runs.iter().map(|(a, _, _)| *a).collect::<Vec<_>>())
    .bind(runs.iter().map(|(_, _, n)| *n as i64).collect::<Vec<_>>())
    .fetch_all(&mut *conn)
    .await?;
    let mut streams = HashMap::with_capacity(runs.len());
    for r in returned {
        streams.insert(
            r.try_get::<Uuid, _>("audience")?,
            StreamSeq {
                stream: r.try_get("stream")?,
                last_seq: r.try_get("last_seq")?,
            },
        );
    }
    Ok(streams)
}

async fn insert_index(conn: &mut PgConnection, rows: &[IndexRow<'_>]) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO event_index (stream, seq, payload) \
         SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[])",
    )
    .bind(rows.iter().map(|r| r.stream).collect::<Vec<_>>())
    .bind(rows.iter().map(|r| r.seq).collect::<Vec<_>>())
    .bind(rows.iter().map(|r| r.payload).collect::<Vec<_>>())
    .execute(&mut *conn)
    .await?;
    Ok(())
}
