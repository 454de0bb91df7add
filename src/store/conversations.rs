//! Conversations and their messages: one area, one trait. The message
//! records and queries are in [`super::messages`].

use async_trait::async_trait;
use uuid::Uuid;

use super::effects::Effects;
use super::group_sends::SendCommit;
use super::group_verdicts::{VerdictCommit, VerdictWrite};
use super::messages::{
    find_by_client_id, message_row, InsertedMessage, MessageDecided, MessageOutcome, MessagePage,
    NewMessage, Verdict, MESSAGE_COLUMNS,
};
use super::recipients::received_by;
use super::sql::{is_unique_violation, parsed, Arg, Database, Executor, Keyset, Row};
use super::{StoreError, StoreResult};
use crate::domain::conversation::{ChannelState, Conversation, ConversationKind};
use crate::domain::event::{rfc3339, NewEvent, StoredEvent};
use crate::domain::message::Message;
use crate::domain::Millis;

#[derive(Clone, Debug)]
pub struct NewConversation {
    pub id: Uuid,
    pub kind: ConversationKind,
    pub name: Option<String>,
    pub task_id: Option<Uuid>,
    /// Set for direct conversations: at most one per pair.
    pub direct_key: Option<String>,
    /// The manifest template a task conversation comes from.
    pub template_key: Option<String>,
    pub created_by: Uuid,
    pub participants: Vec<Uuid>,
    pub created_at: Millis,
}

impl NewConversation {
    /// The conversation as readers will see it once stored.
    pub fn view(&self) -> Conversation {
        Conversation {
            id: self.id,
            kind: self.kind,
            name: self.name.clone(),
            key: self.template_key.clone(),
            task_id: self.task_id,
            space_id: None,
            state: None,
            created_by: self.created_by,
            participants: self.participants.clone(),
            last_message_seq: 0,
            created_at: rfc3339(self.created_at),
        }
    }
}

#[derive(Clone, Debug)]
pub enum CreatedConversation {
    Created(Conversation, Vec<StoredEvent>),
    /// A direct conversation for this pair already existed.
    Existing(Conversation),
}

#[async_trait]
pub trait ConversationStore: Send + Sync + 'static {
    /// Stores a conversation, its participants and `events` in one transaction.
    async fn create_conversation(
        &self,
        c: &NewConversation,
        events: &[NewEvent],
    ) -> StoreResult<CreatedConversation>;

    async fn conversation(&self, id: Uuid) -> StoreResult<Option<Conversation>>;

    /// Conversations `principal` takes part in, ordered by id (UUIDv7, so by
    /// creation), after the given id.
    async fn conversations_of(
        &self,
        principal: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<Conversation>>;

    /// Adds participants to a conversation with the events announcing it.
    async fn add_participants(
        &self,
        conversation_id: Uuid,
        agents: &[Uuid],
        events: &[NewEvent],
        now: Millis,
    ) -> StoreResult<Vec<StoredEvent>>;

    /// Stores a message with the next seq of its conversation and, for a
    /// decided fan-out, its recipients and their events, in one transaction.
    /// A send group publishes its events; a card (`NewMessage::writes_alone`)
    /// is written in its own transaction and its caller publishes them.
    async fn insert_message(&self, m: &NewMessage) -> StoreResult<InsertedMessage>;

    async fn message(&self, id: Uuid) -> StoreResult<Option<(Message, Verdict)>>;

    /// The messages of a conversation that `page.viewer` sent or received,
    /// oldest first.
    async fn messages(&self, conversation_id: Uuid, page: MessagePage)
        -> StoreResult<Vec<Message>>;

    /// Records a pending message's verdict, its recipients and `effects`.
    /// A forward is recorded only while the message's task is active, checked
    /// in the same transaction (and, on PostgreSQL, with the task row locked
    /// against a concurrent close), so a task closed during a hook call never
    /// forwards.
    async fn decide_message(
        &self,
        message_id: Uuid,
        outcome: &MessageOutcome,
        effects: &Effects,
        now: Millis,
    ) -> StoreResult<MessageDecided>;

    async fn is_recipient(&self, message_id: Uuid, agent: Uuid) -> StoreResult<bool>;
}

