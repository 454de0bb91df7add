//! Reading the event index back as envelopes (ADR 0018): one joined query
//! a page, each payload rebuilt from the row without parsing it. A message
//! event's payload is `{"message": M}` written from the message row's
//! columns with the stored `parts` text spliced in; a personal event's is
//! its stored body. On SQLite the spliced text is what was written, so a
//! replayed payload is byte for byte the live one; on PostgreSQL `jsonb`
//! prints spaces (taken out here) and its own key order inside objects, as
//! a read of a `jsonb` column always has.

use serde::Serialize;
use serde_json::value::RawValue;
use uuid::Uuid;

use crate::domain::event::{rfc3339, EventPayload, StoredEvent};
use crate::store::sql::{json_err, Row};
use crate::store::StoreResult;

/// A page of one audience's log after a seq: `$1` audience, `$2` seq,
/// `$3` limit. The audience's stream is found through its unique key, then
/// the page is a range of `(stream, seq)`.
pub const PAGE: &str = "SELECT s.audience, i.seq, p.event_id, p.type, p.occurred_at, \
     CAST(p.body AS TEXT) AS body, m.id AS message_id, m.conversation_id, m.seq AS message_seq, \
     m.sender_id, m.origin, m.parts, m.reply_to, m.thread_id, m.created_at, \
     m.reply_to_interaction, CAST(m.card AS TEXT) AS card \
     FROM event_streams s JOIN event_index i ON i.stream = s.stream \
     JOIN event_payloads p ON p.id = i.payload \
     LEFT JOIN messages m ON m.id = p.message_id \
     WHERE s.audience = $1 AND i.seq > $2 ORDER BY i.seq LIMIT $3";

/// How a dialect prints stored JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoredJson {
    /// As written (SQLite keeps the text).
    AsWritten,
    /// With spaces after `:` and `,` (PostgreSQL's `jsonb` output).
    Spaced,
}

impl StoredJson {
    fn text(self, stored: String) -> String {
        match self {
            StoredJson::AsWritten => stored,
            StoredJson::Spaced => compacted(&stored),
        }
    }
}

/// One row of [`PAGE`] as the event it stores.
pub fn stored_event(r: &Row, json: StoredJson) -> StoreResult<StoredEvent> {
    let payload = match r.opt_text("body")? {
        Some(body) => RawValue::from_string(json.text(body)).map_err(json_err)?,
        None => message_payload(r, json)?,
    };
    Ok(StoredEvent {
        id: r.id("event_id")?,
        audience: r.id("audience")?,
        seq: r.int("seq")? as u64,
        event_type: r.text("type")?,
        occurred_at: r.int("occurred_at")?,
        payload: EventPayload::Stored(payload.into()),
    })
}

/// `Message`'s members in its order and under its names, `parts` as
/// stored: serialized, it is what `Message` serializes to.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageText<'a> {
    pub id: Uuid,
    pub conversation_id: Uuid,
    pub seq: i64,
    pub sender_id: Uuid,
    pub origin: String,
    pub parts: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<Uuid>,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_to_interaction: Option<Uuid>,
    /// The card as it is now (ADR 0027 §5): its own `message.updated`
    /// events keep each version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub card: Option<&'a RawValue>,
}

#[derive(Serialize)]
struct Wrapped<'a> {
    message: MessageText<'a>,
}

/// A message event's payload from the row's message columns (`message_id`,
/// `conversation_id`, `message_seq`, `sender_id`, `origin`, `parts`,
/// `reply_to`, `created_at`): `parts` is checked to be JSON (a scan, no
/// values built), never parsed into one.
pub fn message_payload(r: &Row, json: StoredJson) -> StoreResult<Box<RawValue>> {
    let parts = json.text(r.json("parts")?);
    let card = r.opt_text("card")?.map(|c| json.text(c));
    let message = MessageText {
        id: r.id("message_id")?,
        conversation_id: r.id("conversation_id")?,
        seq: r.int("message_seq")?,
        sender_id: r.id("sender_id")?,
        origin: r.text("origin")?,
        parts: serde_json::from_str(&parts).map_err(json_err)?,
        reply_to: r.opt_id("reply_to")?,
        thread_id: r.opt_id("thread_id")?,
        created_at: rfc3339(r.int("created_at")?),
        reply_to_interaction: r.opt_id("reply_to_interaction")?,
        card: card
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(json_err)?,
    };
    serde_json::value::to_raw_value(&Wrapped { message }).map_err(json_err)
}

