//! Retention on the event index (ADR 0018): each stream loses a prefix,
//! up to the first event young enough to keep and to its newest
//! `keep_per_audience`, so a log never has a hole and a cursor behind its
//! new oldest seq gets the explicit resync. Payloads are shared by a
//! fan-out's copies: each deleted index row lowers its payload's `refs`,
//! and a payload goes with its last reference.

use std::collections::HashMap;

use super::super::sql::{placeholders, Arg, Database, Executor, Row};
use super::super::StoreResult;
use crate::domain::Millis;

/// Streams looked at per round; each round's deletes are one transaction,
/// so sends slip in between on SQLite.
const STREAMS_PER_ROUND: i64 = 500;

/// Payload ids per statement when lowering `refs`.
const PAYLOADS_PER_STATEMENT: usize = 400;

/// A round's streams after `$1`: each one's last and oldest seq and, with
/// `$2` a cutoff time, its first seq at or after the cutoff (NULL when every
/// event is older). The walk to that seq costs what will be deleted.
const STREAMS: &str = "SELECT s.stream, s.last_seq, \
     (SELECT MIN(i.seq) FROM event_index i WHERE i.stream = s.stream) AS oldest, \
     (SELECT i.seq FROM event_index i JOIN event_payloads p ON p.id = i.payload \
      WHERE i.stream = s.stream AND p.occurred_at >= $2 ORDER BY i.seq LIMIT 1) AS young \
     FROM event_streams s WHERE s.stream > $1 ORDER BY s.stream LIMIT $3";

/// Deletes what retention no longer keeps. Returns how many events (index
/// rows) were deleted.
pub async fn prune<D: Database + ?Sized>(
    db: &D,
    older_than: Millis,
    keep_per_audience: u64,
) -> StoreResult<u64> {
    db.write()
        .await?
        .execute(
            "DELETE FROM idempotency_keys WHERE created_at < $1",
            &[Arg::Int(older_than)],
        )
        .await?;
    let any_old = any_payload_before(db, older_than).await?;
    let keep = keep_per_audience.min(i64::MAX as u64) as i64;
    let mut after = 0i64;
    let mut deleted = 0u64;
    loop {
        let rows = db
            .read()
            .await?
            .fetch_all(
                STREAMS,
                &[
                    Arg::Int(after),
                    Arg::Int(older_than),
                    Arg::Int(STREAMS_PER_ROUND),
                ],
            )
            .await?;
        let Some(last) = rows.last() else {
            return Ok(deleted);
        };
        after = last.int("stream")?;
        let cuts = cuts(&rows, any_old, keep)?;
        if !cuts.is_empty() {
            deleted += delete_prefixes(db, &cuts).await?;
        }
        if (rows.len() as i64) < STREAMS_PER_ROUND {
            return Ok(deleted);
        }
    }
}

/// Whether anything at all is older than the cutoff: one probe of the time
/// index, so a tick with nothing to age out skips the per-stream walk's
/// age half.
async fn any_payload_before<D: Database + ?Sized>(db: &D, older_than: Millis) -> StoreResult<bool> {
    let row = db
        .read()
        .await?
        .fetch_optional(
            "SELECT 1 AS old FROM event_payloads WHERE occurred_at < $1 LIMIT 1",
            &[Arg::Int(older_than)],
        )
        .await?;
    Ok(row.is_some())
}

/// Each stream's last seq to delete, for the streams with something to
/// delete: the larger of the age cut (before its first young event, or
/// everything when none is young) and the count cut.
fn cuts(rows: &[Row], any_old: bool, keep: i64) -> StoreResult<Vec<(i64, i64)>> {
    let mut cuts = Vec::new();
    for r in rows {
        let Some(oldest) = r.opt_int("oldest")? else {
            continue;
        };
        let last = r.int("last_seq")?;
        let by_count = last.saturating_sub(keep);
        let by_age = match (any_old, r.opt_int("young")?) {
            (false, _) => 0,
            (true, Some(young)) => young - 1,
            (true, None) => last,
        };
        let cut = by_count.max(by_age);
        if cut >= oldest {
            cuts.push((r.int("stream")?, cut));
        }
    }
    Ok(cuts)
}

/// Deletes each stream's prefix and the payloads left without a reference,
/// in one transaction.
async fn delete_prefixes<D: Database + ?Sized>(db: &D, cuts: &[(i64, i64)]) -> StoreResult<u64> {
    let mut tx = db.begin().await?;
    let mut released: HashMap<i64, i64> = HashMap::new();
    let mut deleted = 0u64;
    for (stream, cut) in cuts {
        let rows = tx
            .fetch_all(
                "DELETE FROM event_index WHERE stream = $1 AND seq <= $2 RETURNING payload",
                &[Arg::Int(*stream), Arg::Int(*cut)],
            )
            .await?;
        deleted += rows.len() as u64;
        for r in &rows {
            *released.entry(r.int("payload")?).or_default() += 1;
        }
    }
    release_payloads(&mut *tx, &released).await?;
    tx.commit().await?;
    Ok(deleted)
}

/// Lowers each payload's `refs` by its released count and deletes those
/// no index row points at any more.
async fn release_payloads(ex: &mut dyn Executor, released: &HashMap<i64, i64>) -> StoreResult<()> {
    // In id order: two retention runs (two nodes) lock payloads alike.
    let mut pairs: Vec<(i64, i64)> = released.iter().map(|(k, v)| (*k, *v)).collect();
    pairs.sort_unstable();
    for chunk in pairs.chunks(PAYLOADS_PER_STATEMENT) {
        let values = (0..chunk.len())
            .map(|i| format!("(${}, ${})", 2 * i + 1, 2 * i + 2))
            .collect::<Vec<_>>()
            .join(", ");
        let args: Vec<Arg> = chunk
            .iter()
            .flat_map(|(id, n)| [Arg::Int(*id), Arg::Int(*n)])
            .collect();
        ex.execute(
            &format!(
                "UPDATE event_payloads SET refs = event_payloads.refs - c.column2 \
                 FROM (VALUES {values}) AS c WHERE event_payloads.id = c.column1"
            ),
            &args,
        )
        .await?;
        let ids = placeholders(1, chunk.len());
        let id_args: Vec<Arg> = chunk.iter().map(|(id, _)| Arg::Int(*id)).collect();
        ex.execute(
            &format!("DELETE FROM event_payloads WHERE refs <= 0 AND id IN ({ids})"),
            &id_args,
        )
        .await?;
    }
    Ok(())
}
