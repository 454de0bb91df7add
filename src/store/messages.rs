//! Message records and the message queries both backends share. The
//! group-committed writes of many sends at once are per dialect.

use std::sync::Arc;

use uuid::Uuid;

use super::components::{write_card, NewCard};
use super::jobs::{insert_job, NewJob};
use super::recipients::{listings, seen_by};
use super::sql::{parsed, to_json, Arg, Executor, Row};
use super::{StoreError, StoreResult};
use crate::domain::event::{rfc3339, NewEvent, StoredEvent};
use crate::domain::message::{Message, Origin, Part};
use crate::domain::Millis;

/// What happens to a message's fan-out when it is stored.
#[derive(Clone, Debug)]
pub enum Fanout {
    /// Decided already: deliver `event_type` to these recipients in the same
    /// transaction.
    Forward {
        recipients: Vec<Uuid>,
        event_type: &'static str,
        /// Which of `recipients` are people, whose copy is named for them.
        people: PersonCopies,
        /// The apps that hear the message without being its recipients (a
        /// channel's app readers, ADR 0031 §7a): no delivery counts them.
        apps: AppCopies,
    },
    /// A policy decides later; the message waits as `pending`.
    Pending,
}

/// The recipients of a forward who are people, and the event type their
/// copies take (ADR 0020 §1: an event is named by its recipient's kind).
/// They share one more payload row, never one per person (ADR 0018).
#[derive(Clone, Debug, Default)]
pub struct PersonCopies {
    pub people: Vec<Uuid>,
    pub event_type: &'static str,
}

impl PersonCopies {
    /// No person among the recipients: every copy is the agents' event.
    pub const NONE: PersonCopies = PersonCopies {
        people: Vec::new(),
        event_type: "",
    };
}

/// The apps a forward also reaches, outside its recipients (so in no
/// `delivery` count), and the event type of their copies: one more event
/// sharing the payload, never one per app (ADR 0018, ADR 0031 §7a).
#[derive(Clone, Debug, Default)]
pub struct AppCopies {
    pub apps: Vec<Uuid>,
    pub event_type: &'static str,
}

impl AppCopies {
    /// No app hears the message beside its recipients.
    pub const NONE: AppCopies = AppCopies {
        apps: Vec::new(),
        event_type: "",
    };
}

/// A forward's events: the recipients' copies by kind, then the apps'.
pub(super) fn forward_copies(
    fanout: &Fanout,
    message_id: Uuid,
    payload: Arc<serde_json::Value>,
) -> Vec<NewEvent> {
    let Fanout::Forward {
        recipients,
        event_type,
        people,
        apps,
    } = fanout
    else {
        return Vec::new();
    };
    let mut events = NewEvent::message_copies_by_kind(
        recipients,
        event_type,
        (&people.people, people.event_type),
        message_id,
        payload.clone(),
    );
    if !apps.apps.is_empty() {
        events.extend(NewEvent::message_copies(
            &apps.apps,
            apps.event_type,
            message_id,
            payload,
        ));
    }
    events
}

#[derive(Clone, Debug)]
pub struct NewMessage {
    pub id: Uuid,
    pub conversation_id: Uuid,
    pub sender_id: Uuid,
    pub origin: Origin,
    pub parts: Vec<Part>,
    pub reply_to: Option<Uuid>,
    /// A channel thread's root (checked by the sender's handler).
    pub thread_id: Option<Uuid>,
    /// A channel send (ADR 0020 §2): its readers are its levels, so a
    /// forward writes no recipient rows, whoever it reaches.
    pub in_channel: bool,
    pub client_msg_id: Option<String>,
    pub request_hash: Option<String>,
    pub created_at: Millis,
    pub fanout: Fanout,
    /// Written with the message: with `Fanout::Pending` the job that will
    /// decide it; a beatless app's `hosted_wake` for each that hears it.
    pub jobs: Vec<NewJob>,
    /// An app's card (ADR 0027 §5): written with the message, never in a
    /// send group (`ConversationStore::insert_message` takes it alone).
    pub card: Option<NewCard>,
    /// The interaction an app's reply answers.
    pub reply_to_interaction: Option<Uuid>,
}

