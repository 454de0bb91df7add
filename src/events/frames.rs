//! Notification frames of stored events, written once per fan-out.
//!
//! One message fanned out to a thousand recipients is a thousand events that
//! share one payload. Serializing each envelope with serde
//! would serialize that payload a thousand times. [`FrameWriter`] serializes
//! each distinct payload (and event type, and timestamp) once, and writes
//! every receiver's frame by splicing the small per-event members (`id`,
//! `seq`, `audience`) around that text. The bytes are exactly what
//! `rpc::frame::notification` writes for the envelope (a test holds this):
//! clients cannot tell the difference.

use std::borrow::Cow;
use std::fmt::Write as _;

use crate::domain::event::{rfc3339, EventPayload, StoredEvent};
use crate::domain::Millis;

/// Few distinct payloads appear in one batch (a message's copies, perhaps a
/// delivery report): a short list, searched linearly, is enough.
const PAYLOADS_KEPT: usize = 4;

/// Writes the frames of one batch of events. It keys its payload cache on
/// the payload's address, so it must not outlive the events it was used on:
/// it borrows them (`'a`), which keeps every cached address alive and
/// unique for its whole life.
#[derive(Default)]
pub struct FrameWriter<'a> {
    /// A stored payload's text is borrowed, not copied: a replayed page has
    /// a distinct payload per event, so a copy would be pure cost.
    payloads: Vec<(&'a EventPayload, Cow<'a, str>)>,
    event_type: Option<(&'a str, String)>,
    occurred_at: Option<(Millis, String)>,
}

impl<'a> FrameWriter<'a> {
    pub fn new() -> FrameWriter<'a> {
        FrameWriter::default()
    }

    /// The event's notification frame, byte for byte what
    /// `frame::notification(&event.event_type, &event.envelope_ref())` is.
    pub fn frame(&mut self, event: &'a StoredEvent) -> String {
        let payload = self.payload_slot(&event.payload);
        self.remember_event_type(&event.event_type);
        self.remember_occurred_at(event.occurred_at);
        let payload = &self.payloads[payload].1;
        let event_type = &self.event_type.as_ref().expect("remembered").1;
        let occurred_at = &self.occurred_at.as_ref().expect("remembered").1;
        let mut out = String::with_capacity(payload.len() + 2 * event_type.len() + 200);
        out.push_str("{\"jsonrpc\":\"2.0\",\"method\":");
        out.push_str(event_type);
        // Uuid's Display is the hyphenated lowercase form serde writes.
        let _ = write!(
            out,
            ",\"params\":{{\"id\":\"{}\",\"seq\":{}",
            event.id, event.seq
        );
        out.push_str(",\"type\":");
        out.push_str(event_type);
        out.push_str(",\"occurredAt\":");
        out.push_str(occurred_at);
        let _ = write!(out, ",\"audience\":\"{}\",\"payload\":", event.audience);
        out.push_str(payload);
        out.push_str("}}");
        out
    }

    /// Where the payload's text is, serializing it on first sight.
    fn payload_slot(&mut self, payload: &'a EventPayload) -> usize {
        if let Some(at) = self
            .payloads
            .iter()
            .position(|(p, _)| p.address() == payload.address())
        {
            return at;
        }
        if self.payloads.len() == PAYLOADS_KEPT {
            self.payloads.remove(0);
        }
        self.payloads.push((payload, payload.json()));
        self.payloads.len() - 1
    }

    fn remember_event_type(&mut self, event_type: &'a str) {
        if !matches!(&self.event_type, Some((t, _)) if *t == event_type) {
            self.event_type = Some((event_type, json_text(event_type)));
        }
    }

    fn remember_occurred_at(&mut self, at: Millis) {
        if !matches!(&self.occurred_at, Some((t, _)) if *t == at) {
            self.occurred_at = Some((at, json_text(&rfc3339(at))));
        }
    }
}

fn json_text<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).expect("JSON values serialize")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{json, Value};
    use uuid::Uuid;

    use super::*;
    use crate::rpc::frame;

    fn event(event_type: &str, occurred_at: Millis, payload: &Arc<Value>) -> StoredEvent {
        StoredEvent {
            id: Uuid::now_v7(),
            audience: Uuid::new_v4(),
            seq: seq_for(occurred_at),
            event_type: event_type.into(),
            occurred_at,
            payload: payload.clone().into(),
        }
    }

    fn seq_for(salt: Millis) -> u64 {
        (salt as u64).wrapping_mul(2_654_435_761) % 1_000_000_007 + 1
    }

    fn serde_frame(e: &StoredEvent) -> String {
        frame::notification(&e.event_type, &e.envelope_ref())
    }

    #[test]
    fn spliced_frames_equal_serde_frames() {
        let big: Vec<Value> = (0..5000)
            .map(|i| json!({"n": i, "text": format!("line {i}\n\t\"quoted\" \\ \u{1}")}))
            .collect();
        let payloads = [
            Arc::new(json!({"a": 1})),
            Arc::new(json!({"z": "last", "a": "first", "nested": {"y": [1, 2.5, -3e10, true]}})),
            Arc::new(json!({"text": "\"escapes\" \\ / \u{0} \u{1f} \u{7f} é 😀 </script>"})),
            Arc::new(json!({"big": big})),
            Arc::new(json!([])),
            Arc::new(json!("bare string")),
            Arc::new(json!(u64::MAX)),
        ];
        let types = [
            "agent/message/received",
            "type \"with\" quotes\\ and \n newline \u{2028}",
            "",
        ];
        let times = [0, 1, 1_764_547_200_123, -1, i64::MAX - 16];
        let mut events = Vec::new();
        for (i, p) in payloads.iter().enumerate() {
            for t in types {
                for at in times {
                    events.push(event(t, at + i as Millis, p));
                    // Copies of one fan-out: same payload, type and time.
                    events.push(event(t, at + i as Millis, p));
                }
            }
        }
        // Read back from the log: the stored text, spliced.
        let stored: Vec<StoredEvent> = events
            .iter()
            .map(|e| StoredEvent {
                payload: EventPayload::Stored(
                    serde_json::value::RawValue::from_string(e.payload.json().into_owned())
                        .unwrap()
                        .into(),
                ),
                ..e.clone()
            })
            .collect();
        let mut writer = FrameWriter::new();
        for (e, s) in events.iter().zip(&stored) {
            assert_eq!(writer.frame(e), serde_frame(e), "event {e:?}");
            assert_eq!(writer.frame(s), serde_frame(e), "stored event {s:?}");
        }
    }

    #[test]
    fn equal_payloads_at_different_addresses_are_not_confused() {
        // Two payloads with the same content, then different content at a
        // different address: each frame carries its own payload.
        let a = Arc::new(json!({"v": 1}));
        let b = Arc::new(json!({"v": 2}));
        let events: Vec<StoredEvent> = (0..3 * PAYLOADS_KEPT)
            .map(|i| {
                let p = if i % 2 == 0 {
                    a.clone()
                } else {
                    Arc::new(json!({"v": i}))
                };
                event("t", i as Millis, &p)
            })
            .chain([event("t", 9, &b)])
            .collect();
        let mut writer = FrameWriter::new();
        for e in &events {
            assert_eq!(writer.frame(e), serde_frame(e));
        }
    }
}
