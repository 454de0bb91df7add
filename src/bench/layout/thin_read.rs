//! Candidate A's catch-up read, in the variants ADR 0018 weighs against
//! today's: one joined query a page, or the index range first and then its
//! distinct payloads in one `IN (...)` query; message payloads rebuilt as a
//! JSON value, or spliced from the stored `parts` text; rebuilt payloads
//! cached by payload id for the length of a run (what many readers of the
//! same recent messages would share). Every variant yields the same
//! envelopes; the unit tests check the bytes against today's stored copy.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use super::write::Member;
use super::READ_PAGE;
use crate::domain::event::rfc3339;
use crate::store::events::read::{compacted, message_payload, StoredJson};
use crate::store::sql::{json_err, placeholders, Arg, Executor, Row};
use crate::store::{StoreError, StoreResult};

/// How candidate A reads a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThinRead {
    /// The index range first, then the page's uncached payloads by id.
    pub batched: bool,
    /// The stored `parts` (or body) text spliced in, not parsed.
    pub raw: bool,
    /// Rebuilt payloads kept by payload id for the run; the run is read
    /// once untimed first, as by an earlier reader of the same messages.
    pub warm_cache: bool,
}

impl ThinRead {
    /// The variants measured, the ADR's first read first.
    pub const ALL: [ThinRead; 5] = [
        ThinRead::new(false, false, false),
        ThinRead::new(false, true, false),
        ThinRead::new(true, false, false),
        ThinRead::new(true, true, false),
        ThinRead::new(true, true, true),
    ];

    const fn new(batched: bool, raw: bool, warm_cache: bool) -> ThinRead {
        ThinRead {
            batched,
            raw,
            warm_cache,
        }
    }

    pub fn name(self) -> String {
        let mut name = String::from(if self.batched { "batched" } else { "join" });
        if self.raw {
            name.push_str("_raw");
        }
        if self.warm_cache {
            name.push_str("_cache_warm");
        }
        name
    }
}

/// A payload as the envelope carries it: a value, or JSON text as stored.
pub enum Payload {
    Parsed(Value),
    Spliced(Box<RawValue>),
}

impl Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Payload::Parsed(v) => v.serialize(s),
            Payload::Spliced(r) => r.serialize(s),
        }
    }
}

/// An event's header and payload: stored once, shared by its copies.
pub struct Shared {
    pub event_id: Uuid,
    pub event_type: String,
    pub occurred_at: i64,
    pub payload: Payload,
}

/// [`crate::domain::event::EnvelopeRef`]'s members in its order, over a
/// [`Payload`]: the same JSON.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Envelope<'a> {
    pub id: Uuid,
    pub seq: u64,
    #[serde(rename = "type")]
    pub event_type: &'a str,
    pub occurred_at: String,
    pub audience: Uuid,
    pub payload: &'a Payload,
}

impl Shared {
    pub fn envelope(&self, seq: u64, audience: Uuid) -> Envelope<'_> {
        Envelope {
            id: self.event_id,
            seq,
            event_type: &self.event_type,
            occurred_at: rfc3339(self.occurred_at),
            audience,
            payload: &self.payload,
        }
    }
}

/// One reader's run of pages: its variant, its dialect and its cache.
pub struct ThinReader {
    pub read: ThinRead,
    postgres: bool,
    cache: HashMap<i64, Arc<Shared>>,
}

/// The header columns under the names [`shared`] reads.
const HEADER: &str = "p.event_id, p.type, p.occurred_at, CAST(p.body AS TEXT) AS body";

/// The message columns under the names the rebuilds read. The layouts
/// compared are built on schema 0002, which has no threads and no cards.
pub const MESSAGE: &str = "m.id AS message_id, m.conversation_id, m.seq AS message_seq, \
     m.sender_id, m.origin, m.parts, m.reply_to, NULL AS thread_id, m.created_at, \
     NULL AS reply_to_interaction, NULL AS card";

impl ThinReader {
    pub fn new(read: ThinRead, postgres: bool) -> ThinReader {
        ThinReader {
            read,
            postgres,
            cache: HashMap::new(),
        }
    }

