//! The event envelope: one shape for every way an event leaves the hub
//! (gateway notification, REST catch-up, later webhooks).

use std::borrow::Cow;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
use uuid::Uuid;

use super::Millis;

/// A stored event as every consumer sees it. No member is ever `null`:
/// absent members are omitted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventEnvelope {
    /// Stable id (UUIDv7): deduplicate on it.
    pub id: Uuid,
    /// Position in the audience's own log, gap-free from 1. Absent on
    /// ephemeral events, which are never stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The notification method, for example `agent/message/received`.
    #[serde(rename = "type")]
    pub event_type: String,
    /// RFC 3339 with milliseconds, UTC.
    pub occurred_at: String,
    /// The principal this copy is addressed to.
    pub audience: Uuid,
    /// True on ephemeral events (live only, never replayed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ephemeral: bool,
    pub payload: Value,
}

/// An event to store, before the log gives it a sequence number. The
/// copies of one fan-out share one id and one payload: the log stores the
/// event once and gives each audience an index entry (ADR 0018).
#[derive(Clone, Debug, PartialEq)]
pub struct NewEvent {
    pub id: Uuid,
    pub audience: Uuid,
    pub event_type: &'static str,
    pub payload: Arc<Value>,
    /// Set when the payload is `{"message": M}` for the stored message `M`:
    /// the log then refers to the message row instead of copying it.
    pub message: Option<Uuid>,
}

impl NewEvent {
    /// A personal event: its own id, its payload stored with it.
    pub fn new(
        audience: Uuid,
        event_type: &'static str,
        payload: impl Into<Arc<Value>>,
    ) -> NewEvent {
        NewEvent {
            id: Uuid::now_v7(),
            audience,
            event_type,
            payload: payload.into(),
            message: None,
        }
    }

    /// One message's delivery to each of `recipients`: one event, one id.
    /// `payload` must be `{"message": M}` with `M` as its row stores it.
    pub fn message_copies(
        recipients: &[Uuid],
        event_type: &'static str,
        message_id: Uuid,
        payload: Arc<Value>,
    ) -> Vec<NewEvent> {
        let id = Uuid::now_v7();
        recipients
            .iter()
            .map(|r| NewEvent {
                id,
                audience: *r,
                event_type,
                payload: payload.clone(),
                message: Some(message_id),
            })
            .collect()
    }
}

impl NewEvent {
    /// [`NewEvent::message_copies`] for a mixed audience: the recipients in
    /// `people.0` get an event of type `people.1`, the others one of
    /// `event_type`. Two events at most, whatever the audience's size, each
    /// with its own id, sharing the payload (ADR 0018, ADR 0020 §1).
    pub fn message_copies_by_kind(
        recipients: &[Uuid],
        event_type: &'static str,
        people: (&[Uuid], &'static str),
        message_id: Uuid,
        payload: Arc<Value>,
    ) -> Vec<NewEvent> {
        let (people, person_type) = people;
        if people.is_empty() {
            return NewEvent::message_copies(recipients, event_type, message_id, payload);
        }
        let people: std::collections::HashSet<Uuid> = people.iter().copied().collect();
        let (to_people, to_agents): (Vec<Uuid>, Vec<Uuid>) =
            recipients.iter().partition(|r| people.contains(r));
        let mut events =
            NewEvent::message_copies(&to_agents, event_type, message_id, payload.clone());
        events.extend(NewEvent::message_copies(
            &to_people,
            person_type,
            message_id,
            payload,
        ));
        events
    }
}

/// An event's payload: the value its writer built (what the bus carries
/// live), or the JSON text read back from the log, spliced into frames and
/// pages without being parsed (ADR 0018).
#[derive(Clone, Debug)]
pub enum EventPayload {
    Value(Arc<Value>),
    Stored(Arc<RawValue>),
}

impl EventPayload {
    /// The payload as a value; a stored one is parsed.
    pub fn to_value(&self) -> Value {
        match self {
            EventPayload::Value(v) => (**v).clone(),
            EventPayload::Stored(raw) => {
                serde_json::from_str(raw.get()).expect("stored payloads are checked JSON")
            }
        }
    }

    /// The payload as JSON text; a stored one as it is.
    pub fn json(&self) -> Cow<'_, str> {
        match self {
            EventPayload::Value(v) => {
                Cow::Owned(serde_json::to_string(&**v).expect("JSON values serialize"))
            }
            EventPayload::Stored(raw) => Cow::Borrowed(raw.get()),
        }
    }

    /// Where the payload lives: the same for every copy of one fan-out.
    pub fn address(&self) -> usize {
        match self {
            EventPayload::Value(v) => Arc::as_ptr(v) as usize,
            EventPayload::Stored(raw) => Arc::as_ptr(raw) as *const u8 as usize,
        }
    }
}

impl From<Arc<Value>> for EventPayload {
    fn from(v: Arc<Value>) -> EventPayload {
        EventPayload::Value(v)
    }
}

impl From<Value> for EventPayload {
    fn from(v: Value) -> EventPayload {
        EventPayload::Value(Arc::new(v))
    }
}

impl Serialize for EventPayload {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            EventPayload::Value(v) => v.serialize(s),
            EventPayload::Stored(raw) => raw.serialize(s),
        }
    }
}

