//! Cards (ADR 0027 §5, §7): the component rows written with an app's
//! message, the card locked for a change, the `message.updated` events of
//! each new version, and the lifecycle's `disable_authored_by`.
//!
//! Every writer of a card holds its app's installation (shared) first,
//! then locks its cards in ascending message id, and appends all of its
//! transaction's events in one `append_events` call after the last card
//! lock: PostgreSQL then takes installation, card and stream row locks in
//! one order everywhere (streams in audience order within that call), so a
//! suspend, a click and a send cannot wait on each other in a cycle.
//!
//! `message_components` holds the states that are decided on;
//! `messages.card` is the card as readers see it, rewritten with every
//! version in the same transaction, so every read of a message carries it
//! without a second query.

use std::sync::Arc;

use async_trait::async_trait;
use uuid::Uuid;

use super::installations::{shared, InstallationDialect};
use super::messages::{message_row, NewMessage, MESSAGE_COLUMNS};
use super::place_levels::channel_levels;
use super::sql::{parsed, to_json, Arg, Database, Executor};
use super::{StoreError, StoreResult};
use crate::domain::authz::{installation_refusal, Reason};
use crate::domain::component::{Card, ComponentState, MESSAGE_UPDATED, PERSON_MESSAGE_UPDATED};
use crate::domain::event::{NewEvent, StoredEvent};
use crate::domain::installation::Scope;
use crate::domain::message::Message;
use crate::domain::{Millis, PrincipalKind};

/// A card as it will be stored: the readers' view (version 1, every
/// component active) and each component's expiry, in card order.
#[derive(Clone, Debug)]
pub struct NewCard {
    pub card: Card,
    pub expires_at: Vec<Millis>,
}

/// What an app changes on one of its components.
#[derive(Clone, Debug)]
pub struct ComponentChange {
    pub app_id: Uuid,
    pub message_id: Uuid,
    pub component_id: Uuid,
    /// `Active` or `Disabled` (the handler refuses `Used`).
    pub state: Option<ComponentState>,
    pub label: Option<String>,
    pub now: Millis,
}

#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // one per request, unpacked at once
pub enum ComponentChanged {
    /// The card's new version and its `message.updated` events.
    Changed(Message, Vec<StoredEvent>),
    /// No card of this app has that message, or it has no such component.
    NotFound,
    /// The installation, held in the transaction, no longer lets the app
    /// change its cards (a suspend, an uninstall or a scope change
    /// committed after the decision): the decision's reason.
    Refused(Reason),
}

#[async_trait]
pub trait ComponentStore: Send + Sync + 'static {
    /// `app/component/update`: the component changed on a card of the app,
    /// the card's version + 1, one `message.updated` to its readers.
    async fn update_component(&self, change: &ComponentChange) -> StoreResult<ComponentChanged>;
}

#[async_trait]
impl<D: Database + InstallationDialect> ComponentStore for D {
    async fn update_component(&self, change: &ComponentChange) -> StoreResult<ComponentChanged> {
        let mut tx = self.begin().await?;
        if let Some(reason) = app_refusal::<D>(&mut *tx, change.app_id).await? {
            tx.rollback().await?;
            return Ok(ComponentChanged::Refused(reason));
        }
        let Some(mut locked) = lock_card(&mut *tx, change.message_id).await? else {
            tx.rollback().await?;
            return Ok(ComponentChanged::NotFound);
        };
        let at = locked
            .card
            .components
            .iter()
            .position(|c| c.component_id == change.component_id);
        let (true, Some(at)) = (locked.message.sender_id == change.app_id, at) else {
            // Before the writer lock passes on (a dropped transaction only
            // queues its rollback).
            tx.rollback().await?;
            return Ok(ComponentChanged::NotFound);
        };
        let component = &mut locked.card.components[at];
        if let Some(state) = change.state {
            component.state = state;
        }
        if let Some(label) = &change.label {
            component.definition.label = Some(label.clone());
        }
        let updated = next_version(&mut *tx, &mut locked).await?;
        let events = tx.append_events(&updated, change.now).await?;
        tx.commit().await?;
        Ok(ComponentChanged::Changed(locked.into_message(), events))
    }
}