    /// The page after `after`: `(seq, event)` in seq order.
    pub async fn page(
        &mut self,
        ex: &mut dyn Executor,
        reader: &Member,
        after: u64,
    ) -> StoreResult<Vec<(u64, Arc<Shared>)>> {
        if self.read.batched {
            self.batched_page(ex, reader, after).await
        } else {
            self.joined_page(ex, reader, after).await
        }
    }

    /// The index joined to its header and, for a message, the message row.
    async fn joined_page(
        &mut self,
        ex: &mut dyn Executor,
        reader: &Member,
        after: u64,
    ) -> StoreResult<Vec<(u64, Arc<Shared>)>> {
        let sql = format!(
            "SELECT i.seq, i.payload, {HEADER}, {MESSAGE} FROM event_index i \
             JOIN event_payloads p ON p.id = i.payload \
             LEFT JOIN messages m ON m.id = p.message_id \
             WHERE i.stream = $1 AND i.seq > $2 ORDER BY i.seq LIMIT $3"
        );
        let rows = ex.fetch_all(&sql, &range(reader, after)).await?;
        let mut page = Vec::with_capacity(rows.len());
        for r in &rows {
            let id = r.int("payload")?;
            let event = match self.cache.get(&id) {
                Some(s) => s.clone(),
                None => self.keep(id, shared(r, self.text())?),
            };
            page.push((r.int("seq")? as u64, event));
        }
        Ok(page)
    }

    /// The index rows alone (two integers each), then the payloads not
    /// cached yet in one statement: each payload read once a page.
    async fn batched_page(
        &mut self,
        ex: &mut dyn Executor,
        reader: &Member,
        after: u64,
    ) -> StoreResult<Vec<(u64, Arc<Shared>)>> {
        let index = ex
            .fetch_all(
                "SELECT seq, payload FROM event_index \
                 WHERE stream = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                &range(reader, after),
            )
            .await?;
        let mut entries = Vec::with_capacity(index.len());
        for r in &index {
            entries.push((r.int("seq")? as u64, r.int("payload")?));
        }
        let mut missing: Vec<i64> = entries
            .iter()
            .map(|(_, id)| *id)
            .filter(|id| !self.cache.contains_key(id))
            .collect();
        missing.sort_unstable();
        missing.dedup();
        let fetched = self.payloads(ex, &missing).await?;
        entries
            .into_iter()
            .map(|(seq, id)| {
                let event = self.cache.get(&id).or_else(|| fetched.get(&id));
                let event = event.ok_or_else(|| {
                    StoreError::Corrupt(format!("event_index names missing payload {id}"))
                })?;
                Ok((seq, event.clone()))
            })
            .collect()
    }

    /// Headers (and message rows) by payload id, `?` placeholders on SQLite
    /// (ADR 0018: sqlx looks each `$N` up by name there, a linear scan).
    async fn payloads(
        &mut self,
        ex: &mut dyn Executor,
        ids: &[i64],
    ) -> StoreResult<HashMap<i64, Arc<Shared>>> {
        let mut fetched = HashMap::with_capacity(ids.len());
        if ids.is_empty() {
            return Ok(fetched);
        }
        let marks = if self.postgres {
            placeholders(1, ids.len())
        } else {
            vec!["?"; ids.len()].join(", ")
        };
        let sql = format!(
            "SELECT p.id AS payload, {HEADER}, {MESSAGE} FROM event_payloads p \
             LEFT JOIN messages m ON m.id = p.message_id WHERE p.id IN ({marks})"
        );
        let args: Vec<Arg> = ids.iter().map(|id| Arg::Int(*id)).collect();
        for r in &ex.fetch_all(&sql, &args).await? {
            let id = r.int("payload")?;
            fetched.insert(id, self.keep(id, shared(r, self.text())?));
        }
        Ok(fetched)
    }

    /// How stored JSON text becomes a payload in this variant and dialect.
    fn text(&self) -> Text {
        match (self.read.raw, self.postgres) {
            (false, _) => Text::Parse,
            (true, false) => Text::Splice,
            (true, true) => Text::SpliceCompacted,
        }
    }