impl NewMessage {
    /// A card or a reply: written in its own transaction, not a group's.
    pub fn writes_alone(&self) -> bool {
        self.card.is_some() || self.reply_to_interaction.is_some()
    }
}

/// A message verdict, applied only while the message is pending.
#[derive(Clone, Debug)]
pub enum MessageOutcome {
    Forward { recipients: Vec<Uuid> },
    Block { reason: String },
}

impl MessageOutcome {
    /// How many the verdict forwards to: none when it blocks.
    pub fn recipient_count(&self) -> i64 {
        match self {
            MessageOutcome::Forward { recipients } => recipients.len() as i64,
            MessageOutcome::Block { .. } => 0,
        }
    }
}

/// What became of a verdict handed to
/// [`ConversationStore::decide_message`](super::ConversationStore::decide_message).
#[derive(Debug)]
pub enum MessageDecided {
    /// Recorded, with the effects' events.
    Applied(Vec<StoredEvent>),
    /// The message was decided already; only the job was finished.
    AlreadyDecided,
    /// A forward found the task no longer active (closed or failed while
    /// the hook was deciding), or its app's installation not active
    /// (suspended or uninstalled meanwhile, ADR 0023 §7). Nothing was
    /// written; decide again.
    NotApplicable,
}

/// The stored fan-out decision of a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pending,
    Forwarded { recipients: u32 },
    Blocked { reason: String },
}

#[derive(Clone, Debug)]
pub enum InsertedMessage {
    Inserted {
        message: Message,
        verdict: Verdict,
        events: Vec<StoredEvent>,
    },
    /// The sender already stored a message with this `clientMsgId`.
    Duplicate {
        message: Message,
        verdict: Verdict,
        request_hash: Option<String>,
    },
}

/// A page of a conversation's history as one viewer may see it.
#[derive(Clone, Copy, Debug)]
pub struct MessagePage {
    pub viewer: Uuid,
    /// Messages with a greater seq, oldest first.
    pub after: Option<u64>,
    /// Messages with a smaller seq, newest first before reversal.
    pub before: Option<u64>,
    pub limit: u32,
    pub place: PagePlace,
}

/// Which of a conversation's messages a page holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PagePlace {
    /// Those the viewer sent or received (direct, group, task).
    Seen,
    /// A channel: its reader sees the whole history of one thread, the
    /// main one (`None`) or the one under a root.
    Channel { thread: Option<Uuid> },
    /// A task conversation read by the app that owns the task: every
    /// decided message (its gate decided each); none still pending.
    Decided,
}

pub(super) const MESSAGE_COLUMNS: &str =
    "m.id, m.conversation_id, m.seq, m.sender_id, m.origin, m.parts, m.reply_to, m.thread_id, \
     m.request_hash, m.verdict, m.verdict_reason, m.created_at, m.recipient_count AS recipients, \
     m.reply_to_interaction, CAST(m.card AS TEXT) AS card";

pub(super) fn message_row(row: &Row) -> StoreResult<(Message, Verdict, Option<String>)> {
    let message = Message {
        id: row.id("id")?,
        conversation_id: row.id("conversation_id")?,
        seq: row.int("seq")? as u64,
        sender_id: row.id("sender_id")?,
        origin: parsed(row.text("origin")?, "origin", Origin::parse)?,
        parts: row.decoded("parts")?,
        reply_to: row.opt_id("reply_to")?,
        thread_id: row.opt_id("thread_id")?,
        created_at: rfc3339(row.int("created_at")?),
        reply_to_interaction: row.opt_id("reply_to_interaction")?,
        card: row
            .opt_text("card")?
            .map(|c| serde_json::from_str(&c).map_err(super::sql::json_err))
            .transpose()?,
    };
    let verdict = verdict_of(
        row.text("verdict")?,
        row.opt_text("verdict_reason")?,
        row.int("recipients")?,
    )?;
    Ok((message, verdict, row.opt_text("request_hash")?))
}

