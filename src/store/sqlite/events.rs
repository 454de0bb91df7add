//! The SQLite event appends and recipient rows: multi-row statements on the
//! send path, kept per dialect (ADR 0013, ADR 0014).

use std::collections::HashMap;

use sqlx::{Row as _, SqliteConnection};
use uuid::Uuid;

use super::uuid;
use crate::domain::event::{NewEvent, StoredEvent};
use crate::domain::Millis;
use crate::store::events::EventDialect;
use crate::store::group_commit::{audience_runs, event_rows, stored_events};
use crate::store::StoreResult;

impl EventDialect for super::SqliteStore {
    const PRUNE_BEYOND_KEEP: &'static str = "DELETE FROM events WHERE seq <= \
         (SELECT s.last_seq FROM event_streams s WHERE s.audience = events.audience) - $1";
}

/// One statement per 500 recipients instead of one per recipient.
pub(super) async fn insert_recipients(
    conn: &mut SqliteConnection,
    message_id: Uuid,
    recipients: &[Uuid],
) -> StoreResult<()> {
    for chunk in recipients.chunks(500) {
        let mut q = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
            "INSERT INTO message_recipients (message_id, recipient_id) ",
        );
        q.push_values(chunk, |mut row, r| {
            row.push_bind(message_id.to_string())
                .push_bind(r.to_string());
        });
        q.build().execute(&mut *conn).await?;
    }
    Ok(())
}

/// Appends events to their audiences' logs inside the caller's transaction.
/// The upsert on `event_streams` hands out seqs; SQLite's single writer
/// makes commit order equal seq order.
///
/// Events are grouped by audience (a stable sort keeps each audience's events
/// in order) and each statement takes up to 400 audiences: the upsert adds an
/// audience's whole count at once and returns its new last seq, from which
/// the group's seqs follow. So a fan-out, or a group of messages to the same
/// members, costs two statements per 400 audiences, not two per event.
pub(super) async fn append_events(
    conn: &mut SqliteConnection,
    events: &[NewEvent],
    now: Millis,
) -> StoreResult<Vec<StoredEvent>> {
    let (sorted, runs) = audience_runs(events);
    // One serialization per shared payload, however the sort interleaves them.
    let mut json_of: HashMap<usize, String> = HashMap::new();
    let mut stored = Vec::with_capacity(sorted.len());
    for chunk in runs.chunks(400) {
        let mut upsert = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
            "INSERT INTO event_streams (audience, last_seq) ",
        );
        upsert.push_values(chunk, |mut row, (audience, _, count)| {
            row.push_bind(audience.to_string()).push_bind(*count as i64);
        });
        upsert.push(
            " ON CONFLICT (audience) DO UPDATE SET last_seq = event_streams.last_seq + excluded.last_seq \
             RETURNING audience, last_seq",
        );
        let mut last_of = HashMap::with_capacity(chunk.len());
        for r in upsert.build().fetch_all(&mut *conn).await? {
            last_of.insert(
                uuid(r.try_get("audience")?)?,
                r.try_get::<i64, _>("last_seq")?,
            );
        }
        let rows = event_rows(&sorted, chunk, &last_of, &mut json_of)?;
        for part in rows.chunks(1000) {
            let mut insert = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
                "INSERT INTO events (audience, seq, id, type, occurred_at, payload) ",
            );
            insert.push_values(part, |mut row, (e, seq, ptr)| {
                row.push_bind(e.audience.to_string())
                    .push_bind(*seq)
                    .push_bind(e.id.to_string())
                    .push_bind(e.event_type)
                    .push_bind(now)
                    .push_bind(json_of[ptr].clone());
            });
            insert.build().execute(&mut *conn).await?;
        }
        stored_events(rows, now, &mut stored);
    }
    Ok(stored)
}
