//! `app_command_dispatch` (ADR 0027 §4): hands an invocation to its app's
//! way in. Over the gateway the event written with the invocation is the
//! delivery, so the job only finishes; an app that is no longer active gets
//! nothing more (its event, if any, was written while it was). One attempt,
//! no retry: nothing of a command is repeated. Issue 17 adds the
//! `interactions_url` way here.

use std::sync::Arc;

use crate::domain::installation::InstallationState;
use crate::hub::Hub;
use crate::store::{Job, StoreError};
use crate::telemetry::names;

pub(super) async fn dispatch(hub: &Arc<Hub>, job: &Job) -> Result<(), StoreError> {
    let outcome = match hub.store.invocation(job.subject).await? {
        None => "missing",
        Some(invocation) => {
            let installation = hub.installations.lookup(invocation.app_id).await?;
            match installation.installation.map(|i| i.state) {
                Some(InstallationState::Active) => "gateway",
                _ => "inactive",
            }
        }
    };
    hub.store.finish_job(job.id).await?;
    metrics::counter!(names::COMMAND_DISPATCHES, "outcome" => outcome).increment(1);
    Ok(())
}