/// Holds the app's live installation (shared) until commit, first of the
/// card's locks, and says why it no longer lets the app's cards act
/// (`None`: active with `components:write`). A suspend's or uninstall's
/// compare-and-swap on the row waits for this transaction, or this one
/// sees its outcome.
pub(super) async fn app_refusal<D: InstallationDialect>(
    ex: &mut dyn Executor,
    app: Uuid,
) -> StoreResult<Option<Reason>> {
    let live = shared::<D>(ex, "app_id = $1 AND state <> 'uninstalled'", Arg::Id(app)).await?;
    Ok(installation_refusal(
        live.map(|i| i.facts()),
        Some(Scope::ComponentsWrite),
    ))
}

/// A card read inside a write transaction with its message row locked
/// (PostgreSQL's row lock of the `UPDATE`; SQLite holds its writer).
pub(super) struct LockedCard {
    pub message: Message,
    pub card: Card,
}

impl LockedCard {
    pub fn into_message(self) -> Message {
        Message {
            card: Some(self.card),
            ..self.message
        }
    }
}

/// The card of message `id`, locked, with each component's state as its
/// row holds it; `None` for no message or one without a card.
pub(super) async fn lock_card(ex: &mut dyn Executor, id: Uuid) -> StoreResult<Option<LockedCard>> {
    let held = ex
        .execute(
            "UPDATE messages SET card_version = card_version WHERE id = $1 AND card_version IS NOT NULL",
            &[Arg::Id(id)],
        )
        .await?;
    if held == 0 {
        return Ok(None);
    }
    let sql = format!("SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.id = $1");
    let row = ex
        .fetch_optional(&sql, &[Arg::Id(id)])
        .await?
        .ok_or(StoreError::NotFound)?;
    let (message, _, _) = message_row(&row)?;
    let mut card = message
        .card
        .clone()
        .ok_or_else(|| StoreError::Corrupt(format!("card {id} without its card")))?;
    let rows = ex
        .fetch_all(
            "SELECT id, state FROM message_components WHERE message_id = $1",
            &[Arg::Id(id)],
        )
        .await?;
    for r in &rows {
        let (cid, state) = (
            r.id("id")?,
            parsed(r.text("state")?, "component state", ComponentState::parse)?,
        );
        if let Some(c) = card.components.iter_mut().find(|c| c.component_id == cid) {
            c.state = state;
        }
    }
    Ok(Some(LockedCard { message, card }))
}

/// Writes the locked card as its next version: the component rows and the
/// readers' card; returns one `message.updated` to each reader, for the
/// caller's one append after its last card lock.
pub(super) async fn next_version(
    ex: &mut dyn Executor,
    locked: &mut LockedCard,
) -> StoreResult<Vec<NewEvent>> {
    locked.card.version += 1;
    for c in &locked.card.components {
        ex.execute(
            "UPDATE message_components SET state = $2, definition = $3 WHERE id = $1",
            &[
                Arg::Id(c.component_id),
                Arg::Text(c.state.as_str()),
                Arg::Json(&to_json(&c.definition)?),
            ],
        )
        .await?;
    }
    let card = to_json(&locked.card)?;
    ex.execute(
        "UPDATE messages SET card = $2, card_version = $3 WHERE id = $1",
        &[
            Arg::Id(locked.message.id),
            Arg::Json(&card),
            Arg::Int(i64::from(locked.card.version)),
        ],
    )
    .await?;
    let message = Message {
        card: Some(locked.card.clone()),
        ..locked.message.clone()
    };
    updated_events(ex, &message).await
}

/// One `message.updated` for every reader of the card's place but its
/// author, named by the reader's kind; the payload is stored with the
/// event, so each keeps the version it announced.
async fn updated_events(ex: &mut dyn Executor, message: &Message) -> StoreResult<Vec<NewEvent>> {
    let readers = readers(ex, message.conversation_id, message.sender_id).await?;
    let payload = Arc::new(serde_json::json!({ "message": message }));
    let (agents_id, people_id) = (Uuid::now_v7(), Uuid::now_v7());
    Ok(readers
        .into_iter()
        .map(|(audience, kind)| {
            let (id, event_type) = match kind {
                PrincipalKind::Person => (people_id, PERSON_MESSAGE_UPDATED),
                _ => (agents_id, MESSAGE_UPDATED),
            };
            NewEvent {
                id,
                audience,
                event_type,
                payload: payload.clone(),
                message: None,
            }
        })
        .collect())
}