/// JSON text without whitespace outside strings: `jsonb`'s `": "` and
/// `", "` as serde_json writes them. The result is still checked as JSON
/// by its caller.
pub fn compacted(json: &str) -> String {
    let mut out = Vec::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for &b in json.as_bytes() {
        if in_string {
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            in_string = b == b'"';
            out.push(b);
        }
    }
    // Only ASCII whitespace outside strings was removed: still UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| json.to_string())
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use serde_json::{json, Value};

    use super::*;
    use crate::domain::message::{Message, Origin, Part};
    use crate::store::sql::{Arg, Executor};

    /// A message payload read back is byte for byte the one written, in
    /// the envelope too.
    #[tokio::test]
    async fn message_payloads_read_back_are_the_written_bytes() {
        use sqlx::Connection;
        let mut conn = sqlx::SqliteConnection::connect("sqlite::memory:")
            .await
            .unwrap();
        for reply_to in [None, Some(Uuid::new_v4())] {
            let m = sample_message(reply_to);
            let written = StoredEvent {
                id: Uuid::now_v7(),
                audience: Uuid::new_v4(),
                seq: 3,
                event_type: "agent/message/received".into(),
                occurred_at: 1_700_000_000_124,
                payload: EventPayload::Value(Arc::new(json!({ "message": m }))),
            };
            let row = message_row(&mut conn, &m, 1_700_000_000_123).await;
            let read = StoredEvent {
                payload: EventPayload::Stored(
                    message_payload(&row, StoredJson::AsWritten).unwrap().into(),
                ),
                ..written.clone()
            };
            assert_eq!(
                serde_json::to_string(&read.envelope_ref()).unwrap(),
                serde_json::to_string(&written.envelope_ref()).unwrap()
            );
            assert_eq!(read, written);
        }
    }

    #[test]
    fn compacting_removes_jsonb_spacing_outside_strings_only() {
        let jsonb = r#"[{"text": "a \"b\": c\\", "type": "text"}, {"n": [1, 2]}]"#;
        assert_eq!(
            compacted(jsonb),
            r#"[{"text":"a \"b\": c\\","type":"text"},{"n":[1,2]}]"#
        );
        let value: Value = serde_json::from_str(jsonb).unwrap();
        assert_eq!(compacted(jsonb), serde_json::to_string(&value).unwrap());
    }

    /// A stored message with text that needs escaping, created at
    /// 1_700_000_000_123.
    pub fn sample_message(reply_to: Option<Uuid>) -> Message {
        Message {
            id: Uuid::now_v7(),
            conversation_id: Uuid::new_v4(),
            seq: 7,
            sender_id: Uuid::new_v4(),
            origin: Origin::App,
            parts: vec![
                Part::Text {
                    text: "hi \"there\" \u{e9}\n".into(),
                },
                Part::Text { text: "2".into() },
            ],
            reply_to,
            thread_id: None,
            created_at: rfc3339(1_700_000_000_123),
            reply_to_interaction: None,
            card: None,
        }
    }

    /// A row with the message columns [`message_payload`] reads.
    pub async fn message_row(conn: &mut sqlx::SqliteConnection, m: &Message, at: i64) -> Row {
        let parts = serde_json::to_string(&m.parts).unwrap();
        let ex: &mut dyn Executor = conn;
        ex.fetch_optional(
            "SELECT $1 AS message_id, $2 AS conversation_id, $3 AS message_seq, $4 AS sender_id, \
             $5 AS origin, $6 AS parts, $7 AS reply_to, $8 AS created_at, $9 AS thread_id, \
             NULL AS reply_to_interaction, NULL AS card",
            &[
                Arg::Id(m.id),
                Arg::Id(m.conversation_id),
                Arg::Int(m.seq as i64),
                Arg::Id(m.sender_id),
                Arg::Text(m.origin.as_str()),
                Arg::Json(&parts),
                Arg::OptId(m.reply_to),
                Arg::Int(at),
                Arg::OptId(m.thread_id),
            ],
        )
        .await
        .unwrap()
        .unwrap()
    }
}
