//! `app_url_verify` (ADR 0032 §2): the check of an app's new
//! `interactionsUrl`, written in the registration's or the upgrade's
//! transaction and run after its commit. A store failure runs it again
//! (the check is two requests that change nothing at the app).

use std::sync::Arc;

use crate::hub::Hub;
use crate::store::{Job, StoreError};

pub(super) async fn run(hub: &Arc<Hub>, job: &Job) -> Result<(), StoreError> {
    crate::app_url::verify::run(
        hub.store.as_ref(),
        &hub.interactions,
        &hub.sync_epoch,
        job.subject,
    )
    .await?;
    hub.store.finish_job(job.id).await
}
