//! The PostgreSQL event appends and recipient rows: multi-row statements on
//! the send path, kept per dialect (ADR 0013, ADR 0014).

use std::collections::HashMap;

use sqlx::{PgConnection, Row as _};
use uuid::Uuid;

use crate::domain::event::{NewEvent, StoredEvent};
use crate::domain::Millis;
use crate::store::events::EventDialect;
use crate::store::group_commit::{audience_runs, event_rows, stored_events};
use crate::store::StoreResult;

impl EventDialect for super::PgStore {
    /// A join, where SQLite needs a correlated subquery.
    const PRUNE_BEYOND_KEEP: &'static str =
        "DELETE FROM events e USING event_streams s WHERE s.audience = e.audience AND e.seq <= s.last_seq - $1";
}

/// One statement per 500 recipients instead of one per recipient.
pub(super) async fn insert_recipients(
    conn: &mut PgConnection,
    message_id: Uuid,
    recipients: &[Uuid],
) -> StoreResult<()> {
    for chunk in recipients.chunks(500) {
        let mut q = sqlx::QueryBuilder::<sqlx::Postgres>::new(
            "INSERT INTO message_recipients (message_id, recipient_id) ",
        );
        q.push_values(chunk, |mut row, r| {
            row.push_bind(message_id).push_bind(*r);
        });
        q.build().execute(&mut *conn).await?;
    }
    Ok(())
}

/// Appends events inside the caller's transaction. The upsert takes the
/// audience's `event_streams` row lock until commit, so a second writer to
/// the same audience gets the next seq only after the first committed:
/// commit order equals seq order, and a reader never sees a later seq
/// before an earlier one.
pub(super) async fn append_events(
    conn: &mut PgConnection,
    events: &[NewEvent],
    now: Millis,
) -> StoreResult<Vec<StoredEvent>> {
    // Events are grouped by audience (a stable sort keeps each audience's
    // events in order); each upsert takes up to 400 audiences and adds each
    // one's whole count, so a fan-out, or a group of messages to the same
    // members, costs two statements per 400 audiences. Rows are locked in
    // audience order, the same in every transaction, so two writers to
    // overlapping audiences cannot deadlock.
    let (sorted, runs) = audience_runs(events);
    let mut json_of: HashMap<usize, String> = HashMap::new();
    let mut stored = Vec::with_capacity(sorted.len());
    for chunk in runs.chunks(400) {
        let mut upsert = sqlx::QueryBuilder::<sqlx::Postgres>::new(
            "INSERT INTO event_streams (audience, last_seq) ",
        );
        upsert.push_values(chunk, |mut row, (audience, _, count)| {
            row.push_bind(*audience).push_bind(*count as i64);
        });
        upsert.push(
            " ON CONFLICT (audience) DO UPDATE SET last_seq = event_streams.last_seq + excluded.last_seq \
             RETURNING audience, last_seq",
        );
        let mut last_of = HashMap::with_capacity(chunk.len());
        for r in upsert.build().fetch_all(&mut *conn).await? {
            last_of.insert(
                r.try_get::<Uuid, _>("audience")?,
                r.try_get::<i64, _>("last_seq")?,
            );
        }
        let rows = event_rows(&sorted, chunk, &last_of, &mut json_of)?;
        for part in rows.chunks(1000) {
            let mut insert = sqlx::QueryBuilder::<sqlx::Postgres>::new(
                "INSERT INTO events (audience, seq, id, type, occurred_at, payload) ",
            );
            insert.push_values(part, |mut row, (e, seq, ptr)| {
                row.push_bind(e.audience)
                    .push_bind(*seq)
                    .push_bind(e.id)
                    .push_bind(e.event_type)
                    .push_bind(now)
                    .push_bind(json_of[ptr].clone())
                    .push_unseparated("::jsonb");
            });
            insert.build().execute(&mut *conn).await?;
        }
        stored_events(rows, now, &mut stored);
    }
    Ok(stored)
}