    /// `event`, kept for later pages if this variant caches.
    fn keep(&mut self, id: i64, event: Shared) -> Arc<Shared> {
        let event = Arc::new(event);
        if self.read.warm_cache {
            self.cache.insert(id, event.clone());
        }
        event
    }
}

fn range(reader: &Member, after: u64) -> [Arg<'static>; 3] {
    [
        Arg::Int(reader.stream),
        Arg::Int(after as i64),
        Arg::Int(i64::from(READ_PAGE)),
    ]
}

/// What the read does with stored JSON text.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Text {
    /// Into a value (today's read).
    Parse,
    /// As stored: SQLite keeps the text that was written.
    Splice,
    /// With the spacing PostgreSQL's `jsonb` prints taken out.
    SpliceCompacted,
}

impl Text {
    fn stored(self, col: String) -> String {
        match self {
            Text::SpliceCompacted => compacted(&col),
            _ => col,
        }
    }
}

/// The header and payload of one row: a personal event's body, or the
/// message rebuilt as `{"message": Message}`.
fn shared(r: &Row, text: Text) -> StoreResult<Shared> {
    let payload = match (r.opt_text("body")?, text) {
        (Some(body), Text::Parse) => {
            Payload::Parsed(serde_json::from_str(&body).map_err(json_err)?)
        }
        (Some(body), _) => {
            Payload::Spliced(RawValue::from_string(text.stored(body)).map_err(json_err)?)
        }
        (None, Text::Parse) => Payload::Parsed(message_value(r)?),
        (None, _) => Payload::Spliced(message_spliced(r, text)?),
    };
    Ok(Shared {
        event_id: r.id("event_id")?,
        event_type: r.text("type")?,
        occurred_at: r.int("occurred_at")?,
        payload,
    })
}

/// A message event's payload rebuilt from the message row as a value,
/// built directly (the parts were checked when written), so the read pays
/// one JSON parse per message as today's read pays one per event.
pub fn message_value(r: &Row) -> StoreResult<Value> {
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
    if let Some(thread_id) = r.opt_id("thread_id")? {
        m.insert("threadId".into(), thread_id.to_string().into());
    }
    m.insert("createdAt".into(), rfc3339(r.int("created_at")?).into());
    Ok(json!({ "message": Value::Object(m) }))
}

/// A message event's payload with the stored `parts` text spliced in, as
/// the store's read does it.
fn message_spliced(r: &Row, text: Text) -> StoreResult<Box<RawValue>> {
    let json = match text {
        Text::SpliceCompacted => StoredJson::Spaced,
        _ => StoredJson::AsWritten,
    };
    message_payload(r, json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::event::{EventPayload, StoredEvent};
    use crate::store::events::read::tests::{message_row, sample_message};

    /// Both rebuilds, in the envelope, are byte for byte today's stored
    /// payload in today's envelope.
    #[tokio::test]
    async fn rebuilt_message_payloads_are_todays_payload() {
        use sqlx::Connection;
        let mut conn = sqlx::SqliteConnection::connect("sqlite::memory:")
            .await
            .unwrap();
        for reply_to in [None, Some(Uuid::new_v4())] {
            let m = sample_message(reply_to);
            let today = StoredEvent {
                id: Uuid::now_v7(),
                audience: Uuid::new_v4(),
                seq: 3,
                event_type: "agent/message/received".into(),
                occurred_at: 1_700_000_000_124,
                payload: EventPayload::Value(Arc::new(json!({ "message": m }))),
            };
            let want = serde_json::to_string(&today.envelope_ref()).unwrap();
            let row = message_row(&mut conn, &m, 1_700_000_000_123).await;
            for raw in [false, true] {
                let payload = match raw {
                    false => Payload::Parsed(message_value(&row).unwrap()),
                    true => Payload::Spliced(message_spliced(&row, Text::Splice).unwrap()),
                };
                let event = Shared {
                    event_id: today.id,
                    event_type: today.event_type.clone(),
                    occurred_at: today.occurred_at,
                    payload,
                };
                let got = event.envelope(today.seq, today.audience);
                assert_eq!(serde_json::to_string(&got).unwrap(), want, "raw {raw}");
            }
        }
    }
}
