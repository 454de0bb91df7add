//! A principal's catch-up by cursor in each layout: pages of events read
//! from the cursor on, each envelope rebuilt and serialized as a socket or
//! REST page would send it. The reads check what they return (gap-free
//! seqs where the layout promises them, every event once), so a wrong query
//! fails the run instead of looking fast.

use std::sync::Arc;

use super::thin_read::{message_value, ThinRead, ThinReader, MESSAGE};
use super::write::{Member, EVENT_TYPE};
use super::{Layout, READ_PAGE};
use crate::domain::event::{EventPayload, StoredEvent};
use crate::store::sql::{Arg, Executor, Row};
use crate::store::StoreResult;

pub struct CatchUp {
    pub events: usize,
    pub pages: usize,
    pub envelope_bytes: usize,
}

/// What a catch-up reads from: a layout and, for candidate A, the read
/// variant with its run's state.
pub enum Source {
    Today,
    Thin(ThinReader),
    Stream,
}

impl Source {
    pub fn new(layout: Layout, thin: ThinRead, postgres: bool) -> Source {
        match layout {
            Layout::Today => Source::Today,
            Layout::Thin => Source::Thin(ThinReader::new(thin, postgres)),
            Layout::Stream => Source::Stream,
        }
    }

    /// Seq gap-free per audience (A and today), or only increasing (B).
    fn gap_free(&self) -> bool {
        !matches!(self, Source::Stream)
    }

    /// The page after `after` as `(seq, serialized envelope length)`.
    async fn page(
        &mut self,
        ex: &mut dyn Executor,
        reader: &Member,
        after: u64,
    ) -> anyhow::Result<Vec<(u64, usize)>> {
        let mut sent = Vec::with_capacity(READ_PAGE as usize);
        match self {
            Source::Thin(thin) => {
                for (seq, e) in thin.page(ex, reader, after).await? {
                    let bytes = serde_json::to_string(&e.envelope(seq, reader.id))?;
                    sent.push((seq, bytes.len()));
                }
            }
            Source::Today | Source::Stream => {
                let page = match self {
                    Source::Today => today_page(ex, reader, after).await?,
                    _ => stream_page(ex, reader, after).await?,
                };
                for e in &page {
                    sent.push((e.seq, serde_json::to_string(&e.envelope_ref())?.len()));
                }
            }
        }
        Ok(sent)
    }
}

pub async fn catch_up(
    ex: &mut dyn Executor,
    source: &mut Source,
    reader: &Member,
    expected: usize,
) -> anyhow::Result<CatchUp> {
    let mut done = CatchUp {
        events: 0,
        pages: 0,
        envelope_bytes: 0,
    };
    let mut cursor = 0u64;
    loop {
        let page = source.page(ex, reader, cursor).await?;
        for &(seq, bytes) in &page {
            anyhow::ensure!(
                seq > cursor && (!source.gap_free() || seq == cursor + 1),
                "seq {seq} after cursor {cursor}"
            );
            cursor = seq;
            done.envelope_bytes += bytes;
        }
        done.events += page.len();
        done.pages += 1;
        if page.len() < READ_PAGE as usize {
            break;
        }
    }
    anyhow::ensure!(
        done.events == expected,
        "read {} events, expected {expected}",
        done.events
    );
    Ok(done)
}

async fn today_page(
    ex: &mut dyn Executor,
    reader: &Member,
    after: u64,
) -> StoreResult<Vec<StoredEvent>> {
    let rows = ex
        .fetch_all(
            "SELECT audience, seq, id, type, occurred_at, payload FROM events \
             WHERE audience = $1 AND seq > $2 ORDER BY seq LIMIT $3",
            &[
                Arg::Id(reader.id),
                Arg::Int(after as i64),
                Arg::Int(i64::from(READ_PAGE)),
            ],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(StoredEvent {
                id: r.id("id")?,
                audience: r.id("audience")?,
                seq: r.int("seq")? as u64,
                event_type: r.text("type")?,
                occurred_at: r.int("occurred_at")?,
                payload: EventPayload::Value(Arc::new(r.decoded("payload")?)),
            })
        })
        .collect()
}

/// Candidate B: the principal's cursor is a hub-wide position. A page is
/// a merge of one limited read per conversation the principal is in (its
/// visible messages: after it joined, not its own, listed recipients only
/// for subsets) and of its personal log.
async fn stream_page(
    ex: &mut dyn Executor,
    reader: &Member,
    after: u64,
) -> StoreResult<Vec<StoredEvent>> {
    let limit = Arg::Int(i64::from(READ_PAGE));
    let memberships = ex
        .fetch_all(
            "SELECT conversation_id, visible_after FROM conversation_participants \
             WHERE principal_id = $1",
            &[Arg::Id(reader.id)],
        )
        .await?;
    let sql = format!(
        "SELECT m.position, {MESSAGE} FROM messages m \
         WHERE m.conversation_id = $1 AND m.position > $2 AND m.seq > $3 AND m.sender_id <> $4 \
         AND (m.listed = FALSE OR EXISTS (SELECT 1 FROM message_recipients r \
              WHERE r.message_id = m.id AND r.recipient_id = $4)) \
         ORDER BY m.position LIMIT $5"
    );
    // Rows are decoded only once they won the merge.
    let mut rows: Vec<(i64, Row)> = Vec::new();
    for c in &memberships {
        let args = [
            Arg::Id(c.id("conversation_id")?),
            Arg::Int(after as i64),
            Arg::Int(c.int("visible_after")?),
            Arg::Id(reader.id),
            limit,
        ];
        for r in ex.fetch_all(&sql, &args).await? {
            rows.push((r.int("position")?, r));
        }
    }
    rows.sort_by_key(|(p, _)| *p);
    rows.truncate(READ_PAGE as usize);
    let mut page = Vec::with_capacity(rows.len());
    for (position, r) in rows {
        page.push(StoredEvent {
            id: r.id("message_id")?,
            audience: reader.id,
            seq: position as u64,
            event_type: EVENT_TYPE.into(),
            occurred_at: r.int("created_at")?,
            payload: EventPayload::Value(Arc::new(message_value(&r)?)),
        });
    }
    let personal = ex
        .fetch_all(
            "SELECT position, id, type, occurred_at, payload FROM events \
             WHERE audience = $1 AND position > $2 ORDER BY position LIMIT $3",
            &[Arg::Id(reader.id), Arg::Int(after as i64), limit],
        )
        .await?;
    for r in personal {
        page.push(StoredEvent {
            id: r.id("id")?,
            audience: reader.id,
            seq: r.int("position")? as u64,
            event_type: r.text("type")?,
            occurred_at: r.int("occurred_at")?,
            payload: EventPayload::Value(Arc::new(r.decoded("payload")?)),
        });
    }
    page.sort_by_key(|e| e.seq);
    page.truncate(READ_PAGE as usize);
    Ok(page)
}