/// How a verdict write went, before recipients and effects.
pub enum Marked {
    Applied,
    /// Not pending any more: only the job is finished.
    AlreadyDecided,
    /// A forward whose task, or whose app's installation, is not active:
    /// roll back, decide again.
    NotApplicable,
}

/// What differs per dialect in this area.
pub trait ConversationDialect {
    /// The group committer sends go through (ADR 0013).
    fn sends(&self) -> &SendCommit;
    /// The group committer verdicts go through.
    fn verdicts(&self) -> &VerdictCommit;
}

pub(super) const CONVERSATION_COLUMNS: &str =
    "c.id, c.kind, c.name, c.task_id, c.template_key, c.created_by, c.created_at, c.last_message_seq, \
     c.space_id, c.state";

/// A card or a reply: its own transaction, outside the send groups (whose
/// multi-row writes know no components); a retry with its `clientMsgId`
/// answers the stored message.
async fn insert_alone<D: Database>(db: &D, m: &NewMessage) -> StoreResult<InsertedMessage> {
    let mut tx = db.begin().await?;
    if let Some(client_id) = &m.client_msg_id {
        if let Some(dup) = find_by_client_id(&mut *tx, m.sender_id, client_id).await? {
            tx.rollback().await?;
            return Ok(dup);
        }
    }
    let done = super::messages::insert_one(&mut *tx, m).await?;
    tx.commit().await?;
    Ok(done)
}

pub(super) async fn insert_conversation(
    ex: &mut dyn Executor,
    c: &NewConversation,
) -> StoreResult<()> {
    insert_conversation_row(ex, c).await?;
    insert_participants(ex, c).await
}

async fn insert_conversation_row(ex: &mut dyn Executor, c: &NewConversation) -> StoreResult<()> {
    ex.execute(
        "INSERT INTO conversations (id, kind, name, task_id, direct_key, created_by, created_at, template_key) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        &[
            Arg::Id(c.id),
            Arg::Text(c.kind.as_str()),
            Arg::OptText(c.name.as_deref()),
            Arg::OptId(c.task_id),
            Arg::OptText(c.direct_key.as_deref()),
            Arg::Id(c.created_by),
            Arg::Int(c.created_at),
            Arg::OptText(c.template_key.as_deref()),
        ],
    )
    .await?;
    Ok(())
}

/// The conversation's last message seq, with its row held (on
/// PostgreSQL) until commit: a participant joining now has seen exactly the
/// messages up to it, and a send after it counts the new participant (see
/// [`super::recipients`]).
pub(super) async fn hold_seq(ex: &mut dyn Executor, conversation_id: Uuid) -> StoreResult<i64> {
    ex.fetch_optional(
        "UPDATE conversations SET last_message_seq = last_message_seq WHERE id = $1 \
         RETURNING last_message_seq",
        &[Arg::Id(conversation_id)],
    )
    .await?
    .ok_or(StoreError::NotFound)?
    .int("last_message_seq")
}

async fn insert_participants(ex: &mut dyn Executor, c: &NewConversation) -> StoreResult<()> {
    for p in &c.participants {
        ex.execute(
            "INSERT INTO conversation_participants (conversation_id, principal_id, joined_at) VALUES ($1, $2, $3)",
            &[Arg::Id(c.id), Arg::Id(*p), Arg::Int(c.created_at)],
        )
        .await?;
    }
    Ok(())
}

/// A conversation row with its participants, read on the same connection.
pub(super) async fn load_conversation(
    ex: &mut dyn Executor,
    row: &Row,
) -> StoreResult<Conversation> {
    let id = row.id("id")?;
    let participants = ex
        .fetch_all(
            "SELECT principal_id FROM conversation_participants WHERE conversation_id = $1 \
             ORDER BY joined_at, CAST(principal_id AS TEXT)",
            &[Arg::Id(id)],
        )
        .await?;
    let participants = participants
        .iter()
        .map(|p| p.id("principal_id"))
        .collect::<StoreResult<_>>()?;
    conversation_row(row, participants)
}

