//! The database issue 13's migration test starts from: schema 0007 filled
//! row by row the way the code before the event index wrote it, and what
//! its readers had seen of it.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use switchboard::domain::conversation::{direct_key, Conversation, ConversationKind};
use switchboard::domain::event::{rfc3339, StoredEvent};
use switchboard::domain::keys;
use switchboard::domain::message::{Message, Origin, Part};
use switchboard::domain::PrincipalKind;
use switchboard::protocol::conversations::created_events;
use uuid::Uuid;

use crate::support::agents::text;
use crate::support::legacy_db::{LegacyDb, Val};

/// The pruned member's events up to this seq were deleted by retention
/// before the migration.
pub const PRUNED_THROUGH: u64 = 2;
/// The member that had acknowledged part of its stream, and how far.
pub const ACKED_SEQ: u64 = 3;
/// Senders of the old messages, by index into the three members.
pub const SENDERS: [usize; 7] = [0, 1, 2, 0, 1, 0, 2];

pub struct Principal {
    pub id: Uuid,
    pub key: String,
}

/// One audience's log as its reader saw it before the migration.
#[derive(Default)]
pub struct Stream {
    /// The envelopes still stored, oldest first, as the hub sent them.
    pub envelopes: Vec<Value>,
    pub last_seq: u64,
    pub acked_seq: u64,
}

impl Stream {
    pub fn oldest_seq(&self) -> u64 {
        self.envelopes
            .first()
            .map_or(self.last_seq + 1, |e| e["seq"].as_u64().unwrap())
    }

    pub fn after(&self, seq: u64) -> Vec<Value> {
        self.envelopes
            .iter()
            .filter(|e| e["seq"].as_u64().unwrap() > seq)
            .cloned()
            .collect()
    }
}

/// A message as stored before the migration, with what its retry repeats.
pub struct OldMessage {
    pub message: Message,
    pub client_msg_id: String,
    pub recipients: u32,
}

/// What the old database held.
pub struct Before {
    pub sync_epoch: String,
    /// The group's three members; the first created it.
    pub members: Vec<Principal>,
    /// An agent outside the group, its stream emptied by retention.
    pub outsider: Principal,
    pub conversation: Uuid,
    /// The creator's direct conversation with the outsider.
    pub direct: Uuid,
    pub messages: Vec<OldMessage>,
    pub streams: HashMap<Uuid, Stream>,
}

impl Before {
    pub fn stream(&self, who: &Principal) -> &Stream {
        &self.streams[&who.id]
    }
}

/// What today's send hashes so a retry with the same `clientMsgId` counts
/// as the same message (the handler's `HashedSend`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HashedSend<'a> {
    conversation_id: Uuid,
    parts: &'a [Part],
    reply_to: Option<Uuid>,
}

/// The hash a retried send must match (see [`HashedSend`]).
fn request_hash(conversation_id: Uuid, parts: &[Part], reply_to: Option<Uuid>) -> String {
    let send = HashedSend {
        conversation_id,
        parts,
        reply_to,
    };
    hex::encode(Sha256::digest(serde_json::to_vec(&send).unwrap()))
}

fn now_millis() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Writes rows the way the code before migration 0008 wrote them.
struct Writer<'a> {
    db: &'a LegacyDb,
    streams: HashMap<Uuid, Stream>,
}

