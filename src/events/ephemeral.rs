//! Ephemeral events (typing): never stored, no seq, sent only to the
//! sockets open now and dropped for one whose queue is nearly full.
//!
//! One send names all its audiences at once, so in `nats` mode it is one
//! message on `sb.ephemeral` (per [`ephemeral::AUDIENCES_PER_MESSAGE`]
//! audiences) rather than one per reader: every node gets every message
//! anyway, and each sends the event to its own sockets of the listed
//! audiences (ADR 0034 §3, amended 2026-12-02).

use serde_json::Value;
use uuid::Uuid;

use super::EventBus;
use crate::cluster::{self, ephemeral};
use crate::domain::event::{rfc3339, EventEnvelope};
use crate::domain::now_millis;
use crate::rpc::frame;
use crate::telemetry::names;

impl EventBus {
    /// Sends one ephemeral event to each audience's open sockets here, each
    /// under its own event type (people get `person/...`), and hands it to
    /// the other nodes in one message. All copies share one id.
    pub fn publish_ephemeral_many(&self, audiences: &[(Uuid, &'static str)], payload: Value) {
        let clustered = self.cluster.client().is_some();
        if audiences.is_empty() || (!clustered && !audiences.iter().any(|(a, _)| self.is_live(*a)))
        {
            return;
        }
        let id = Uuid::now_v7();
        let occurred_at = rfc3339(now_millis());
        for (audience, event_type) in audiences {
            self.deliver_ephemeral(id, &occurred_at, *audience, event_type, &payload);
        }
        if clustered {
            for message in ephemeral::encode(id, &occurred_at, audiences, &payload) {
                self.cluster.publish(
                    cluster::Kind::Ephemeral,
                    cluster::subjects::EPHEMERAL,
                    message,
                );
            }
        }
    }

    /// An ephemeral event another node published: to this node's sockets
    /// of each audience it lists.
    pub fn deliver_remote_ephemeral(&self, batch: &ephemeral::Batch) {
        for (event_type, audiences) in &batch.audiences {
            for audience in audiences {
                self.deliver_ephemeral(
                    batch.id,
                    &batch.occurred_at,
                    *audience,
                    event_type,
                    &batch.payload,
                );
            }
        }
    }

    /// One audience's copy, to its sockets here (none: nothing to do).
    fn deliver_ephemeral(
        &self,
        id: Uuid,
        occurred_at: &str,
        audience: Uuid,
        event_type: &str,
        payload: &Value,
    ) {
        let Some(subs) = self.subscriptions.get(&audience) else {
            return;
        };
        let envelope = EventEnvelope {
            id,
            seq: None,
            event_type: event_type.to_string(),
            occurred_at: occurred_at.to_string(),
            audience,
            ephemeral: true,
            payload: payload.clone(),
        };
        let text = frame::notification(&envelope.event_type, &envelope);
        for s in subs.iter() {
            if !s.peer.send_droppable(text.clone()) {
                metrics::counter!(names::EPHEMERAL_DROPPED).increment(1);
            }
        }
    }
}
