//! Interactions (ADR 0027 §6): the one transaction that records a
//! principal operating a component, and the compare-and-swap moves of its
//! state (the app's respond, the dispatch job's failure). The create and
//! the respond hold the app's installation (shared) first, as every
//! writer of its cards does (`components`).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use uuid::Uuid;

use super::components::{app_refusal, lock_card, next_version};
use super::installations::InstallationDialect;
use super::jobs::{insert_job, NewJob};
use super::messages::{insert_one, InsertedMessage, NewMessage};
use super::sql::{parsed, to_json, Arg, Database, Executor, Row};
use super::{StoreError, StoreResult};
use crate::domain::authz::Reason;
use crate::domain::component::{
    CardUse, Interaction, InteractionState, InvokedBy, INTERACTION_CREATED,
};
use crate::domain::event::{rfc3339, NewEvent, StoredEvent};
use crate::domain::message::Message;
use crate::domain::{Millis, PrincipalKind};

/// An interaction to record, its values checked already.
#[derive(Clone, Debug)]
pub struct NewInteraction {
    pub id: Uuid,
    pub message_id: Uuid,
    pub component_id: Uuid,
    /// The card's author, as the decision read it: its installation is
    /// held before the card is locked.
    pub app_id: Uuid,
    pub actor: InvokedBy,
    pub values: Option<Value>,
    pub job: NewJob,
    pub now: Millis,
}

#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // one per request, unpacked at once
pub enum InteractionCreated {
    /// Recorded: the interaction, the card as it is now, and the events
    /// (the app's and the card's `message.updated`, if it changed).
    Created {
        interaction: Interaction,
        card: Message,
        events: Vec<StoredEvent>,
    },
    /// The component is no longer usable, this principal used the card
    /// already (`once_per_principal`), or the app's installation, held in
    /// the transaction, can no longer answer: 409 `component_used`.
    Used,
    /// No card with that component (it went meanwhile).
    NotFound,
}

/// An app's answer to one of its interactions.
#[derive(Clone, Debug)]
pub struct InteractionResponse {
    pub interaction_id: Uuid,
    pub app_id: Uuid,
    pub state: InteractionState,
    /// The reply, written as the app's message in the card's place.
    pub reply: Option<NewMessage>,
    pub now: Millis,
}

#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // one per request, unpacked at once
pub enum Responded {
    Done {
        interaction: Interaction,
        reply: Option<Message>,
        events: Vec<StoredEvent>,
    },
    /// The interaction is in this state already: no move from it.
    Conflict(InteractionState),
    NotFound,
    /// The installation, held in the transaction, no longer lets the app
    /// answer (it changed after the decision): the decision's reason;
    /// nothing written.
    Refused(Reason),
}

#[async_trait]
pub trait InteractionStore: Send + Sync + 'static {
    /// Records an interaction in one transaction with the card locked: the
    /// component still usable, the card's use rule, the row, the app's
    /// event, `message.updated` when states changed, and the dispatch job.
    async fn create_interaction(&self, new: &NewInteraction) -> StoreResult<InteractionCreated>;

    /// The interaction, for its app's respond and its job.
    async fn interaction(&self, id: Uuid) -> StoreResult<Option<Interaction>>;

    /// The app's respond: a compare-and-swap to an end state, and the
    /// reply with it.
    async fn respond_interaction(&self, r: &InteractionResponse) -> StoreResult<Responded>;

    /// Fails an interaction not yet at an end (the dispatch job); false
    /// when it was at one already.
    async fn fail_interaction(&self, id: Uuid, reason: &str, now: Millis) -> StoreResult<bool>;
}

const INTERACTION: &str =
    "SELECT i.id, i.message_id, i.component_id, c.custom_id, i.conversation_id, \
     i.thread_id, i.app_id, i.actor_id, p.kind AS actor_kind, CAST(i.\"values\" AS TEXT) AS vals, \
     i.state, i.reason, i.created_at FROM interactions i \
     JOIN message_components c ON c.id = i.component_id \
     JOIN principals p ON p.id = i.actor_id WHERE i.id = $1";

