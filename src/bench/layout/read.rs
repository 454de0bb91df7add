//! A principal's catch-up by cursor in each layout: pages of events read
//! from the cursor on, each envelope rebuilt and serialized as a socket or
//! REST page would send it. The reads check what they return (gap-free
//! seqs where the layout promises them, every event once), so a wrong query
//! fails the run instead of looking fast.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::write::{Member, EVENT_TYPE};
use super::{Layout, READ_PAGE};
use crate::domain::event::{rfc3339, StoredEvent};
use crate::store::sql::{Arg, Executor, Row};
use crate::store::StoreResult;

pub struct CatchUp {
    pub events: usize,
    pub pages: usize,
    pub envelope_bytes: usize,
}

pub async fn catch_up(
    ex: &mut dyn Executor,
    layout: Layout,
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
        let page = match layout {
            Layout::Today => today_page(ex, reader, cursor).await?,
            Layout::Thin => thin_page(ex, reader, cursor).await?,
            Layout::Stream => stream_page(ex, reader, cursor).await?,
        };
        for e in &page {
            let gap_free = layout != Layout::Stream;
            anyhow::ensure!(
                e.seq > cursor && (!gap_free || e.seq == cursor + 1),
                "{layout:?}: seq {} after cursor {cursor}",
                e.seq
            );
            cursor = e.seq;
            done.envelope_bytes += serde_json::to_string(&e.envelope_ref())?.len();
        }
        done.events += page.len();
        done.pages += 1;
        if page.len() < READ_PAGE as usize {
            break;
        }
    }
    anyhow::ensure!(
        done.events == expected,
        "{layout:?}: read {} events, expected {expected}",
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
                payload: Arc::new(r.decoded("payload")?),
            })
        })
        .collect()
}

/// The message columns under the names [`message_payload`] reads.
const MESSAGE: &str = "m.id AS message_id, m.conversation_id, m.seq AS message_seq, m.sender_id, \
     m.origin, m.parts, m.reply_to, m.created_at";

/// A message event's payload rebuilt from the message row: the same JSON
/// as `{"message": Message}`, built as a value directly (the parts were
/// checked when written), so the read pays one JSON parse per message as
/// today's read pays one per event.
fn message_payload(r: &Row) -> StoreResult<Value> {
    let mut m = Map::with_capacity(8);
    m.insert("id".into(), r.id("message_id")?.to_string().into());
    m.insert(
        "conversationId".into(),
        r.id("conversation_id")?.to_string().into(),
    );
    m.insert("seq".into(), r.int("message_seq")?.into());
    m.insert("senderId".into(), r.id("sender_id")?.to_string().into());
    m.insert("origin".into(), r.text("origin")?.into());
    m.insert("parts".into(), r.decoded::<Value>("parts")?);
    if let Some(reply_to) = r.opt_id("reply_to")? {
        m.insert("replyTo".into(), reply_to.to_string().into());
    }
    m.insert("createdAt".into(), rfc3339(r.int("created_at")?).into());
    Ok(json!({ "message": Value::Object(m) }))
}

/// Candidate A: the index joined to its shared header and, for a message,
/// to the message row; a personal event's body is in the header.
async fn thin_page(
    ex: &mut dyn Executor,
    reader: &Member,
    after: u64,
) -> StoreResult<Vec<StoredEvent>> {
    let sql = format!(
        "SELECT i.seq, p.event_id, p.type, p.occurred_at, CAST(p.body AS TEXT) AS body, {MESSAGE} \
         FROM event_index i JOIN event_payloads p ON p.id = i.payload \
         LEFT JOIN messages m ON m.id = p.message_id \
         WHERE i.stream = $1 AND i.seq > $2 ORDER BY i.seq LIMIT $3"
    );
    let rows = ex
        .fetch_all(
            &sql,
            &[
                Arg::Int(reader.stream),
                Arg::Int(after as i64),
                Arg::Int(i64::from(READ_PAGE)),
            ],
        )
        .await?;
    rows.iter()
        .map(|r| {
            let payload = match r.opt_text("body")? {
                Some(body) => serde_json::from_str(&body).map_err(crate::store::sql::json_err)?,
                None => message_payload(r)?,
            };
            Ok(StoredEvent {
                id: r.id("event_id")?,
                audience: reader.id,
                seq: r.int("seq")? as u64,
                event_type: r.text("type")?,
                occurred_at: r.int("occurred_at")?,
                payload: Arc::new(payload),
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
            payload: Arc::new(message_payload(&r)?),
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
            payload: Arc::new(r.decoded("payload")?),
        });
    }
    page.sort_by_key(|e| e.seq);
    page.truncate(READ_PAGE as usize);
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::message::{Message, Origin, Part};
    use uuid::Uuid;

    /// The rebuilt payload is byte for byte what today's log stores.
    #[tokio::test]
    async fn a_rebuilt_message_payload_is_todays_payload() {
        use sqlx::Connection;
        let mut conn = sqlx::SqliteConnection::connect("sqlite::memory:")
            .await
            .unwrap();
        for reply_to in [None, Some(Uuid::new_v4())] {
            let m = Message {
                id: Uuid::now_v7(),
                conversation_id: Uuid::new_v4(),
                seq: 7,
                sender_id: Uuid::new_v4(),
                origin: Origin::App,
                parts: vec![Part::Text { text: "hi".into() }],
                reply_to,
                created_at: rfc3339(1_700_000_000_123),
            };
            let parts = serde_json::to_string(&m.parts).unwrap();
            let row = ex_row(&mut conn, &m, &parts, 1_700_000_000_123).await;
            assert_eq!(
                serde_json::to_string(&message_payload(&row).unwrap()).unwrap(),
                serde_json::to_string(&json!({ "message": m })).unwrap()
            );
        }
    }

    async fn ex_row(conn: &mut sqlx::SqliteConnection, m: &Message, parts: &str, at: i64) -> Row {
        let ex: &mut dyn Executor = conn;
        ex.fetch_optional(
            "SELECT $1 AS message_id, $2 AS conversation_id, $3 AS message_seq, $4 AS sender_id, \
             $5 AS origin, $6 AS parts, $7 AS reply_to, $8 AS created_at",
            &[
                Arg::Id(m.id),
                Arg::Id(m.conversation_id),
                Arg::Int(m.seq as i64),
                Arg::Id(m.sender_id),
                Arg::Text(m.origin.as_str()),
                Arg::Json(parts),
                Arg::OptId(m.reply_to),
                Arg::Int(at),
            ],
        )
        .await
        .unwrap()
        .unwrap()
    }
}
