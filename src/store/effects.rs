//! What a state change brings along, applied inside its transaction.

use uuid::Uuid;

use super::conversations::{insert_conversation, NewConversation};
use super::jobs::{delete_job, insert_job, NewJob};
use super::sql::Executor;
use super::StoreResult;
use crate::domain::event::{NewEvent, StoredEvent};
use crate::domain::Millis;

/// Everything a state change brings along, applied in its transaction.
#[derive(Clone, Debug, Default)]
pub struct Effects {
    pub events: Vec<NewEvent>,
    /// The job this change completes; deleted.
    pub finish_job: Option<Uuid>,
    /// Jobs this change makes necessary.
    pub schedule: Vec<NewJob>,
    /// Conversations this change opens (an accepted task's).
    pub conversations: Vec<NewConversation>,
}

/// Applies the effects of a state change inside its transaction; returns
/// the stored events.
pub(super) async fn apply_effects(
    ex: &mut dyn Executor,
    effects: &Effects,
    now: Millis,
) -> StoreResult<Vec<StoredEvent>> {
    apply_effect_rows(ex, effects, now).await?;
    ex.append_events(&effects.events, now).await
}

/// Everything but the events: for a group that appends all its members'
/// events at once.
pub(super) async fn apply_effect_rows(
    ex: &mut dyn Executor,
    effects: &Effects,
    now: Millis,
) -> StoreResult<()> {
    delete_job(ex, effects.finish_job).await?;
    for job in &effects.schedule {
        insert_job(ex, job, now).await?;
    }
    for c in &effects.conversations {
        insert_conversation(ex, c).await?;
    }
    Ok(())
}