/// Equal when the JSON is: a payload read back equals the one written.
impl PartialEq for EventPayload {
    fn eq(&self, other: &EventPayload) -> bool {
        self.to_value() == other.to_value()
    }
}

/// An event as the log holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredEvent {
    pub id: Uuid,
    pub audience: Uuid,
    pub seq: u64,
    pub event_type: String,
    pub occurred_at: Millis,
    pub payload: EventPayload,
}

pub fn rfc3339(millis: Millis) -> String {
    chrono::DateTime::from_timestamp_millis(millis)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl StoredEvent {
    pub fn envelope(&self) -> EventEnvelope {
        EventEnvelope {
            id: self.id,
            seq: Some(self.seq),
            event_type: self.event_type.clone(),
            occurred_at: rfc3339(self.occurred_at),
            audience: self.audience,
            ephemeral: false,
            payload: self.payload.to_value(),
        }
    }

    /// The envelope without copying the payload, for serializing.
    pub fn envelope_ref(&self) -> EnvelopeRef<'_> {
        EnvelopeRef {
            id: self.id,
            seq: self.seq,
            event_type: &self.event_type,
            occurred_at: rfc3339(self.occurred_at),
            audience: self.audience,
            payload: &self.payload,
        }
    }
}

/// [`EventEnvelope`] borrowing its payload: the same JSON, no deep copy.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvelopeRef<'a> {
    pub id: Uuid,
    pub seq: u64,
    #[serde(rename = "type")]
    pub event_type: &'a str,
    pub occurred_at: String,
    pub audience: Uuid,
    pub payload: &'a EventPayload,
}

/// True when `value` holds a JSON `null` anywhere. Payloads never do.
pub fn contains_null(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(a) => a.iter().any(contains_null),
        Value::Object(o) => o.values().any(contains_null),
        _ => false,
    }
}

/// Where a reader of the log stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamPosition {
    /// Highest seq written for the audience (0: none yet).
    pub last_seq: u64,
    /// Highest seq the audience acknowledged.
    pub acked_seq: u64,
    /// Lowest seq still stored; `last_seq + 1` when retention removed all.
    pub oldest_seq: u64,
}

impl StreamPosition {
    /// Whether the log can serve everything after `after`.
    pub fn can_serve_after(&self, after: u64) -> bool {
        after.saturating_add(1) >= self.oldest_seq && after <= self.last_seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn envelopes_omit_absent_members() {
        let e = StoredEvent {
            id: Uuid::now_v7(),
            audience: Uuid::new_v4(),
            seq: 3,
            event_type: "agent/message/received".into(),
            occurred_at: 0,
            payload: json!({"a": 1}).into(),
        };
        let v = serde_json::to_value(e.envelope()).unwrap();
        assert_eq!(v, serde_json::to_value(e.envelope_ref()).unwrap());
        assert!(!contains_null(&v));
        assert!(v.get("ephemeral").is_none());
        assert_eq!(v["occurredAt"], json!("1970-01-01T00:00:00.000Z"));
        assert_eq!(v["type"], json!("agent/message/received"));
    }

    #[test]
    fn positions_know_what_they_can_serve() {
        let p = StreamPosition {
            last_seq: 10,
            acked_seq: 0,
            oldest_seq: 5,
        };
        assert!(p.can_serve_after(4));
        assert!(p.can_serve_after(10));
        assert!(!p.can_serve_after(3));
        assert!(!p.can_serve_after(11));
        let empty = StreamPosition {
            last_seq: 0,
            acked_seq: 0,
            oldest_seq: 1,
        };
        assert!(empty.can_serve_after(0));
    }

    /// A mixed audience is one event per kind: each kind's copies share an
    /// id and the payload, the two ids differ, and nobody is left out.
    #[test]
    fn copies_for_a_mixed_audience_are_one_event_per_kind() {
        let (a, b, p, q) = (
            Uuid::new_v4(),
            Uuid::new_v4(),
            Uuid::new_v4(),
            Uuid::new_v4(),
        );
        let payload = Arc::new(serde_json::json!({ "message": {} }));
        let message = Uuid::new_v4();
        let events = NewEvent::message_copies_by_kind(
            &[a, p, b, q],
            "agent/x",
            (&[p, q], "person/x"),
            message,
            payload.clone(),
        );
        let of = |r: Uuid| events.iter().find(|e| e.audience == r).unwrap();
        assert_eq!(events.len(), 4);
        assert_eq!(
            (of(a).event_type, of(p).event_type),
            ("agent/x", "person/x")
        );
        assert_eq!(of(a).id, of(b).id);
        assert_eq!(of(p).id, of(q).id);
        assert_ne!(of(a).id, of(p).id);
        assert!(events.iter().all(|e| Arc::ptr_eq(&e.payload, &payload)));
        assert!(events.iter().all(|e| e.message == Some(message)));
        let agents_only = NewEvent::message_copies_by_kind(
            &[a, b],
            "agent/x",
            (&[], "person/x"),
            message,
            payload,
        );
        assert!(agents_only
            .iter()
            .all(|e| e.event_type == "agent/x" && e.id == agents_only[0].id));
    }
}
