//! The database issue 14's migration test starts from: schema 0007 as
//! `schema_0007` fills it, migrated to 0008 (the event index), then rows
//! the way the code of schema 0008 writes them: an app with a key, an
//! active task of two agents, its conversation, a message listed only by
//! participation (no recipient rows) and one with recipient rows, their
//! events in the event index, and two finished leases.

use serde_json::json;
use switchboard::domain::conversation::{Conversation, ConversationKind};
use switchboard::domain::event::{rfc3339, StoredEvent};
use switchboard::domain::keys;
use switchboard::domain::manifest;
use switchboard::domain::message::{Message, Origin};
use switchboard::domain::task::{Task, TaskParticipant, TaskRole, TaskState};
use switchboard::domain::PrincipalKind;
use uuid::Uuid;

use super::schema_0007::{write_before, Before, Principal};
use crate::support::agents::text;
use crate::support::legacy_db::{LegacyDb, Val};
use crate::support::werewolf_manifest;

/// The last migration before people and places.
pub const SCHEMA_BEFORE: u32 = 8;

/// What the 0008 era added to the 0007 database.
pub struct After0008 {
    pub app: Principal,
    pub task: Task,
    /// The task's conversation, as `app/task/get` answers it.
    pub conversation: Conversation,
    /// Its two messages, oldest first.
    pub messages: Vec<Message>,
}

fn now_millis() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Fills `db` at schema 0007, migrates it to 0008 and adds that era's rows.
pub async fn write_0008(db: &LegacyDb) -> (Before, After0008) {
    let mut before = write_before(db).await;
    db.migrate_to(SCHEMA_BEFORE).await;
    let app = app(db).await;
    let [creator, acker, _] = &before.members[..] else {
        unreachable!()
    };
    let (creator, acker) = (creator.id, acker.id);
    let task = task(db, app.id, creator, acker).await;
    let conversation = conversation(db, &task, app.id).await;
    let first = message(db, &conversation, 1, creator, None).await;
    let second = message(db, &conversation, 2, acker, Some(first.id)).await;
    // The first is a forward to every participant but the sender (no
    // recipient rows); the second lists its one recipient.
    list_recipients(db, &second, &[creator]).await;
    for (m, to) in [(&first, acker), (&second, creator)] {
        message_event(db, &mut before, m, to).await;
    }
    lease(db, &first, acker, "completed", None).await;
    lease(db, &second, creator, "denied", Some("not your turn")).await;
    let messages = vec![first, second];
    (
        before,
        After0008 {
            app,
            task,
            conversation,
            messages,
        },
    )
}

