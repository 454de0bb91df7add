//! The durable event log: one stream per audience, its read position and
//! ack, stored as a thin index over payloads stored once (ADR 0018).
//! Appending is per dialect (multi-row statements on the send path), behind
//! [`Executor::append_events`](super::sql::Executor::append_events), from
//! the plan in [`append`].

pub mod append;
mod prune;
pub mod read;

use async_trait::async_trait;
use uuid::Uuid;

use super::sql::{placeholders, Arg, Database};
use super::{StoreError, StoreResult};
use crate::domain::event::{StoredEvent, StreamPosition};
use crate::domain::Millis;
use read::StoredJson;

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

    /// The last seq of each of these audiences' logs; an audience without
    /// a log is left out. The cluster's periodic check reads it for every
    /// live subscription of a node at once (ADR 0034 §3).
    async fn stream_heads(&self, audiences: &[Uuid]) -> StoreResult<Vec<(Uuid, u64)>>;

    /// Raises the audience's acknowledged seq to `seq` (never lowers it).
    /// `Conflict` when `seq` is beyond the last event written.
    async fn ack_events(&self, audience: Uuid, seq: u64) -> StoreResult<u64>;

    /// Deletes, for each audience, the prefix of its log older than
    /// `older_than` and all but its newest `keep_per_audience`; idempotency
    /// records older than `older_than` go too. Returns how many events were
    /// deleted.
    async fn prune_events(&self, older_than: Millis, keep_per_audience: u64) -> StoreResult<u64>;
}

/// What differs per dialect in this area.
pub trait EventDialect {
    /// How the dialect prints the JSON it stores.
    const STORED_JSON: StoredJson;
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
                read::PAGE,
                &[
                    Arg::Id(audience),
                    Arg::Int(after as i64),
                    Arg::Int(i64::from(limit)),
                ],
            )
            .await?;
        rows.iter()
            .map(|r| read::stored_event(r, D::STORED_JSON))
            .collect()
    }

    async fn stream_position(&self, audience: Uuid) -> StoreResult<StreamPosition> {
        let row = self
            .read()
            .await?
            .fetch_optional(
                "SELECT s.last_seq, s.acked_seq, (SELECT MIN(i.seq) FROM event_index i WHERE i.stream = s.stream) AS oldest \
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

    async fn stream_heads(&self, audiences: &[Uuid]) -> StoreResult<Vec<(Uuid, u64)>> {
        let mut heads = Vec::with_capacity(audiences.len());
        if audiences.is_empty() {
            return Ok(heads);
        }
        let mut reader = self.read().await?;
        // 500 a statement: far below both dialects' parameter limits.
        for chunk in audiences.chunks(500) {
            let sql = format!(
                "SELECT audience, last_seq FROM event_streams WHERE audience IN ({})",
                placeholders(1, chunk.len())
            );
            let args: Vec<Arg> = chunk.iter().map(|a| Arg::Id(*a)).collect();
            for row in reader.fetch_all(&sql, &args).await? {
                heads.push((row.id("audience")?, row.int("last_seq")? as u64));
            }
        }
        Ok(heads)
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
        prune::prune(self, older_than, keep_per_audience).await
    }
}