fn interaction_row(r: &Row) -> StoreResult<Interaction> {
    Ok(Interaction {
        interaction_id: r.id("id")?,
        message_id: r.id("message_id")?,
        component_id: r.id("component_id")?,
        custom_id: r.text("custom_id")?,
        conversation_id: r.id("conversation_id")?,
        thread_id: r.opt_id("thread_id")?,
        app_id: r.id("app_id")?,
        invoked_by: InvokedBy {
            principal_id: r.id("actor_id")?,
            kind: parsed(
                r.text("actor_kind")?,
                "principal kind",
                PrincipalKind::parse,
            )?,
        },
        // Stored as JSON `null` for none.
        values: r
            .opt_text("vals")?
            .map(|v| serde_json::from_str::<Value>(&v).map_err(super::sql::json_err))
            .transpose()?
            .filter(|v| !v.is_null()),
        state: parsed(
            r.text("state")?,
            "interaction state",
            InteractionState::parse,
        )?,
        reason: r.opt_text("reason")?,
        created_at: rfc3339(r.int("created_at")?),
    })
}

async fn read(ex: &mut dyn Executor, id: Uuid) -> StoreResult<Option<Interaction>> {
    ex.fetch_optional(INTERACTION, &[Arg::Id(id)])
        .await?
        .map(|r| interaction_row(&r))
        .transpose()
}

/// A compare-and-swap to `to` from the states it may follow; false when
/// the row was elsewhere (or is not `app`'s, when one is given).
async fn move_state(
    ex: &mut dyn Executor,
    id: Uuid,
    to: InteractionState,
    reason: Option<&str>,
    now: Millis,
) -> StoreResult<bool> {
    let from: Vec<String> = to
        .sources()
        .iter()
        .map(|s| format!("'{}'", s.as_str()))
        .collect();
    if from.is_empty() {
        return Ok(false);
    }
    let sql = format!(
        "UPDATE interactions SET state = $2, reason = $3, updated_at = $4 \
         WHERE id = $1 AND state IN ({})",
        from.join(", ")
    );
    let moved = ex
        .execute(
            &sql,
            &[
                Arg::Id(id),
                Arg::Text(to.as_str()),
                Arg::OptText(reason),
                Arg::Int(now),
            ],
        )
        .await?;
    Ok(moved == 1)
}

#[async_trait]
impl<D: Database + InstallationDialect> InteractionStore for D {
    async fn create_interaction(&self, new: &NewInteraction) -> StoreResult<InteractionCreated> {
        let mut tx = self.begin().await?;
        // Every early answer rolls back before the writer lock passes on
        // (a dropped transaction only queues its rollback).
        if app_refusal::<D>(&mut *tx, new.app_id).await?.is_some() {
            tx.rollback().await?;
            return Ok(InteractionCreated::Used);
        }
        let locked = lock_card(&mut *tx, new.message_id).await?;
        let Some(mut locked) = locked.filter(|l| l.message.sender_id == new.app_id) else {
            tx.rollback().await?;
            return Ok(InteractionCreated::NotFound);
        };
        let Some(component) = locked.card.component(new.component_id).cloned() else {
            tx.rollback().await?;
            return Ok(InteractionCreated::NotFound);
        };
        if !component.usable(new.now) || used_by(&mut *tx, new, locked.card.card_use).await? {
            tx.rollback().await?;
            return Ok(InteractionCreated::Used);
        }
        let message = &locked.message;
        let interaction = Interaction {
            interaction_id: new.id,
            message_id: message.id,
            component_id: component.component_id,
            custom_id: component.custom_id.clone(),
            conversation_id: message.conversation_id,
            thread_id: message.thread_id,
            app_id: message.sender_id,
            invoked_by: new.actor,
            values: new.values.clone(),
            state: InteractionState::Received,
            reason: None,
            created_at: rfc3339(new.now),
        };
        let mut written = vec![app_event(&mut *tx, new, &interaction).await?];
        if locked.card.use_up() {
            written.extend(next_version(&mut *tx, &mut locked).await?);
        }
        // One append, after the card's lock: the streams' row locks in
        // audience order, as a send's.
        let events = tx.append_events(&written, new.now).await?;
        insert_job(&mut *tx, &new.job, new.now).await?;
        tx.commit().await?;
        Ok(InteractionCreated::Created {
            interaction,
            card: locked.into_message(),
            events,
        })
    }

