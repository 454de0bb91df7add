//! `app_command_dispatch` (ADR 0027 §4): hands an invocation to its app's
//! way in, as its manifest's `delivery` names it. Over the gateway the
//! event written with the invocation is the delivery, so the job only
//! finishes. An `interactions_url` is unverified until issue 17 verifies
//! it, so nothing is sent: a warning names the app and the reason, never
//! the URL. An app no longer active gets nothing more. One attempt, no
//! retry: nothing of a command is repeated.

use std::sync::Arc;

use crate::domain::installation::InstallationState;
use crate::domain::manifest::DeliveryMode;
use crate::hub::Hub;
use crate::store::{Job, StoreError};
use crate::telemetry::names;

pub(super) async fn dispatch(hub: &Arc<Hub>, job: &Job) -> Result<(), StoreError> {
    let outcome = match hub.store.invocation(job.subject).await? {
        None => "missing",
        Some(invocation) => {
            let installation = hub.installations.lookup(invocation.app_id).await?;
            let active = installation
                .installation
                .is_some_and(|i| i.state == InstallationState::Active);
            let app = hub.store.app(invocation.app_id).await?;
            match app.map(|a| a.manifest.delivery.mode) {
                _ if !active => "inactive",
                Some(DeliveryMode::InteractionsUrl) => {
                    tracing::warn!(app = %invocation.app_id, reason = "url_unverified", "command invocation not sent");
                    "url_unverified"
                }
                _ => "gateway",
            }
        }
    };
    hub.store.finish_job(job.id).await?;
    metrics::counter!(names::COMMAND_DISPATCHES, "outcome" => outcome).increment(1);
    Ok(())
}