/// An app with its validated manifest and one key, as `create_app` stores it.
async fn app(db: &LegacyDb) -> Principal {
    let id = Uuid::now_v7();
    let key = keys::mint(PrincipalKind::App);
    let now = now_millis();
    let bounds = switchboard::config::Config::default().manifest_bounds();
    let manifest = manifest::validate(&werewolf_manifest(), &bounds).unwrap();
    db.exec(
        "INSERT INTO principals (id, kind, name, description, created_at) VALUES ($1, 'app', 'Werewolf', 'a game', $2)",
        &[Val::Id(id), Val::Int(now)],
    )
    .await;
    db.exec(
        "INSERT INTO apps (app_id, manifest, updated_at) VALUES ($1, $2, $3)",
        &[
            Val::Id(id),
            Val::Json(serde_json::to_string(&manifest).unwrap()),
            Val::Int(now),
        ],
    )
    .await;
    db.exec(
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

/// An active task the creator started and the acker was invited to.
async fn task(db: &LegacyDb, app: Uuid, initiator: Uuid, invited: Uuid) -> Task {
    let id = Uuid::now_v7();
    let (created, updated) = (now_millis(), now_millis() + 5);
    db.exec(
        "INSERT INTO tasks (id, app_id, initiator_id, state, initial_conversation, created_at, updated_at) \
         VALUES ($1, $2, $3, 'active', 'village', $4, $5)",
        &[
            Val::Id(id),
            Val::Id(app),
            Val::Id(initiator),
            Val::Int(created),
            Val::Int(updated),
        ],
    )
    .await;
    let participants = vec![
        TaskParticipant {
            agent_id: initiator,
            role: TaskRole::Initiator,
        },
        TaskParticipant {
            agent_id: invited,
            role: TaskRole::Invited,
        },
    ];
    for p in &participants {
        db.exec(
            "INSERT INTO task_participants (task_id, agent_id, role) VALUES ($1, $2, $3)",
            &[
                Val::Id(id),
                Val::Id(p.agent_id),
                Val::Text(p.role.as_str().into()),
            ],
        )
        .await;
    }
    Task {
        id,
        app_id: app,
        initiator_id: initiator,
        state: TaskState::Active,
        participants,
        failure: None,
        created_at: rfc3339(created),
        updated_at: rfc3339(updated),
    }
}

/// The task's conversation from the manifest's template, both
/// participants joined before any message.
async fn conversation(db: &LegacyDb, task: &Task, app: Uuid) -> Conversation {
    let id = Uuid::now_v7();
    let at = now_millis();
    db.exec(
        "INSERT INTO conversations (id, kind, name, task_id, direct_key, created_by, created_at, last_message_seq, template_key) \
         VALUES ($1, 'task', 'village', $2, NULL, $3, $4, 2, 'werewolf-chat')",
        &[Val::Id(id), Val::Id(task.id), Val::Id(app), Val::Int(at)],
    )
    .await;
    for p in &task.participants {
        db.exec(
            "INSERT INTO conversation_participants (conversation_id, principal_id, joined_at, joined_seq) VALUES ($1, $2, $3, 0)",
            &[Val::Id(id), Val::Id(p.agent_id), Val::Int(at)],
        )
        .await;
    }
    Conversation {
        id,
        kind: ConversationKind::Task,
        name: Some("village".into()),
        key: Some("werewolf-chat".into()),
        task_id: Some(task.id),
        space_id: None,
        state: None,
        created_by: app,
        participants: task.participants.iter().map(|p| p.agent_id).collect(),
        last_message_seq: 2,
        created_at: rfc3339(at),
    }
}

/// A forwarded message to one recipient, not listed (`listed` = 0).
async fn message(
    db: &LegacyDb,
    conversation: &Conversation,
    seq: u64,
    sender: Uuid,
    reply_to: Option<Uuid>,
) -> Message {
    let at = now_millis();
    let m = Message {
        id: Uuid::now_v7(),
        conversation_id: conversation.id,
        seq,
        sender_id: sender,
        origin: Origin::Agent,
        parts: text(&format!("in the 0008 era, {seq}")),
        reply_to,
        created_at: rfc3339(at),
        thread_id: None,
        reply_to_interaction: None,
        card: None,
    };
    db.exec(
        "INSERT INTO messages (id, conversation_id, seq, sender_id, origin, parts, reply_to, verdict, created_at, \
         listed, recipient_count) VALUES ($1, $2, $3, $4, 'agent', $5, $6, 'forwarded', $7, FALSE, 1)",
        &[
            Val::Id(m.id),
            Val::Id(m.conversation_id),
            Val::Int(seq as i64),
            Val::Id(sender),
            Val::Json(serde_json::to_string(&m.parts).unwrap()),
            Val::OptId(reply_to),
            Val::Int(at),
        ],
    )
    .await;
    m
}

/// Lists the message's recipients (`listed` = 1), as a verdict forwarding
/// to a subset does.
async fn list_recipients(db: &LegacyDb, m: &Message, recipients: &[Uuid]) {
    db.exec(
        "UPDATE messages SET listed = TRUE WHERE id = $1",
        &[Val::Id(m.id)],
    )
    .await;
    for r in recipients {
        db.exec(
            "INSERT INTO message_recipients (message_id, recipient_id) VALUES ($1, $2)",
            &[Val::Id(m.id), Val::Id(*r)],
        )
        .await;
    }
}

/// The message's `agent/message/received` event for `to`: one payload row
/// naming the message, one index row at the stream's next seq; remembered
/// in `before` as the envelope `to` will be sent.
async fn message_event(db: &LegacyDb, before: &mut Before, m: &Message, to: Uuid) {
    let id = Uuid::now_v7();
    let at = now_millis();
    db.exec(
        "INSERT INTO event_payloads (event_id, type, occurred_at, message_id, refs) \
         VALUES ($1, 'agent/message/received', $2, $3, 1)",
        &[Val::Id(id), Val::Int(at), Val::Id(m.id)],
    )
    .await;
    db.exec(
        "UPDATE event_streams SET last_seq = last_seq + 1 WHERE audience = $1",
        &[Val::Id(to)],
    )
    .await;
    db.exec(
        "INSERT INTO event_index (stream, seq, payload) \
         SELECT s.stream, s.last_seq, p.id FROM event_streams s, event_payloads p \
         WHERE s.audience = $1 AND p.event_id = $2",
        &[Val::Id(to), Val::Id(id)],
    )
    .await;
    let stream = before.streams.get_mut(&to).expect("a member's stream");
    stream.last_seq += 1;
    let stored = StoredEvent {
        id,
        audience: to,
        seq: stream.last_seq,
        event_type: "agent/message/received".into(),
        occurred_at: at,
        payload: json!({ "message": m }).into(),
    };
    stream
        .envelopes
        .push(serde_json::to_value(stored.envelope()).unwrap());
}

/// A finished lease of `recipient` on the message.
async fn lease(db: &LegacyDb, m: &Message, recipient: Uuid, state: &str, reason: Option<&str>) {
    let at = now_millis();
    db.exec(
        "INSERT INTO leases (id, message_id, conversation_id, recipient_id, state, reason, expires_at, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        &[
            Val::Id(Uuid::now_v7()),
            Val::Id(m.id),
            Val::Id(m.conversation_id),
            Val::Id(recipient),
            Val::Text(state.into()),
            Val::OptText(reason.map(String::from)),
            Val::Int(at + 30_000),
            Val::Int(at),
            Val::Int(at + 10),
        ],
    )
    .await;
}