impl Writer<'_> {
    /// An agent with one active key, stored as identity stores it: the
    /// principal row and the SHA-256 of the key's secret.
    async fn agent(&self, name: &str) -> Principal {
        let id = Uuid::now_v7();
        let key = keys::mint(PrincipalKind::Agent);
        let now = now_millis();
        self.db
            .exec(
                "INSERT INTO principals (id, kind, name, description, created_at) VALUES ($1, 'agent', $2, NULL, $3)",
                &[Val::Id(id), Val::Text(name.into()), Val::Int(now)],
            )
            .await;
        self.db
            .exec(
                "INSERT INTO principal_keys (key_id, principal_id, secret_hash, created_at) VALUES ($1, $2, $3, $4)",
                &[
                    Val::Text(key.key_id.clone()),
                    Val::Id(id),
                    Val::Bytes(key.secret_hash.to_vec()),
                    Val::Int(now),
                ],
            )
            .await;
        Principal {
            id,
            key: key.plaintext,
        }
    }

    /// One `events` row at the audience's next seq, remembered as the
    /// envelope its reader gets.
    async fn event(
        &mut self,
        id: Uuid,
        audience: Uuid,
        event_type: &str,
        payload: &Value,
        at: i64,
    ) {
        let stream = self.streams.entry(audience).or_default();
        stream.last_seq += 1;
        let stored = StoredEvent {
            id,
            audience,
            seq: stream.last_seq,
            event_type: event_type.into(),
            occurred_at: at,
            payload: payload.clone().into(),
        };
        stream
            .envelopes
            .push(serde_json::to_value(stored.envelope()).unwrap());
        self.db
            .exec(
                "INSERT INTO events (audience, seq, id, type, occurred_at, payload) VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    Val::Id(audience),
                    Val::Int(stored.seq as i64),
                    Val::Id(id),
                    Val::Text(event_type.into()),
                    Val::Int(at),
                    Val::Json(serde_json::to_string(payload).unwrap()),
                ],
            )
            .await;
    }

    /// A conversation of `members` (the first creates it), with the
    /// others' `agent/conversation/created` events.
    async fn conversation(&mut self, kind: ConversationKind, members: &[&Principal]) -> Uuid {
        let id = Uuid::now_v7();
        let at = now_millis();
        let creator = members[0].id;
        let (name, key) = match kind {
            ConversationKind::Direct => (None, Some(direct_key(creator, members[1].id))),
            _ => (Some("before 0008".to_string()), None),
        };
        self.db
            .exec(
                "INSERT INTO conversations (id, kind, name, task_id, direct_key, created_by, created_at, template_key) \
                 VALUES ($1, $2, $3, NULL, $4, $5, $6, NULL)",
                &[
                    Val::Id(id),
                    Val::Text(kind.as_str().into()),
                    Val::OptText(name.clone()),
                    Val::OptText(key),
                    Val::Id(creator),
                    Val::Int(at),
                ],
            )
            .await;
        for m in members {
            self.db
                .exec(
                    "INSERT INTO conversation_participants (conversation_id, principal_id, joined_at) VALUES ($1, $2, $3)",
                    &[Val::Id(id), Val::Id(m.id), Val::Int(at)],
                )
                .await;
        }
        let view = Conversation {
            id,
            kind,
            name,
            key: None,
            task_id: None,
            space_id: None,
            state: None,
            created_by: creator,
            participants: members.iter().map(|m| m.id).collect(),
            last_message_seq: 0,
            created_at: rfc3339(at),
        };
        let others: Vec<Uuid> = members[1..].iter().map(|m| m.id).collect();
        for e in created_events(view, &others) {
            self.event(e.id, e.audience, e.event_type, &e.payload, at)
                .await;
        }
        id
    }

    /// A forwarded message to every other member: its row, its recipient
    /// rows and each recipient's `agent/message/received` event.
    async fn message(
        &mut self,
        conversation: Uuid,
        seq: u64,
        sender: &Principal,
        members: &[Principal],
        reply_to: Option<Uuid>,
    ) -> OldMessage {
        let at = now_millis();
        // Separators and escapes inside strings, which PostgreSQL's read
        // of a jsonb payload must leave as they are.
        let mut parts = text(&format!(
            r#"before the event index, {seq}: a "quoted, \ tricky": part"#
        ));
        if seq == 2 {
            // Keys out of order and nested: PostgreSQL's jsonb keeps neither.
            parts.push(Part::Data {
                data: json!({"zeta": 1, "alpha": {"b, c": [2, "x: \"y\""], "a": true}}),
                mime_type: Some("application/json".into()),
            });
        }
        let client_msg_id = format!("old-{seq}");
        let hash = request_hash(conversation, &parts, reply_to);
        let message = Message {
            id: Uuid::now_v7(),
            conversation_id: conversation,
            seq,
            sender_id: sender.id,
            origin: Origin::Agent,
            parts,
            reply_to,
            created_at: rfc3339(at),
            thread_id: None,
            reply_to_interaction: None,
            card: None,
        };
        self.db
            .exec(
                "INSERT INTO messages (id, conversation_id, seq, sender_id, origin, parts, reply_to, client_msg_id, \
                 request_hash, verdict, created_at) VALUES ($1, $2, $3, $4, 'agent', $5, $6, $7, $8, 'forwarded', $9)",
                &[
                    Val::Id(message.id),
                    Val::Id(conversation),
                    Val::Int(seq as i64),
                    Val::Id(sender.id),
                    Val::Json(serde_json::to_string(&message.parts).unwrap()),
                    Val::OptId(reply_to),
                    Val::Text(client_msg_id.clone()),
                    Val::Text(hash),
                    Val::Int(at),
                ],
            )
            .await;
        let payload = json!({ "message": message });
        let recipients: Vec<&Principal> = members.iter().filter(|m| m.id != sender.id).collect();
        for r in &recipients {
            self.db
                .exec(
                    "INSERT INTO message_recipients (message_id, recipient_id) VALUES ($1, $2)",
                    &[Val::Id(message.id), Val::Id(r.id)],
                )
                .await;
            self.event(Uuid::now_v7(), r.id, "agent/message/received", &payload, at)
                .await;
        }
        OldMessage {
            message,
            client_msg_id,
            recipients: recipients.len() as u32,
        }
    }

    /// The streams' rows, one acknowledgement, and retention's deletion of
    /// each `pruned` audience's events up to its seq.
    async fn finish(&mut self, acked: &Principal, pruned: &[(&Principal, u64)]) {
        self.streams.get_mut(&acked.id).unwrap().acked_seq = ACKED_SEQ;
        for (audience, s) in &self.streams {
            self.db
                .exec(
                    "INSERT INTO event_streams (audience, last_seq, acked_seq) VALUES ($1, $2, $3)",
                    &[
                        Val::Id(*audience),
                        Val::Int(s.last_seq as i64),
                        Val::Int(s.acked_seq as i64),
                    ],
                )
                .await;
        }
        for (who, through) in pruned {
            self.db
                .exec(
                    "DELETE FROM events WHERE audience = $1 AND seq <= $2",
                    &[Val::Id(who.id), Val::Int(*through as i64)],
                )
                .await;
            let s = self.streams.get_mut(&who.id).unwrap();
            s.envelopes
                .retain(|e| e["seq"].as_u64().unwrap() > *through);
        }
    }
}

