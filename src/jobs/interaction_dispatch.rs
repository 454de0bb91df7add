//! The `app_interaction_dispatch` job (ADR 0027 §4, "The job"): hands an
//! interaction to its app's way. Over the gateway the event written with
//! the interaction is the delivery, so the job only finishes; an app whose
//! installation is not active fails the interaction; an `interactions_url`
//! is unverified until issue 17 verifies it, so nothing is sent and the
//! interaction fails `url_unverified`. One attempt, never repeated.

use std::sync::Arc;

use crate::domain::manifest::DeliveryMode;
use crate::domain::now_millis;
use crate::hub::Hub;
use crate::store::{Job, StoreError};

/// Why the hub failed an interaction, in its `reason`.
pub const APP_INACTIVE: &str = "app_inactive";
pub const URL_UNVERIFIED: &str = "url_unverified";

/// The way the job takes for the interaction's app.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Way {
    Gateway,
    Inactive,
    UrlUnverified,
}

pub async fn run(hub: &Arc<Hub>, job: &Job) -> Result<(), StoreError> {
    let Some(interaction) = hub.store.interaction(job.subject).await? else {
        return hub.store.finish_job(job.id).await;
    };
    let app_id = interaction.app_id;
    match way(hub, app_id).await? {
        Way::Gateway => {}
        Way::Inactive => {
            hub.store
                .fail_interaction(interaction.interaction_id, APP_INACTIVE, now_millis())
                .await?;
        }
        Way::UrlUnverified => {
            tracing::warn!(app = %app_id, reason = URL_UNVERIFIED, "interaction not delivered");
            hub.store
                .fail_interaction(interaction.interaction_id, URL_UNVERIFIED, now_millis())
                .await?;
        }
    }
    hub.store.finish_job(job.id).await
}

/// Read from the app's cached installation and its manifest.
async fn way(hub: &Arc<Hub>, app_id: uuid::Uuid) -> Result<Way, StoreError> {
    let active = hub
        .installations
        .get(app_id)
        .await?
        .is_some_and(|i| i.state == crate::domain::installation::InstallationState::Active);
    if !active {
        return Ok(Way::Inactive);
    }
    let mode = hub
        .store
        .app(app_id)
        .await?
        .map(|a| a.manifest.delivery.mode);
    Ok(match mode {
        Some(DeliveryMode::InteractionsUrl) => Way::UrlUnverified,
        Some(DeliveryMode::Gateway) => Way::Gateway,
        None => Way::Inactive,
    })
}

/// A job that keeps failing (the store failed each time): the interaction
/// fails rather than waiting for ever.
pub async fn fail_closed(hub: &Arc<Hub>, job: &Job) -> Result<(), StoreError> {
    hub.store
        .fail_interaction(job.subject, APP_INACTIVE, now_millis())
        .await?;
    hub.store.finish_job(job.id).await
}
