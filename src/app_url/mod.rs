//! Requests to an app's `interactionsUrl` (ADR 0032): the app's way, the
//! verification ([`verify`]) and autocomplete ([`ask`]); the dispatch
//! jobs' deliveries are `jobs::deliver`. All send through
//! `webhooks::interactions::Client`, so what the app verifies in its check
//! is what it verifies later.
//!
//! Nothing here logs or counts a URL path, a header value, a body or a
//! signature: the app, the kind, the outcome, the reason and the host.

pub mod ask;
pub mod verify;

use uuid::Uuid;

use crate::domain::app_reply::Reason;
use crate::domain::installation::InstallationState;
use crate::hub::Hub;
use crate::store::StoreError;
use crate::telemetry::names;

/// How an app receives its commands and interactions now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Way {
    /// Over its socket: the event written with the invocation is the
    /// delivery.
    Gateway,
    /// The installation is not active (or the app is gone); with the URL
    /// its manifest names, if any, which the delivery's outcome
    /// (`inactive`) is counted and logged for.
    Inactive(Option<String>),
    /// A URL that has not passed its check: nothing is sent.
    Unverified,
    /// Its verified URL.
    Url(String),
}

/// The app's way, from its manifest, its cached installation and its
/// URL's last check.
pub async fn way(hub: &Hub, app_id: Uuid) -> Result<Way, StoreError> {
    let Some(app) = hub.store.app(app_id).await? else {
        return Ok(Way::Inactive(None));
    };
    let url = app.manifest.delivery.interactions_url;
    if !active(hub, app_id).await? {
        return Ok(Way::Inactive(url));
    }
    let Some(url) = url else {
        return Ok(Way::Gateway);
    };
    let check = hub.store.url_check(app_id).await?.unwrap_or_default();
    Ok(if check.verifies(&url) {
        Way::Url(url)
    } else {
        Way::Unverified
    })
}

/// Whether the app's installation is active now.
pub async fn active(hub: &Hub, app_id: Uuid) -> Result<bool, StoreError> {
    Ok(hub
        .installations
        .get(app_id)
        .await?
        .is_some_and(|i| i.state == InstallationState::Active))
}

/// The closed outcome of one request, for its log line and its count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivered {
    Answered,
    Deferred,
    Failed(Reason),
    /// No request went out: the installation is not active, the re-check
    /// refused, the event is no longer held, or (`unrecorded`) a rerun
    /// found the job's request already started. Counted as `not_sent`,
    /// never as a request.
    NotSent(Reason),
}

/// Logs and counts one request's outcome: the app, the kind, the outcome,
/// the reason and the host, never the path.
pub fn record(app: Uuid, kind: &'static str, url: &str, outcome: Delivered) {
    let host = url::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default();
    let (label, reason) = match outcome {
        Delivered::Answered => ("answered", ""),
        Delivered::Deferred => ("deferred", ""),
        Delivered::NotSent(r) => ("not_sent", r.as_str()),
        Delivered::Failed(r) => ("failed", r.as_str()),
    };
    metrics::counter!(names::INTERACTION_DELIVERIES, "app" => app.to_string(), "kind" => kind, "outcome" => label, "reason" => reason)
        .increment(1);
    match outcome {
        Delivered::NotSent(_) => {
            tracing::warn!(app = %app, kind, outcome = label, reason, host = %host, "interactions_url request not sent")
        }
        Delivered::Failed(_) => {
            tracing::warn!(app = %app, kind, outcome = label, reason, host = %host, "interactions_url request")
        }
        _ => {
            tracing::info!(app = %app, kind, outcome = label, host = %host, "interactions_url request")
        }
    }
}