/// Fills a database at schema 0007: three agents in a group (the second has
/// acknowledged part of its stream, the third lost its oldest events to
/// retention) with messages from each, an outsider whose only event (a
/// direct conversation with the creator) retention removed, and the sync
/// epoch.
pub async fn write_before(db: &LegacyDb) -> Before {
    let mut w = Writer {
        db,
        streams: HashMap::new(),
    };
    let mut members = Vec::new();
    for name in ["creator", "acker", "pruned"] {
        members.push(w.agent(name).await);
    }
    let outsider = w.agent("outsider").await;
    let conversation = w
        .conversation(ConversationKind::Group, &members.iter().collect::<Vec<_>>())
        .await;
    let direct = w
        .conversation(ConversationKind::Direct, &[&members[0], &outsider])
        .await;
    let mut messages: Vec<OldMessage> = Vec::new();
    for (i, sender) in SENDERS.iter().enumerate() {
        // One reply, so a stored `replyTo` crosses the migration too.
        let reply_to = (i == 2).then(|| messages[0].message.id);
        let m = w
            .message(
                conversation,
                i as u64 + 1,
                &members[*sender],
                &members,
                reply_to,
            )
            .await;
        messages.push(m);
    }
    db.exec(
        "UPDATE conversations SET last_message_seq = $1 WHERE id = $2",
        &[Val::Int(SENDERS.len() as i64), Val::Id(conversation)],
    )
    .await;
    w.finish(
        &members[1],
        &[(&members[2], PRUNED_THROUGH), (&outsider, 1)],
    )
    .await;
    let sync_epoch = Uuid::new_v4().to_string();
    db.exec(
        "INSERT INTO hub_meta (name, value) VALUES ('sync_epoch', $1)",
        &[Val::Text(sync_epoch.clone())],
    )
    .await;
    Before {
        sync_epoch,
        members,
        outsider,
        conversation,
        direct,
        messages,
        streams: w.streams,
    }
}