/// Who reads conversation `id` now, read in the caller's transaction: a
/// channel's readers by their levels (apps receive no channel events), the
/// participants elsewhere; never `author`.
async fn readers(
    ex: &mut dyn Executor,
    id: Uuid,
    author: Uuid,
) -> StoreResult<Vec<(Uuid, PrincipalKind)>> {
    let row = ex
        .fetch_optional(
            "SELECT kind, space_id FROM conversations WHERE id = $1",
            &[Arg::Id(id)],
        )
        .await?
        .ok_or(StoreError::NotFound)?;
    let mut readers: Vec<(Uuid, PrincipalKind)> = if row.text("kind")? == "channel" {
        let space = row.id("space_id")?;
        channel_levels(ex, id, space)
            .await?
            .into_iter()
            .map(|(p, (kind, _))| (p, kind))
            .collect()
    } else {
        let rows = ex
            .fetch_all(
                "SELECT p.id, p.kind FROM conversation_participants cp \
                 JOIN principals p ON p.id = cp.principal_id WHERE cp.conversation_id = $1",
                &[Arg::Id(id)],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.id("id")?,
                    parsed(r.text("kind")?, "principal kind", PrincipalKind::parse)?,
                ))
            })
            .collect::<StoreResult<_>>()?
    };
    readers.retain(|(p, kind)| *p != author && *kind != PrincipalKind::App);
    readers.sort_by_key(|(p, _)| *p);
    Ok(readers)
}

/// What a card or a reply adds to its message's row, inside the message's
/// transaction: the card's columns and one row per component.
pub(super) async fn write_card(ex: &mut dyn Executor, m: &NewMessage) -> StoreResult<()> {
    if let Some(interaction) = m.reply_to_interaction {
        ex.execute(
            "UPDATE messages SET reply_to_interaction = $2 WHERE id = $1",
            &[Arg::Id(m.id), Arg::Id(interaction)],
        )
        .await?;
    }
    let Some(new) = &m.card else {
        return Ok(());
    };
    ex.execute(
        "UPDATE messages SET card = $2, card_version = $3, card_use = $4 WHERE id = $1",
        &[
            Arg::Id(m.id),
            Arg::Json(&to_json(&new.card)?),
            Arg::Int(i64::from(new.card.version)),
            Arg::Text(new.card.card_use.as_str()),
        ],
    )
    .await?;
    for (i, (c, expires)) in new.card.components.iter().zip(&new.expires_at).enumerate() {
        ex.execute(
            "INSERT INTO message_components (id, message_id, position, custom_id, kind, definition, \
             trigger_level, required_capability, restricted_to, state, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            &[
                Arg::Id(c.component_id),
                Arg::Id(m.id),
                Arg::Int(i as i64),
                Arg::Text(&c.custom_id),
                Arg::Text(c.kind.as_str()),
                Arg::Json(&to_json(&c.definition)?),
                Arg::Text(c.trigger.as_str()),
                Arg::OptText(c.required_capability.map(|x| x.as_str())),
                Arg::OptText(c.restricted_to.map(|x| x.as_str())),
                Arg::Text(c.state.as_str()),
                Arg::Int(*expires),
            ],
        )
        .await?;
    }
    Ok(())
}

/// Suspend and uninstall (ADR 0027 §7), inside their transaction: every
/// card of `app` with an active component gets them disabled and its
/// version one more. Cards are locked in ascending message id. Returns how
/// many components it disabled (the audit row's `componentsDisabled`) and
/// the cards' `message.updated` events (one per card to each reader), which
/// the caller appends with its own in one call, after the last card lock.
pub(super) async fn disable_authored_by(
    ex: &mut dyn Executor,
    app: Uuid,
) -> StoreResult<(u32, Vec<NewEvent>)> {
    let rows = ex
        .fetch_all(
            "SELECT DISTINCT c.message_id FROM message_components c \
             JOIN messages m ON m.id = c.message_id \
             WHERE m.sender_id = $1 AND c.state = 'active' ORDER BY c.message_id",
            &[Arg::Id(app)],
        )
        .await?;
    let (mut disabled, mut events) = (0u32, Vec::new());
    for r in &rows {
        let Some(mut locked) = lock_card(ex, r.id("message_id")?).await? else {
            continue;
        };
        let on_card = locked.card.disable_all();
        if on_card > 0 {
            events.extend(next_version(ex, &mut locked).await?);
            disabled += on_card;
        }
    }
    Ok((disabled, events))
}