/// One conversation and its participants in ONE statement, whether or not
/// it exists (no rows then): a hidden id costs what a missing one costs
/// (ADR 0020 §3). A row per participant, or one with a NULL participant.
pub(super) async fn conversation_alone(
    ex: &mut dyn Executor,
    id: Uuid,
) -> StoreResult<Option<Conversation>> {
    let sql = format!(
        "SELECT {CONVERSATION_COLUMNS}, p.principal_id FROM conversations c \
         LEFT JOIN conversation_participants p ON p.conversation_id = c.id \
         WHERE c.id = $1 ORDER BY p.joined_at, CAST(p.principal_id AS TEXT)"
    );
    let rows = ex.fetch_all(&sql, &[Arg::Id(id)]).await?;
    let Some(first) = rows.first() else {
        return Ok(None);
    };
    let participants = rows
        .iter()
        .filter_map(|r| r.opt_id("principal_id").transpose())
        .collect::<StoreResult<_>>()?;
    Ok(Some(conversation_row(first, participants)?))
}

fn conversation_row(row: &Row, participants: Vec<Uuid>) -> StoreResult<Conversation> {
    let kind = parsed(row.text("kind")?, "kind", ConversationKind::parse)?;
    // Only a channel has a state that means something (every row has the
    // column, `open` by default).
    let state = match kind {
        ConversationKind::Channel => Some(parsed(
            row.text("state")?,
            "channel state",
            ChannelState::parse,
        )?),
        _ => None,
    };
    Ok(Conversation {
        id: row.id("id")?,
        kind,
        space_id: row.opt_id("space_id")?,
        state,
        name: row.opt_text("name")?,
        key: row.opt_text("template_key")?,
        task_id: row.opt_id("task_id")?,
        created_by: row.id("created_by")?,
        participants,
        last_message_seq: row.int("last_message_seq")? as u64,
        created_at: rfc3339(row.int("created_at")?),
    })
}

pub(super) async fn load_conversations(
    ex: &mut dyn Executor,
    rows: &[Row],
) -> StoreResult<Vec<Conversation>> {
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        out.push(load_conversation(ex, r).await?);
    }
    Ok(out)
}

async fn direct_conversation(ex: &mut dyn Executor, key: &str) -> StoreResult<Option<Uuid>> {
    ex.fetch_optional(
        "SELECT id FROM conversations WHERE direct_key = $1",
        &[Arg::Text(key)],
    )
    .await?
    .map(|r| r.id("id"))
    .transpose()
}

#[async_trait]
impl<D: Database + Keyset + ConversationDialect> ConversationStore for D {
    async fn create_conversation(
        &self,
        c: &NewConversation,
        events: &[NewEvent],
    ) -> StoreResult<CreatedConversation> {
        if let Some(key) = &c.direct_key {
            // Bound first, so the read connection is back in the pool before
            // the conversation is loaded on another one.
            let existing = direct_conversation(&mut *self.read().await?, key).await?;
            if let Some(id) = existing {
                let found = self.conversation(id).await?.ok_or(StoreError::NotFound)?;
                return Ok(CreatedConversation::Existing(found));
            }
        }
        let mut tx = self.begin().await?;
        if let Err(e) = insert_conversation_row(&mut *tx, c).await {
            if is_unique_violation(&e) && c.direct_key.is_some() {
                // Another writer created the pair's conversation meanwhile.
                // Only the conversations row retries: a participant conflict
                // would fail the same way again.
                tx.rollback().await?;
                return self.create_conversation(c, events).await;
            }
            return Err(e);
        }
        insert_participants(&mut *tx, c).await?;
        let stored = tx.append_events(events, c.created_at).await?;
        tx.commit().await?;
        let conversation = self.conversation(c.id).await?.ok_or(StoreError::NotFound)?;
        Ok(CreatedConversation::Created(conversation, stored))
    }

