//! `app_command_dispatch` (ADR 0027 §4, ADR 0032 §3): hands an invocation
//! to its app's way in. Over the gateway the event written with the
//! invocation is the delivery, so the job only finishes. A verified
//! `interactionsUrl` gets the event as one signed POST after the rights of
//! this moment are re-checked, and a 200's reply is written as the app; an
//! unverified one gets nothing (a warning names the app and the reason,
//! never the URL). An app no longer active gets nothing more. One attempt:
//! the job is marked sent before its request (`jobs::deliver`), so a rerun
//! after a store failure sends nothing and one after a crash repeats the
//! same `webhook-id` once.

use std::sync::Arc;

use super::deliver;
use crate::app_url::{self, record, Delivered, Way};
use crate::domain::app_reply::Reason;
use crate::hub::Hub;
use crate::store::{Job, StoreError};
use crate::telemetry::names;

pub(super) async fn dispatch(hub: &Arc<Hub>, job: &Job) -> Result<(), StoreError> {
    let outcome = match hub.store.invocation(job.subject).await? {
        None => "missing",
        Some(invocation) => match app_url::way(hub, invocation.app_id).await? {
            Way::Inactive(url) => {
                if let Some(url) = url {
                    let inactive = Delivered::NotSent(Reason::Inactive);
                    record(invocation.app_id, "command", &url, inactive);
                }
                "inactive"
            }
            Way::Gateway => "gateway",
            Way::Unverified => {
                tracing::warn!(app = %invocation.app_id, reason = "url_unverified", "command invocation not sent");
                "url_unverified"
            }
            Way::Url(url) => match hub.store.principal(invocation.actor_id).await? {
                None => "missing",
                Some(actor) => {
                    deliver::command(hub, job, &invocation, actor.kind, &url).await?;
                    "interactions_url"
                }
            },
        },
    };
    hub.store.finish_job(job.id).await?;
    metrics::counter!(names::COMMAND_DISPATCHES, "outcome" => outcome).increment(1);
    Ok(())
}
