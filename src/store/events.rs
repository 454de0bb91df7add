//! The durable event log: one stream per audience, its read position and ack.
//! Appending is per dialect (multi-row upserts on the send path), behind
//! [`Executor::append_events`](super::sql::Executor::append_events).

use std::sync::Arc;

use async_trait::async_trait;
use uuid::Uuid;

use super::sql::{Arg, Database, Row};
use super::{StoreError, StoreResult};
use crate::domain::event::{StoredEvent, StreamPosition};
use crate::domain::Millis;

#[async_trait]
pub trait EventStore: Send + Sync + 'static {
    /// Events of `audience` with seq greater than `after`, oldest first.
    async fn events_after(
        &self,
        audience: Uuid,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<StoredEvent>>;

    async fn stream_position(&self, audience: Uuid) -> StoreResult<StreamPosition>;

    /// Raises the audience's acknowledged seq to `seq` (never lowers it).
    /// `Conflict` when `seq` is beyond the last event written.
    async fn ack_events(&self, audience: Uuid, seq: u64) -> StoreResult<u64>;

    /// Deletes events older than `older_than`, and for each audience all but
    /// its newest `keep_per_audience`; idempotency records older than
    /// `older_than` go too. Returns how many events were deleted.
    async fn prune_events(&self, older_than: Millis, keep_per_audience: u64) -> StoreResult<u64>;
}

/// What differs per dialect in this area.
pub trait EventDialect {
    /// Deletes, for each audience, the events but its newest `$1`.
    const PRUNE_BEYOND_KEEP: &'static str;
}

pub(super) fn event_row(row: &Row) -> StoreResult<StoredEvent> {
    Ok(StoredEvent {
        id: row.id("id")?,
        audience: row.id("audience")?,
        seq: row.int("seq")? as u64,
        event_type: row.text("type")?,
        occurred_at: row.int("occurred_at")?,
        payload: Arc::new(row.decoded("payload")?),
    })
}

#[async_trait]
impl<D: Database + EventDialect> EventStore for D {
    async fn events_after(
        &self,
        audience: Uuid,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<StoredEvent>> {
        let rows = self
            .read()
            .await?
            .fetch_all(
                "SELECT audience, seq, id, type, occurred_at, payload FROM events \
                 WHERE audience = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                &[
                    Arg::Id(audience),
                    Arg::Int(after as i64),
                    Arg::Int(i64::from(limit)),
                ],
            )
            .await?;
        rows.iter().map(event_row).collect()
    }

    async fn stream_position(&self, audience: Uuid) -> StoreResult<StreamPosition> {
        let row = self
            .read()
            .await?
            .fetch_optional(
                "SELECT s.last_seq, s.acked_seq, (SELECT MIN(seq) FROM events e WHERE e.audience = s.audience) AS oldest \
                 FROM event_streams s WHERE s.audience = $1",
                &[Arg::Id(audience)],
            )
            .await?;
        let Some(r) = row else {
            return Ok(StreamPosition {
                last_seq: 0,
                acked_seq: 0,
                oldest_seq: 1,
            });
        };
        let last = r.int("last_seq")? as u64;
        Ok(StreamPosition {
            last_seq: last,
            acked_seq: r.int("acked_seq")? as u64,
            oldest_seq: r.opt_int("oldest")?.map_or(last + 1, |o| o as u64),
        })
    }

    async fn ack_events(&self, audience: Uuid, seq: u64) -> StoreResult<u64> {
        let acked = self
            .write()
            .await?
            .fetch_optional(
                "UPDATE event_streams SET acked_seq = CASE WHEN acked_seq > $1 THEN acked_seq ELSE $1 END \
                 WHERE audience = $2 AND last_seq >= $1 RETURNING acked_seq",
                &[Arg::Int(seq as i64), Arg::Id(audience)],
            )
            .await?;
        match acked {
            Some(a) => Ok(a.int("acked_seq")? as u64),
            None if seq == 0 => Ok(0),
            None => Err(StoreError::Conflict("seq is beyond the last event".into())),
        }
    }

    async fn prune_events(&self, older_than: Millis, keep_per_audience: u64) -> StoreResult<u64> {
        // One statement a write, so sends can slip in between on SQLite.
        self.write()
            .await?
            .execute(
                "DELETE FROM idempotency_keys WHERE created_at < $1",
                &[Arg::Int(older_than)],
            )
            .await?;
        let by_age = self
            .write()
            .await?
            .execute(
                "DELETE FROM events WHERE occurred_at < $1",
                &[Arg::Int(older_than)],
            )
            .await?;
        let keep = keep_per_audience.min(i64::MAX as u64) as i64;
        let by_count = self
            .write()
            .await?
            .execute(D::PRUNE_BEYOND_KEEP, &[Arg::Int(keep)])
            .await?;
        Ok(by_age + by_count)
    }
}