    async fn conversation(&self, id: Uuid) -> StoreResult<Option<Conversation>> {
        conversation_alone(&mut *self.read().await?, id).await
    }

    async fn conversations_of(
        &self,
        principal: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<Conversation>> {
        let mut conn = self.read().await?;
        let sql = format!(
            "SELECT {CONVERSATION_COLUMNS} FROM conversations c \
             JOIN conversation_participants p ON p.conversation_id = c.id \
             WHERE p.principal_id = $1 AND {} ORDER BY c.id LIMIT $3",
            D::after("c.id", 2)
        );
        let rows = conn
            .fetch_all(
                &sql,
                &[
                    Arg::Id(principal),
                    Arg::OptId(after),
                    Arg::Int(i64::from(limit)),
                ],
            )
            .await?;
        load_conversations(&mut *conn, &rows).await
    }

    async fn add_participants(
        &self,
        conversation_id: Uuid,
        agents: &[Uuid],
        events: &[NewEvent],
        now: Millis,
    ) -> StoreResult<Vec<StoredEvent>> {
        let mut tx = self.begin().await?;
        let joined_seq = hold_seq(&mut *tx, conversation_id).await?;
        for a in agents {
            tx.execute(
                "INSERT INTO conversation_participants (conversation_id, principal_id, joined_at, joined_seq) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                &[
                    Arg::Id(conversation_id),
                    Arg::Id(*a),
                    Arg::Int(now),
                    Arg::Int(joined_seq),
                ],
            )
            .await?;
        }
        let stored = tx.append_events(events, now).await?;
        tx.commit().await?;
        Ok(stored)
    }

    async fn insert_message(&self, m: &NewMessage) -> StoreResult<InsertedMessage> {
        if m.writes_alone() {
            return insert_alone(self, m).await;
        }
        if let Some(client_id) = &m.client_msg_id {
            let dup = find_by_client_id(&mut *self.read().await?, m.sender_id, client_id).await?;
            if let Some(dup) = dup {
                return Ok(dup);
            }
        }
        match self.sends().submit(m).await {
            Err(e) if is_unique_violation(&e) && m.client_msg_id.is_some() => {
                let client_id = m.client_msg_id.as_deref().unwrap_or_default();
                find_by_client_id(&mut *self.read().await?, m.sender_id, client_id)
                    .await?
                    .ok_or(e)
            }
            other => other,
        }
    }

    async fn message(&self, id: Uuid) -> StoreResult<Option<(Message, Verdict)>> {
        let sql = format!("SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.id = $1");
        self.read()
            .await?
            .fetch_optional(&sql, &[Arg::Id(id)])
            .await?
            .map(|r| message_row(&r).map(|(m, v, _)| (m, v)))
            .transpose()
    }

    async fn messages(
        &self,
        conversation_id: Uuid,
        page: MessagePage,
    ) -> StoreResult<Vec<Message>> {
        super::messages::page(&mut *self.read().await?, conversation_id, page).await
    }

    async fn decide_message(
        &self,
        message_id: Uuid,
        outcome: &MessageOutcome,
        effects: &Effects,
        now: Millis,
    ) -> StoreResult<MessageDecided> {
        let verdict = VerdictWrite {
            message_id,
            outcome: outcome.clone(),
            effects: effects.clone(),
            now,
        };
        self.verdicts().submit(&verdict).await
    }

    async fn is_recipient(&self, message_id: Uuid, agent: Uuid) -> StoreResult<bool> {
        let sql = format!(
            "SELECT 1 AS one FROM messages m WHERE m.id = $1 AND m.verdict = 'forwarded' AND {}",
            received_by(2)
        );
        let row = self
            .read()
            .await?
            .fetch_optional(&sql, &[Arg::Id(message_id), Arg::Id(agent)])
            .await?;
        Ok(row.is_some())
    }
}
