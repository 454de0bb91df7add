//! The write path of one group of messages in each layout, and the
//! workloads: a fan-out to N, and a reader's inbox over several
//! conversations.

use std::collections::{BTreeMap, HashMap};

use serde_json::json;
use uuid::Uuid;

use super::Layout;
use crate::domain::event::rfc3339;
use crate::domain::message::{Message, Origin, Part};
use crate::domain::now_millis;
use crate::store::sql::{placeholders, to_json, Arg, Executor};
use crate::store::{StoreError, StoreResult};

pub const EVENT_TYPE: &str = "agent/message/received";

/// A participant and, in the thin layout, its stream's number.
#[derive(Clone, Debug)]
pub struct Member {
    pub id: Uuid,
    pub stream: i64,
}

pub struct Conversation {
    pub id: Uuid,
    pub members: Vec<Member>,
}

/// Conversations and the sends into them, `(conversation, sender)` by
/// index, each delivered to every participant but its sender (a group's
/// `forwardAllExceptSender`).
pub struct Workload {
    pub conversations: Vec<Conversation>,
    pub sends: Vec<(usize, usize)>,
    /// Multi-row statements number their placeholders on PostgreSQL and
    /// leave them anonymous on SQLite, as the stores' bulk writes do:
    /// sqlx's SQLite driver looks every `$N` up by name, and SQLite's
    /// lookup is a linear scan, so thousands of `$N` cost their square.
    pub postgres: bool,
}

fn members(n: usize) -> Vec<Member> {
    (0..n)
        .map(|_| Member {
            id: Uuid::new_v4(),
            stream: 0,
        })
        .collect()
}

impl Workload {
    /// One sender and `n` recipients in one group.
    pub fn fanout(n: usize, messages: usize) -> Workload {
        Workload {
            conversations: vec![Conversation {
                id: Uuid::new_v4(),
                members: members(n + 1),
            }],
            sends: vec![(0, 0); messages],
            postgres: false,
        }
    }

    /// A reader in `conversations` groups of `size`, the others distinct;
    /// senders take turns (the reader among them), conversations too, until
    /// the reader has received `events`.
    pub fn inbox(conversations: usize, size: usize, events: usize) -> Workload {
        let reader = members(1);
        let conversations: Vec<Conversation> = (0..conversations)
            .map(|_| Conversation {
                id: Uuid::new_v4(),
                members: reader.iter().cloned().chain(members(size - 1)).collect(),
            })
            .collect();
        let mut w = Workload {
            sends: Vec::new(),
            conversations,
            postgres: false,
        };
        let mut received = 0;
        while received < events {
            let k = w.sends.len();
            let send = (
                k % w.conversations.len(),
                (k / w.conversations.len()) % size,
            );
            received += usize::from(send.1 != 0);
            w.sends.push(send);
        }
        w
    }

    pub fn reader(&self) -> Member {
        self.conversations[0].members[0].clone()
    }

    pub fn deliveries(&self) -> usize {
        self.sends
            .iter()
            .map(|(c, _)| self.conversations[*c].members.len() - 1)
            .sum()
    }

    pub fn received_by(&self, principal: Uuid) -> usize {
        self.sends
            .iter()
            .filter(|(c, s)| {
                let m = &self.conversations[*c].members;
                m[*s].id != principal && m.iter().any(|p| p.id == principal)
            })
            .count()
    }

    fn recipients(&self, (c, s): (usize, usize)) -> impl Iterator<Item = &Member> {
        let sender = self.conversations[c].members[s].id;
        self.conversations[c]
            .members
            .iter()
            .filter(move |m| m.id != sender)
    }
}

/// `n` placeholders from the `first`th, in the dialect's multi-row form.
fn marks(postgres: bool, first: usize, n: usize) -> String {
    if postgres {
        placeholders(first, n)
    } else {
        vec!["?"; n].join(", ")
    }
}