fn verdict_of(verdict: String, reason: Option<String>, recipients: i64) -> StoreResult<Verdict> {
    match verdict.as_str() {
        "pending" => Ok(Verdict::Pending),
        "forwarded" => Ok(Verdict::Forwarded {
            recipients: recipients as u32,
        }),
        "blocked" => Ok(Verdict::Blocked {
            reason: reason.unwrap_or_default(),
        }),
        other => Err(StoreError::Corrupt(format!("bad verdict {other:?}"))),
    }
}

pub(super) async fn find_by_client_id(
    ex: &mut dyn Executor,
    sender: Uuid,
    client_msg_id: &str,
) -> StoreResult<Option<InsertedMessage>> {
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.sender_id = $1 AND m.client_msg_id = $2"
    );
    let row = ex
        .fetch_optional(&sql, &[Arg::Id(sender), Arg::Text(client_msg_id)])
        .await?;
    row.map(|r| {
        let (message, verdict, request_hash) = message_row(&r)?;
        Ok(InsertedMessage::Duplicate {
            message,
            verdict,
            request_hash,
        })
    })
    .transpose()
}

/// The messages of a conversation that `page.viewer` sent or received,
/// oldest first.
pub(super) async fn page(
    ex: &mut dyn Executor,
    conversation_id: Uuid,
    page: MessagePage,
) -> StoreResult<Vec<Message>> {
    let visible = match page.place {
        PagePlace::Seen => format!("m.conversation_id = $1 AND {}", seen_by(2)),
        // `$2` is still bound (the viewer), so the statement keeps its
        // arguments; a thread is `$5`.
        PagePlace::Channel { thread: None } => {
            "m.conversation_id = $1 AND $2 = $2 AND m.thread_id IS NULL".to_string()
        }
        PagePlace::Channel { thread: Some(_) } => {
            "m.conversation_id = $1 AND $2 = $2 AND m.thread_id = $5".to_string()
        }
        PagePlace::Decided => {
            "m.conversation_id = $1 AND $2 = $2 AND m.verdict <> 'pending'".to_string()
        }
    };
    let (cond, order, cursor) = match (page.after, page.before) {
        (_, Some(before)) => ("m.seq < $3", "DESC", before as i64),
        (after, None) => ("m.seq > $3", "ASC", after.unwrap_or(0) as i64),
    };
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages m WHERE {visible} AND {cond} ORDER BY m.seq {order} LIMIT $4"
    );
    let args = [
        Arg::Id(conversation_id),
        Arg::Id(page.viewer),
        Arg::Int(cursor),
        Arg::Int(i64::from(page.limit)),
    ];
    let thread = match page.place {
        PagePlace::Channel { thread: Some(t) } => Some(t),
        _ => None,
    };
    let rows = match thread {
        Some(t) => {
            let mut args = args.to_vec();
            args.push(Arg::Id(t));
            ex.fetch_all(&sql, &args).await?
        }
        None => ex.fetch_all(&sql, &args).await?,
    };
    let mut out: Vec<Message> = rows
        .iter()
        .map(|r| message_row(r).map(|(m, _, _)| m))
        .collect::<StoreResult<_>>()?;
    if order == "DESC" {
        out.reverse();
    }
    Ok(out)
}

/// Whether the message still waits for its verdict.
pub(super) async fn is_pending(ex: &mut dyn Executor, message_id: Uuid) -> StoreResult<bool> {
    let row = ex
        .fetch_optional(
            "SELECT verdict FROM messages WHERE id = $1",
            &[Arg::Id(message_id)],
        )
        .await?;
    Ok(match row {
        Some(r) => r.text("verdict")? == "pending",
        None => false,
    })
}

