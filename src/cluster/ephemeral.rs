//! The ephemeral-event format on `sb.ephemeral` (ADR 0034 §3, amended
//! 2026-12-02): one message per send, whatever the number of readers. It
//! carries the event once (its id, time and payload) and the audiences
//! that get it, grouped by event type (`agent/typing/received`,
//! `person/typing/received`); each node sends it to its own sockets of
//! each listed audience. Before, one send to a channel of N readers was N
//! messages, each with the whole envelope.
//!
//! A message lists at most [`AUDIENCES_PER_MESSAGE`] audiences; a send to
//! more goes out in several (each a whole event for its audiences).

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// The format's version: 1 was one envelope per audience, which this
/// version does not read (a mixed-version cluster loses typing across the
/// versions' nodes during an upgrade, nothing else).
const VERSION: u8 = 2;

/// Most audiences one message lists. A UUID is 39 bytes of JSON (quotes and
/// comma), so 4,096 of them are about 160 KB: well under NATS's default
/// `max_payload` of 1 MB with room for the payload, while any channel a
/// test or a deployment has today fits in one message. A server with a
/// smaller `max_payload` refuses a larger message, so the bound is fixed
/// rather than computed from the server's limit.
pub const AUDIENCES_PER_MESSAGE: usize = 4_096;

/// One message, as a node reads it.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Batch {
    pub version: u8,
    /// The event's id: the same for every audience, as a stored fan-out's
    /// copies share theirs (ADR 0018).
    pub id: Uuid,
    pub occurred_at: String,
    /// Each event type with the audiences that get it.
    pub audiences: BTreeMap<String, Vec<Uuid>>,
    pub payload: Value,
}

/// The message as written: borrowed, so a send to thousands of readers
/// copies neither the payload nor the type names.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BatchOut<'a> {
    version: u8,
    id: Uuid,
    occurred_at: &'a str,
    audiences: BTreeMap<&'a str, Vec<Uuid>>,
    payload: &'a Value,
}

/// The messages that carry one event to these audiences: one for up to
/// [`AUDIENCES_PER_MESSAGE`] of them, none for none.
pub fn encode(
    id: Uuid,
    occurred_at: &str,
    audiences: &[(Uuid, &str)],
    payload: &Value,
) -> Vec<Bytes> {
    audiences
        .chunks(AUDIENCES_PER_MESSAGE)
        .map(|chunk| {
            let mut by_type: BTreeMap<&str, Vec<Uuid>> = BTreeMap::new();
            for (audience, event_type) in chunk {
                by_type.entry(*event_type).or_default().push(*audience);
            }
            let out = BatchOut {
                version: VERSION,
                id,
                occurred_at,
                audiences: by_type,
                payload,
            };
            Bytes::from(serde_json::to_vec(&out).expect("a JSON value serializes"))
        })
        .collect()
}

/// The event of one message; `None` when it is not one this version reads
/// (another version's, or damaged), which the caller counts and ignores.
pub fn decode(message: &[u8]) -> Option<Batch> {
    let batch: Batch = serde_json::from_slice(message).ok()?;
    (batch.version == VERSION).then_some(batch)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn one_message_carries_the_event_once_for_every_audience() {
        let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let id = Uuid::now_v7();
        let payload = json!({"conversationId": Uuid::new_v4()});
        let messages = encode(
            id,
            "2026-12-02T17:00:00.000Z",
            &[
                (a, "agent/typing/received"),
                (b, "person/typing/received"),
                (c, "agent/typing/received"),
            ],
            &payload,
        );
        assert_eq!(messages.len(), 1);
        let batch = decode(&messages[0]).unwrap();
        assert_eq!(batch.id, id);
        assert_eq!(batch.payload, payload);
        assert_eq!(batch.audiences["agent/typing/received"], vec![a, c]);
        assert_eq!(batch.audiences["person/typing/received"], vec![b]);
        let text = std::str::from_utf8(&messages[0]).unwrap();
        assert_eq!(text.matches("conversationId").count(), 1, "{text}");
    }

    #[test]
    fn past_the_bound_a_send_is_several_messages_and_none_for_nobody() {
        let audiences: Vec<(Uuid, &str)> = (0..AUDIENCES_PER_MESSAGE + 1)
            .map(|_| (Uuid::new_v4(), "agent/typing/received"))
            .collect();
        let messages = encode(Uuid::now_v7(), "t", &audiences, &json!({}));
        assert_eq!(messages.len(), 2);
        let listed: usize = messages
            .iter()
            .map(|m| {
                decode(m)
                    .unwrap()
                    .audiences
                    .values()
                    .map(Vec::len)
                    .sum::<usize>()
            })
            .sum();
        assert_eq!(listed, audiences.len());
        assert!(
            messages[0].len() < 1024 * 1024,
            "under NATS's default max_payload"
        );
        assert!(encode(Uuid::now_v7(), "t", &[], &json!({})).is_empty());
    }

    #[test]
    fn other_versions_and_damaged_messages_are_not_read() {
        let v1 = json!({
            "id": Uuid::now_v7(), "type": "agent/typing/received", "occurredAt": "t",
            "audience": Uuid::new_v4(), "ephemeral": true, "payload": {}
        });
        assert!(decode(v1.to_string().as_bytes()).is_none());
        let v3 = json!({"version": 3, "id": Uuid::now_v7(), "occurredAt": "t", "audiences": {}, "payload": {}});
        assert!(decode(v3.to_string().as_bytes()).is_none());
        assert!(decode(b"{").is_none());
    }
}
