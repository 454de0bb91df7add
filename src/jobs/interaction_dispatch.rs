//! The `app_interaction_dispatch` job (ADR 0027 §4, ADR 0032 §3): hands an
//! interaction to its app's way. Over the gateway the event written with
//! the interaction is the delivery, so the job only finishes; an app whose
//! installation is not active fails the interaction; an unverified
//! `interactionsUrl` gets nothing and the interaction fails
//! `url_unverified`. A verified one: the rights of this moment re-checked,
//! `received -> dispatched`, one signed POST of the stored event, and the
//! state the answer gives (200 `acknowledged` with its reply, 202 stays
//! `dispatched`, anything else `failed` with its reason). One attempt: the
//! job is marked sent before its request, so a rerun by this process (the
//! store failed after the request) sends nothing and fails it
//! `unrecorded`, and one after a crash repeats the same `webhook-id` once.

use std::sync::Arc;

use super::deliver;
use crate::app_url::{self, record, Delivered, Way};
use crate::domain::app_reply::Reason;
use crate::domain::component::{Interaction, InteractionState};
use crate::domain::now_millis;
use crate::hub::Hub;
use crate::store::{Job, StoreError};

/// Why the hub failed an interaction, in its `reason`.
pub const APP_INACTIVE: &str = "app_inactive";
pub const URL_UNVERIFIED: &str = "url_unverified";

pub async fn run(hub: &Arc<Hub>, job: &Job) -> Result<(), StoreError> {
    let Some(interaction) = hub.store.interaction(job.subject).await? else {
        return hub.store.finish_job(job.id).await;
    };
    let app_id = interaction.app_id;
    match app_url::way(hub, app_id).await? {
        Way::Gateway => {}
        Way::Inactive(url) => {
            if let Some(url) = url {
                let inactive = Delivered::NotSent(Reason::Inactive);
                record(app_id, "interaction", &url, inactive);
            }
            fail(hub, &interaction, APP_INACTIVE).await?
        }
        Way::Unverified => {
            tracing::warn!(app = %app_id, reason = URL_UNVERIFIED, "interaction not delivered");
            fail(hub, &interaction, URL_UNVERIFIED).await?;
        }
        Way::Url(url) => to_url(hub, job, &interaction, &url).await?,
    }
    hub.store.finish_job(job.id).await
}

async fn fail(hub: &Hub, interaction: &Interaction, reason: &str) -> Result<(), StoreError> {
    hub.store
        .fail_interaction(interaction.interaction_id, reason, now_millis())
        .await
        .map(|_| ())
}

/// The URL's steps, in order: at an end (the app answered through the API
/// meanwhile) nothing is sent; the re-check; the move to `dispatched` (a
/// rerun finds it there); the request, unless the job's mark says it was
/// sent already ([`deliver::SEND_ALLOWANCE`]); the state its answer gives.
/// An installation found inactive fails it `app_inactive`, as the way's
/// step does.
async fn to_url(
    hub: &Arc<Hub>,
    job: &Job,
    interaction: &Interaction,
    url: &str,
) -> Result<(), StoreError> {
    if interaction.state.is_final() {
        return Ok(());
    }
    if let Some(refused) = deliver::recheck_press(hub, interaction).await? {
        record(
            interaction.app_id,
            "interaction",
            url,
            Delivered::NotSent(refused),
        );
        return fail(hub, interaction, stored_reason(refused)).await;
    }
    let id = interaction.interaction_id;
    if interaction.state == InteractionState::Received
        && !hub.store.dispatch_interaction(id, now_millis()).await?
    {
        return Ok(());
    }
    let Some(event_id) = hub.store.interaction_event(id).await? else {
        return fail(hub, interaction, Reason::Inactive.as_str()).await;
    };
    match deliver::interaction(hub, job, interaction, event_id, url).await? {
        Delivered::Answered | Delivered::Deferred => Ok(()),
        Delivered::Failed(reason) | Delivered::NotSent(reason) => {
            fail(hub, interaction, reason.as_str()).await
        }
    }
}

/// An interaction's `reason` for a re-check's refusal: ADR 0027's
/// `app_inactive` for an installation no longer active, so clients read one
/// name for it whichever step found it; `denied` otherwise.
fn stored_reason(reason: Reason) -> &'static str {
    match reason {
        Reason::Inactive => APP_INACTIVE,
        other => other.as_str(),
    }
}

/// A job that keeps failing (the store failed each time): the interaction
/// fails rather than waiting for ever.
pub async fn fail_closed(hub: &Arc<Hub>, job: &Job) -> Result<(), StoreError> {
    hub.store
        .fail_interaction(job.subject, APP_INACTIVE, now_millis())
        .await?;
    hub.store.finish_job(job.id).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One name for an inactive installation whichever step found it; a
    /// refusal of the actor's rights stays `denied`.
    #[test]
    fn the_recheck_reasons_as_stored() {
        assert_eq!(stored_reason(Reason::Inactive), APP_INACTIVE);
        assert_eq!(stored_reason(Reason::Denied), "denied");
        assert_eq!(stored_reason(Reason::Timeout), Reason::Timeout.as_str());
    }
}