/// The verdict column and the verdict a new message starts with.
fn initial_verdict(m: &NewMessage) -> (&'static str, Verdict) {
    match &m.fanout {
        Fanout::Forward { recipients, .. } => (
            "forwarded",
            Verdict::Forwarded {
                recipients: recipients.len() as u32,
            },
        ),
        Fanout::Pending => ("pending", Verdict::Pending),
    }
}

/// One message inside the caller's transaction: the path for a lone send,
/// and the fallback when a group's combined write fails.
pub(super) async fn insert_one(
    ex: &mut dyn Executor,
    m: &NewMessage,
) -> StoreResult<InsertedMessage> {
    let seq = ex
        .fetch_optional(
            "UPDATE conversations SET last_message_seq = last_message_seq + 1 WHERE id = $1 RETURNING last_message_seq",
            &[Arg::Id(m.conversation_id)],
        )
        .await?
        .ok_or(StoreError::NotFound)?
        .int("last_message_seq")?;
    let (verdict_col, verdict) = initial_verdict(m);
    let listed = listings(ex, &[m]).await?[0];
    let parts = to_json(&m.parts)?;
    ex.execute(
        "INSERT INTO messages (id, conversation_id, seq, sender_id, origin, parts, reply_to, client_msg_id, \
         request_hash, verdict, created_at, listed, recipient_count, thread_id) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
        &[
            Arg::Id(m.id),
            Arg::Id(m.conversation_id),
            Arg::Int(seq),
            Arg::Id(m.sender_id),
            Arg::Text(m.origin.as_str()),
            Arg::Json(&parts),
            Arg::OptId(m.reply_to),
            Arg::OptText(m.client_msg_id.as_deref()),
            Arg::OptText(m.request_hash.as_deref()),
            Arg::Text(verdict_col),
            Arg::Int(m.created_at),
            Arg::Bool(listed),
            Arg::Int(recipient_count(m)),
            Arg::OptId(m.thread_id),
        ],
    )
    .await?;
    let message = Message {
        id: m.id,
        conversation_id: m.conversation_id,
        seq: seq as u64,
        sender_id: m.sender_id,
        origin: m.origin,
        parts: m.parts.clone(),
        reply_to: m.reply_to,
        thread_id: m.thread_id,
        created_at: rfc3339(m.created_at),
        reply_to_interaction: m.reply_to_interaction,
        card: m.card.as_ref().map(|c| c.card.clone()),
    };
    for job in &m.jobs {
        insert_job(ex, job, m.created_at).await?;
    }
    if m.writes_alone() {
        write_card(ex, m).await?;
    }
    let events = deliver(ex, m, &message, listed).await?;
    Ok(InsertedMessage::Inserted {
        message,
        verdict,
        events,
    })
}

/// How many a new message was forwarded to: none while pending.
pub fn recipient_count(m: &NewMessage) -> i64 {
    match &m.fanout {
        Fanout::Forward { recipients, .. } => recipients.len() as i64,
        Fanout::Pending => 0,
    }
}

/// A forwarded message's recipient rows (when listed) and its events.
async fn deliver(
    ex: &mut dyn Executor,
    m: &NewMessage,
    message: &Message,
    listed: bool,
) -> StoreResult<Vec<StoredEvent>> {
    let Fanout::Forward { recipients, .. } = &m.fanout else {
        return Ok(Vec::new());
    };
    if listed {
        ex.insert_recipients(m.id, recipients).await?;
    }
    let payload = Arc::new(serde_json::json!({ "message": message }));
    let new = forward_copies(&m.fanout, m.id, payload);
    ex.append_events(&new, m.created_at).await
}

impl super::commit_feed::Committed for InsertedMessage {
    fn committed_events(&self) -> &[StoredEvent] {
        match self {
            InsertedMessage::Inserted { events, .. } => events,
            InsertedMessage::Duplicate { .. } => &[],
        }
    }
}

impl super::commit_feed::Committed for MessageDecided {
    fn committed_events(&self) -> &[StoredEvent] {
        match self {
            MessageDecided::Applied(events) => events,
            _ => &[],
        }
    }
}
