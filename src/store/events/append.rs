//! Planning an append to the event index (ADR 0018), shared by both
//! dialects: which payload rows to write, which seqs each audience takes,
//! and which index rows follow. The statements that run the plan are per
//! dialect (`store::sqlite::events`, `store::postgres::events`).

use std::collections::HashMap;

use uuid::Uuid;

use crate::domain::event::{NewEvent, StoredEvent};
use crate::domain::Millis;
use crate::store::sql::to_json;
use crate::store::{StoreError, StoreResult};

/// One `event_payloads` row: an event stored once for all its copies.
pub struct PayloadRow {
    pub event_id: Uuid,
    pub event_type: &'static str,
    /// The message the payload is, when it is one.
    pub message_id: Option<Uuid>,
    /// A personal event's payload, serialized.
    pub body: Option<String>,
    /// Its copies: the index rows that will point at it.
    pub refs: i64,
}

/// The distinct events among `events`, in first-seen order. Copies share
/// an id; two events with one id but a different type or payload are a
/// programming error, refused rather than stored under one row.
pub fn payload_rows(events: &[NewEvent]) -> StoreResult<Vec<PayloadRow>> {
    // An id's row and its first event.
    let mut at: HashMap<Uuid, (usize, usize)> = HashMap::new();
    let mut rows: Vec<PayloadRow> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        if let Some(&(row, first)) = at.get(&e.id) {
            check_copy(&events[first], e)?;
            rows[row].refs += 1;
            continue;
        }
        at.insert(e.id, (rows.len(), i));
        rows.push(PayloadRow {
            event_id: e.id,
            event_type: e.event_type,
            message_id: e.message,
            body: match e.message {
                Some(_) => None,
                None => Some(to_json(&*e.payload)?),
            },
            refs: 1,
        });
    }
    Ok(rows)
}

fn check_copy(first: &NewEvent, copy: &NewEvent) -> StoreResult<()> {
    let same = first.event_type == copy.event_type
        && first.message == copy.message
        && std::sync::Arc::ptr_eq(&first.payload, &copy.payload);
    if same {
        Ok(())
    } else {
        Err(StoreError::Corrupt(format!(
            "two different events share the id {}",
            copy.id
        )))
    }
}

/// Events sorted by audience (stably, so each audience keeps its order) and
/// their runs as `(audience, first index, count)`: each run takes its seqs
/// from one upsert that adds the whole count. Sorted by audience, the
/// upsert also locks stream rows in one order in every transaction, so two
/// writers to overlapping audiences cannot deadlock on PostgreSQL.
pub fn audience_runs(events: &[NewEvent]) -> (Vec<&NewEvent>, Vec<(Uuid, usize, usize)>) {
    let mut sorted: Vec<&NewEvent> = events.iter().collect();
    sorted.sort_by_key(|e| e.audience);
    let mut runs: Vec<(Uuid, usize, usize)> = Vec::new();
    for (i, e) in sorted.iter().enumerate() {
        match runs.last_mut() {
            Some((a, _, n)) if *a == e.audience => *n += 1,
            _ => runs.push((e.audience, i, 1)),
        }
    }
    (sorted, runs)
}

/// An audience's stream after the upsert: its key and its new last seq.
#[derive(Clone, Copy, Debug)]
pub struct StreamSeq {
    pub stream: i64,
    pub last_seq: i64,
}

/// A row of the multi-row index insert, with the event it delivers.
pub struct IndexRow<'a> {
    pub stream: i64,
    pub seq: i64,
    pub payload: i64,
    pub event: &'a NewEvent,
}

/// The index rows of one upsert chunk, each audience's seqs counted back
/// from its new last seq in the events' order.
pub fn index_rows<'a>(
    sorted: &[&'a NewEvent],
    chunk: &[(Uuid, usize, usize)],
    streams: &HashMap<Uuid, StreamSeq>,
    payload_of: &HashMap<Uuid, i64>,
) -> StoreResult<Vec<IndexRow<'a>>> {
    let mut rows = Vec::new();
    for (audience, first, count) in chunk {
        let s = streams
            .get(audience)
            .ok_or_else(|| StoreError::Corrupt("the stream upsert returned no seq".into()))?;
        for (k, e) in sorted[*first..first + count].iter().enumerate() {
            let payload = *payload_of
                .get(&e.id)
                .ok_or_else(|| StoreError::Corrupt("a payload insert returned no id".into()))?;
            rows.push(IndexRow {
                stream: s.stream,
                seq: s.last_seq - *count as i64 + 1 + k as i64,
                payload,
                event: e,
            });
        }
    }
    Ok(rows)
}

/// The stored form of a chunk's index rows: what the bus publishes.
pub fn stored_events(rows: Vec<IndexRow<'_>>, now: Millis, into: &mut Vec<StoredEvent>) {
    for r in rows {
        into.push(StoredEvent {
            id: r.event.id,
            audience: r.event.audience,
            seq: r.seq as u64,
            event_type: r.event.event_type.to_string(),
            occurred_at: now,
            payload: r.event.payload.clone().into(),
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    #[test]
    fn copies_share_one_payload_row_and_count_as_its_refs() {
        let payload = Arc::new(json!({"message": {"id": "m"}}));
        let (a, b, c) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        let message = Uuid::now_v7();
        let mut events = NewEvent::message_copies(&[a, b, c], "t", message, payload);
        events.push(NewEvent::new(a, "personal", json!({"x": 1})));
        let rows = payload_rows(&events).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].refs, 3);
        assert_eq!(rows[0].message_id, Some(message));
        assert!(rows[0].body.is_none());
        assert_eq!(rows[1].refs, 1);
        assert_eq!(rows[1].body.as_deref(), Some(r#"{"x":1}"#));
    }

    #[test]
    fn two_events_under_one_id_must_be_copies() {
        let mut events = vec![NewEvent::new(Uuid::now_v7(), "t", json!({"x": 1}))];
        let mut other = NewEvent::new(Uuid::now_v7(), "t", json!({"x": 2}));
        other.id = events[0].id;
        events.push(other);
        assert!(matches!(payload_rows(&events), Err(StoreError::Corrupt(_))));
    }

    #[test]
    fn seqs_count_back_from_each_streams_new_last_seq() {
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let events = vec![
            NewEvent::new(b, "t", json!(1)),
            NewEvent::new(a, "t", json!(2)),
            NewEvent::new(b, "t", json!(3)),
        ];
        let (sorted, runs) = audience_runs(&events);
        assert_eq!(runs, vec![(a, 0, 1), (b, 1, 2)]);
        let streams = HashMap::from([
            (
                a,
                StreamSeq {
                    stream: 7,
                    last_seq: 10,
                },
            ),
            (
                b,
                StreamSeq {
                    stream: 8,
                    last_seq: 5,
                },
            ),
        ]);
        let payload_of: HashMap<Uuid, i64> = events
            .iter()
            .enumerate()
            .map(|(i, e)| (e.id, i as i64))
            .collect();
        let rows = index_rows(&sorted, &runs, &streams, &payload_of).unwrap();
        let got: Vec<(i64, i64, i64)> = rows.iter().map(|r| (r.stream, r.seq, r.payload)).collect();
        // b's first event (payload 0) takes 4, its second (payload 2) 5.
        assert_eq!(got, vec![(7, 10, 1), (8, 4, 0), (8, 5, 2)]);
    }
}