    async fn interaction(&self, id: Uuid) -> StoreResult<Option<Interaction>> {
        read(&mut *self.read().await?, id).await
    }

    async fn respond_interaction(&self, r: &InteractionResponse) -> StoreResult<Responded> {
        let mut tx = self.begin().await?;
        if let Some(reason) = app_refusal::<D>(&mut *tx, r.app_id).await? {
            tx.rollback().await?;
            return Ok(Responded::Refused(reason));
        }
        let Some(current) = read(&mut *tx, r.interaction_id).await? else {
            tx.rollback().await?;
            return Ok(Responded::NotFound);
        };
        if current.app_id != r.app_id {
            tx.rollback().await?;
            return Ok(Responded::NotFound);
        }
        if !move_state(&mut *tx, r.interaction_id, r.state, None, r.now).await? {
            tx.rollback().await?;
            return Ok(Responded::Conflict(current.state));
        }
        let (reply, events) = match &r.reply {
            Some(m) => match insert_one(&mut *tx, m).await? {
                InsertedMessage::Inserted {
                    message, events, ..
                } => (Some(message), events),
                InsertedMessage::Duplicate { .. } => {
                    return Err(StoreError::Corrupt("a reply written twice".into()))
                }
            },
            None => (None, Vec::new()),
        };
        tx.commit().await?;
        Ok(Responded::Done {
            interaction: Interaction {
                state: r.state,
                ..current
            },
            reply,
            events,
        })
    }

    async fn fail_interaction(&self, id: Uuid, reason: &str, now: Millis) -> StoreResult<bool> {
        let mut tx = self.begin().await?;
        let moved = move_state(&mut *tx, id, InteractionState::Failed, Some(reason), now).await?;
        tx.commit().await?;
        Ok(moved)
    }
}

/// `once_per_principal`: whether this actor has an interaction on the card
/// already (the card is locked, so no second one can slip in).
async fn used_by(
    ex: &mut dyn Executor,
    new: &NewInteraction,
    card_use: CardUse,
) -> StoreResult<bool> {
    if card_use != CardUse::OncePerPrincipal {
        return Ok(false);
    }
    let row = ex
        .fetch_optional(
            "SELECT 1 AS one FROM interactions WHERE message_id = $1 AND actor_id = $2",
            &[Arg::Id(new.message_id), Arg::Id(new.actor.principal_id)],
        )
        .await?;
    Ok(row.is_some())
}

/// The interaction's row and its `app/interaction/created` (the values go
/// only there), always written, so `event_id` names a written event: the
/// installation held is active (the caller checked), and reading the
/// app's stream still needs `events:subscribe`.
async fn app_event(
    ex: &mut dyn Executor,
    new: &NewInteraction,
    interaction: &Interaction,
) -> StoreResult<NewEvent> {
    let event = NewEvent::new(
        interaction.app_id,
        INTERACTION_CREATED,
        Arc::new(serde_json::json!({ "interaction": interaction })),
    );
    // JSON `null` for none: one bind type for the column on both backends.
    let values = to_json(&new.values)?;
    ex.execute(
        "INSERT INTO interactions (id, message_id, component_id, app_id, actor_id, conversation_id, \
         thread_id, \"values\", state, event_id, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'received', $9, $10, $10)",
        &[
            Arg::Id(interaction.interaction_id),
            Arg::Id(interaction.message_id),
            Arg::Id(interaction.component_id),
            Arg::Id(interaction.app_id),
            Arg::Id(interaction.invoked_by.principal_id),
            Arg::Id(interaction.conversation_id),
            Arg::OptId(interaction.thread_id),
            Arg::Json(&values),
            Arg::Id(event.id),
            Arg::Int(new.now),
        ],
    )
    .await?;
    Ok(event)
}