/// Rows inserted `per_row` values at a time, at most 1000 rows a statement.
async fn insert_rows(
    ex: &mut dyn Executor,
    postgres: bool,
    head: &str,
    per_row: usize,
    args: &[Arg<'_>],
) -> StoreResult<()> {
    for chunk in args.chunks(per_row * 1000) {
        let rows: Vec<String> = (0..chunk.len() / per_row)
            .map(|r| format!("({})", marks(postgres, 1 + r * per_row, per_row)))
            .collect();
        ex.execute(&format!("{head} VALUES {}", rows.join(", ")), chunk)
            .await?;
    }
    Ok(())
}

/// What exists before the first send: conversations, participants, and
/// in the thin layout every principal's stream number.
pub async fn setup(ex: &mut dyn Executor, layout: Layout, w: &mut Workload) -> StoreResult<()> {
    let now = now_millis();
    for c in &w.conversations {
        ex.execute(
            "INSERT INTO conversations (id, kind, created_by, created_at) VALUES ($1, 'group', $2, $3)",
            &[Arg::Id(c.id), Arg::Id(c.members[0].id), Arg::Int(now)],
        )
        .await?;
        let args: Vec<Arg> = c
            .members
            .iter()
            .flat_map(|m| [Arg::Id(c.id), Arg::Id(m.id), Arg::Int(now)])
            .collect();
        insert_rows(
            ex,
            w.postgres,
            "INSERT INTO conversation_participants (conversation_id, principal_id, joined_at)",
            3,
            &args,
        )
        .await?;
    }
    if layout == Layout::Stream {
        return Ok(());
    }
    let mut principals: Vec<Uuid> = w
        .conversations
        .iter()
        .flat_map(|c| c.members.iter().map(|m| m.id))
        .collect();
    principals.sort();
    principals.dedup();
    let args: Vec<Arg> = principals.iter().map(|p| Arg::Id(*p)).collect();
    insert_rows(
        ex,
        w.postgres,
        "INSERT INTO event_streams (audience)",
        1,
        &args,
    )
    .await?;
    if layout == Layout::Thin {
        let rows = ex
            .fetch_all("SELECT stream, audience FROM event_streams", &[])
            .await?;
        let mut stream_of = HashMap::new();
        for r in rows {
            stream_of.insert(r.id("audience")?, r.int("stream")?);
        }
        for m in w
            .conversations
            .iter_mut()
            .flat_map(|c| c.members.iter_mut())
        {
            m.stream = stream_of[&m.id];
        }
    }
    Ok(())
}

/// One transaction's messages: each conversation's seqs, the messages
/// stored once, then what the layout writes per delivery.
pub async fn write_group(
    ex: &mut dyn Executor,
    layout: Layout,
    w: &Workload,
    group: &[(usize, usize)],
) -> StoreResult<()> {
    let now = now_millis();
    let messages = group_messages(ex, w, group, now).await?;
    let first_position = match layout {
        Layout::Stream => Some(positions(ex, group.len()).await?),
        _ => None,
    };
    insert_messages(ex, w, layout, &messages, now, first_position).await?;
    match layout {
        Layout::Today => {
            for (m, send) in messages.iter().zip(group) {
                let recipients: Vec<Uuid> = w.recipients(*send).map(|r| r.id).collect();
                ex.insert_recipients(m.id, &recipients).await?;
            }
            append_today(ex, w, group, &messages, now).await?;
        }
        Layout::Thin => append_thin(ex, w, group, &messages, now).await?,
        // Nothing per delivery: the message row is the stream entry.
        Layout::Stream => {}
    }
    Ok(())
}

/// The group's messages with their conversation seqs (one update per
/// conversation, as group commit does), text of a typical 400 bytes.
async fn group_messages(
    ex: &mut dyn Executor,
    w: &Workload,
    group: &[(usize, usize)],
    now: i64,
) -> StoreResult<Vec<Message>> {
    let mut next_seq: BTreeMap<usize, i64> = BTreeMap::new();
    for (c, _) in group {
        *next_seq.entry(*c).or_default() += 1;
    }
    for (c, count) in next_seq.iter_mut() {
        let last = ex
            .fetch_optional(
                "UPDATE conversations SET last_message_seq = last_message_seq + $1 WHERE id = $2 \
                 RETURNING last_message_seq",
                &[Arg::Int(*count), Arg::Id(w.conversations[*c].id)],
            )
            .await?
            .ok_or(StoreError::NotFound)?
            .int("last_message_seq")?;
        *count = last - *count + 1;
    }
    let text = "x".repeat(400);
    Ok(group
        .iter()
        .map(|(c, s)| {
            let seq = next_seq.get_mut(c).expect("counted");
            *seq += 1;
            Message {
                id: Uuid::now_v7(),
                conversation_id: w.conversations[*c].id,
                seq: (*seq - 1) as u64,
                sender_id: w.conversations[*c].members[*s].id,
                origin: Origin::Agent,
                parts: vec![Part::Text { text: text.clone() }],
                reply_to: None,
                thread_id: None,
                created_at: rfc3339(now),
                reply_to_interaction: None,
                card: None,
            }
        })
        .collect())
}

/// Hub-wide positions for `count` forwarded messages: the first of them.
async fn positions(ex: &mut dyn Executor, count: usize) -> StoreResult<i64> {
    let last = ex
        .fetch_optional(
            "UPDATE hub_log SET last_position = last_position + $1 WHERE id = 1 \
             RETURNING last_position",
            &[Arg::Int(count as i64)],
        )
        .await?
        .ok_or(StoreError::NotFound)?
        .int("last_position")?;
    Ok(last - count as i64 + 1)
}

async fn insert_messages(
    ex: &mut dyn Executor,
    w: &Workload,
    layout: Layout,
    messages: &[Message],
    now: i64,
    first_position: Option<i64>,
) -> StoreResult<()> {
    let parts: Vec<String> = messages
        .iter()
        .map(|m| to_json(&m.parts))
        .collect::<StoreResult<_>>()?;
    let mut head = String::from(
        "INSERT INTO messages (id, conversation_id, seq, sender_id, origin, parts, verdict, created_at",
    );
    let mut per_row = 8;
    if layout != Layout::Today {
        head.push_str(", listed");
        per_row += 1;
    }
    if first_position.is_some() {
        head.push_str(", position");
        per_row += 1;
    }
    head.push(')');
    let mut args = Vec::with_capacity(messages.len() * per_row);
    for (k, (m, parts)) in messages.iter().zip(&parts).enumerate() {
        args.extend([
            Arg::Id(m.id),
            Arg::Id(m.conversation_id),
            Arg::Int(m.seq as i64),
            Arg::Id(m.sender_id),
            Arg::Text(m.origin.as_str()),
            Arg::Json(parts),
            Arg::Text("forwarded"),
            Arg::Int(now),
        ]);
        if layout != Layout::Today {
            // Every participant but the sender: no recipient rows.
            args.push(Arg::Bool(false));
        }
        if let Some(first) = first_position {
            args.push(Arg::Int(first + k as i64));
        }
    }
    insert_rows(ex, w.postgres, &head, per_row, &args).await
}

/// The layout before ADR 0018, as the stores wrote it: per 400 audiences
/// one upsert handing out seqs, then one `events` row per delivery with its
/// own id and a full copy of the payload.
async fn append_today(
    ex: &mut dyn Executor,
    w: &Workload,
    group: &[(usize, usize)],
    messages: &[Message],
    now: i64,
) -> StoreResult<()> {
    let mut count: BTreeMap<Uuid, i64> = BTreeMap::new();
    for send in group {
        for r in w.recipients(*send) {
            *count.entry(r.id).or_default() += 1;
        }
    }
    let mut next = HashMap::with_capacity(count.len());
    let pairs: Vec<(Uuid, i64)> = count.iter().map(|(a, n)| (*a, *n)).collect();
    for chunk in pairs.chunks(400) {
        let values: Vec<String> = (0..chunk.len())
            .map(|r| format!("({})", marks(w.postgres, 1 + 2 * r, 2)))
            .collect();
        let args: Vec<Arg> = chunk
            .iter()
            .flat_map(|(a, n)| [Arg::Id(*a), Arg::Int(*n)])
            .collect();
        let sql = format!(
            "INSERT INTO event_streams (audience, last_seq) VALUES {} \
             ON CONFLICT (audience) DO UPDATE SET last_seq = event_streams.last_seq + excluded.last_seq \
             RETURNING audience, last_seq",
            values.join(", ")
        );
        for r in ex.fetch_all(&sql, &args).await? {
            let audience = r.id("audience")?;
            next.insert(audience, r.int("last_seq")? - count[&audience] + 1);
        }
    }
    let payloads: Vec<String> = messages
        .iter()
        .map(|m| to_json(&json!({ "message": m })))
        .collect::<StoreResult<_>>()?;
    let mut ids = Vec::new();
    let mut seqs = Vec::new();
    for send in group {
        for r in w.recipients(*send) {
            let seq = next
                .get_mut(&r.id)
                .ok_or_else(|| StoreError::Corrupt("an audience was not advanced".into()))?;
            ids.push(Uuid::now_v7());
            seqs.push(*seq);
            *seq += 1;
        }
    }
    let mut args = Vec::with_capacity(ids.len() * 6);
    let mut k = 0;
    for (m, send) in group.iter().enumerate() {
        for r in w.recipients(*send) {
            args.extend([
                Arg::Id(r.id),
                Arg::Int(seqs[k]),
                Arg::Id(ids[k]),
                Arg::Text(EVENT_TYPE),
                Arg::Int(now),
                Arg::Json(&payloads[m]),
            ]);
            k += 1;
        }
    }
    insert_rows(
        ex,
        w.postgres,
        "INSERT INTO events (audience, seq, id, type, occurred_at, payload)",
        6,
        &args,
    )
    .await
}

/// Candidate A: one header row per message, each recipient's stream
/// advanced by its count in one statement, one thin index row per delivery.
async fn append_thin(
    ex: &mut dyn Executor,
    w: &Workload,
    group: &[(usize, usize)],
    messages: &[Message],
    now: i64,
) -> StoreResult<()> {
    let event_ids: Vec<Uuid> = messages.iter().map(|_| Uuid::now_v7()).collect();
    let values: Vec<String> = (0..messages.len())
        .map(|r| format!("({})", marks(w.postgres, 1 + 5 * r, 5)))
        .collect();
    let args: Vec<Arg> = messages
        .iter()
        .zip(&event_ids)
        .zip(group)
        .flat_map(|((m, e), send)| {
            [
                Arg::Id(*e),
                Arg::Text(EVENT_TYPE),
                Arg::Int(now),
                Arg::Id(m.id),
                Arg::Int(w.recipients(*send).count() as i64),
            ]
        })
        .collect();
    let sql = format!(
        "INSERT INTO event_payloads (event_id, type, occurred_at, message_id, refs) VALUES {} \
         RETURNING id, message_id",
        values.join(", ")
    );
    let mut payload_of = HashMap::with_capacity(messages.len());
    for r in ex.fetch_all(&sql, &args).await? {
        payload_of.insert(r.id("message_id")?, r.int("id")?);
    }
    let mut count: BTreeMap<i64, i64> = BTreeMap::new();
    for send in group {
        for r in w.recipients(*send) {
            *count.entry(r.stream).or_default() += 1;
        }
    }
    let mut next = advance_streams(ex, w.postgres, &count).await?;
    let mut args = Vec::new();
    for (m, send) in messages.iter().zip(group) {
        for r in w.recipients(*send) {
            let seq = next.get_mut(&r.stream).expect("advanced");
            args.extend([
                Arg::Int(r.stream),
                Arg::Int(*seq),
                Arg::Int(payload_of[&m.id]),
            ]);
            *seq += 1;
        }
    }
    insert_rows(
        ex,
        w.postgres,
        "INSERT INTO event_index (stream, seq, payload)",
        3,
        &args,
    )
    .await
}

/// Adds each stream's count to its `last_seq` (400 streams a statement);
/// returns each stream's first new seq.
async fn advance_streams(
    ex: &mut dyn Executor,
    postgres: bool,
    count: &BTreeMap<i64, i64>,
) -> StoreResult<HashMap<i64, i64>> {
    let pairs: Vec<(i64, i64)> = count.iter().map(|(s, n)| (*s, *n)).collect();
    let mut first = HashMap::with_capacity(pairs.len());
    for chunk in pairs.chunks(400) {
        let values: Vec<String> = (0..chunk.len())
            .map(|r| format!("({})", marks(postgres, 1 + 2 * r, 2)))
            .collect();
        let args: Vec<Arg> = chunk
            .iter()
            .flat_map(|(s, n)| [Arg::Int(*s), Arg::Int(*n)])
            .collect();
        let sql = format!(
            "UPDATE event_streams SET last_seq = event_streams.last_seq + c.column2 \
             FROM (VALUES {}) AS c WHERE event_streams.stream = c.column1 \
             RETURNING stream, last_seq",
            values.join(", ")
        );
        for r in ex.fetch_all(&sql, &args).await? {
            let stream = r.int("stream")?;
            first.insert(stream, r.int("last_seq")? - count[&stream] + 1);
        }
    }
    if first.len() != count.len() {
        return Err(StoreError::Corrupt("a stream was not advanced".into()));
    }
    Ok(first)
}
