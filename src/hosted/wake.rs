//! Beatless runs (ADR 0031 §8): a beatless card has no long-running
//! process. The verdict that writes `app/message/received` for it writes a
//! `hosted_wake` job in the same transaction; this job starts a run of the
//! card when the app has unacknowledged mail and none of its runs is live
//! (the store holds at most one, `app_runs_one_live_alone`). While one is,
//! the job waits (`hosted.wake_retry_ms`, not counted as an attempt): the
//! live run may read the new mail, and if it ended without, the job's
//! next turn starts the next run. The entry reads from the acked seq and
//! acknowledges as it goes, so mail is handled in order, one run at a time.

use std::sync::Arc;

use super::{Source, StartError};
use crate::domain::hosted::RunRefusal;
use crate::domain::now_millis;
use crate::hub::Hub;
use crate::store::{Job, StoreError};

pub async fn run(hub: &Arc<Hub>, job: &Job) -> Result<(), StoreError> {
    let app = job.subject;
    let Some(card_id) = hub.store.beatless_card_of(app).await? else {
        return hub.store.finish_job(job.id).await;
    };
    let pos = hub.store.stream_position(app).await?;
    if pos.last_seq <= pos.acked_seq {
        // An earlier run read this mail already.
        return hub.store.finish_job(job.id).await;
    }
    match super::start(hub, &Source::Card(card_id.clone())).await {
        Ok(started) => {
            tracing::info!(run = %started.run.id, card = %card_id, "beatless app woken by its mail");
            hub.store.finish_job(job.id).await
        }
        Err(StartError::Refused {
            refusal: RunRefusal::AppBusy | RunRefusal::TooManyRuns,
            ..
        }) => {
            let wait = hub.config.hosted.wake_retry_ms as i64;
            hub.store.defer_job(job.id, now_millis() + wait).await
        }
        Err(StartError::Refused { refusal, .. }) => {
            // Suspended, uninstalled, a package that no longer verifies:
            // the mail stays in the app's log; nothing runs it.
            tracing::warn!(card = %card_id, code = refusal.code(), "beatless app not woken");
            hub.store.finish_job(job.id).await
        }
        Err(StartError::Internal(m)) => Err(StoreError::Conflict(m)),
    }
}
