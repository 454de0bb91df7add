//! One step of a claimed subscription (ADR 0033): read the app's log
//! after the cursor, find the next event of the subscription's types, send
//! it, record what came of it. Reading, sending and recording are three
//! separate steps: no network call inside a transaction.

use std::sync::Arc;
use std::time::Instant;

use rand::Rng;
use tracing::{info, warn};
use uuid::Uuid;

use crate::domain::event::StoredEvent;
use crate::domain::webhook::{retry_after_ms, AfterFailure, Backoff, DisabledReason, Outcome};
use crate::domain::{now_millis, Millis};
use crate::hub::Hub;
use crate::store::{Attempt, Next, StoreError, SubscriptionRecord};
use crate::telemetry::names;
use crate::webhooks::egress::Outcome as Sent;
use crate::webhooks::{sender, subscription_secret};

use super::webhook_log::{self, Window};

/// Whether the worker goes on with this subscription.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// The claim holds; the cursor is now `cursor`.
    Continue { cursor: u64 },
    /// Caught up, failed (a retry is scheduled), disabled, or the claim
    /// was lost: the worker lets go.
    Stop,
}

pub(super) async fn step(
    hub: &Arc<Hub>,
    sub: &SubscriptionRecord,
    token: Uuid,
) -> Result<Step, StoreError> {
    let cfg = &hub.config.webhooks;
    let window =
        webhook_log::read(hub.store.as_ref(), sub.app_id, sub.cursor, cfg.read_batch).await?;
    let keep = Some(now_millis() + cfg.claim_ms as i64);
    let events = match window {
        Window::Events(events) => events,
        // Retention took events the cursor had not reached (the claim saw
        // the log ahead of it).
        Window::Gap { first_held } => return pruned(hub, sub, token, first_held, keep).await,
        Window::CaughtUp => {
            let next = Next::Skip {
                cursor: sub.cursor,
                keep_until: None,
            };
            record(hub, sub, token, None, next).await?;
            return Ok(Step::Stop);
        }
    };
    let Some(event) = events
        .iter()
        .find(|e| sub.event_types.contains(&e.event_type))
    else {
        let cursor = events.last().map_or(sub.cursor, |e| e.seq);
        let next = Next::Skip {
            cursor,
            keep_until: keep,
        };
        return Ok(match record(hub, sub, token, None, next).await? {
            true => Step::Continue { cursor },
            false => Step::Stop,
        });
    };
    attempt(hub, sub, token, event).await
}

/// The installation was suspended or uninstalled, or lost
/// `events:subscribe`, since the claim: no request; the claim is given back
/// with the cursor where it is, and the next claim after a resume goes on
/// from there.
async fn paused(hub: &Arc<Hub>, sub: &SubscriptionRecord, token: Uuid) -> Result<Step, StoreError> {
    info!(subscription = %sub.id, app = %sub.app_id, "webhook deliveries paused with the installation");
    let next = Next::Skip {
        cursor: sub.cursor,
        keep_until: None,
    };
    record(hub, sub, token, None, next).await?;
    Ok(Step::Stop)
}

/// Retention took events the cursor had not reached: recorded, logged,
/// and the cursor moves to the oldest still held. Never silent.
async fn pruned(
    hub: &Arc<Hub>,
    sub: &SubscriptionRecord,
    token: Uuid,
    first_held: u64,
    keep: Option<Millis>,
) -> Result<Step, StoreError> {
    let now = now_millis();
    warn!(subscription = %sub.id, app = %sub.app_id, missed_from = sub.cursor + 1, missed_to = first_held - 1,
        "events were pruned before this subscription delivered them");
    count(sub, Outcome::Pruned);
    let attempt = Attempt {
        subscription_id: sub.id,
        app_id: sub.app_id,
        event_id: None,
        seq: first_held - 1,
        attempt: 1,
        at: now,
        duration_ms: 0,
        outcome: Outcome::Pruned,
        status: None,
        next_attempt_at: None,
    };
    let cursor = first_held - 1;
    let next = Next::Skip {
        cursor,
        keep_until: keep,
    };
    Ok(match record(hub, sub, token, Some(&attempt), next).await? {
        true => Step::Continue { cursor },
        false => Step::Stop,
    })
}

/// What one request came to.
struct Sending {
    outcome: Outcome,
    status: Option<u16>,
    retry_after_ms: Option<u64>,
}

async fn attempt(
    hub: &Arc<Hub>,
    sub: &SubscriptionRecord,
    token: Uuid,
    event: &StoredEvent,
) -> Result<Step, StoreError> {
    let started = Instant::now();
    let now = now_millis();
    let Some(sent) = send(hub, sub, event, now).await? else {
        return paused(hub, sub, token).await;
    };
    let took = started.elapsed();
    let duration_ms = took.as_millis().min(u128::from(u64::MAX)) as u64;
    let done = now_millis();
    let number = sub.attempts.saturating_add(1);
    let next = next_state(hub, sub, event, &sent, number, done);
    let attempt = Attempt {
        subscription_id: sub.id,
        app_id: sub.app_id,
        event_id: Some(event.id),
        seq: event.seq,
        attempt: number,
        at: now,
        duration_ms,
        outcome: sent.outcome,
        status: sent.status,
        next_attempt_at: match next {
            Next::Retry { at, .. } => Some(at),
            _ => None,
        },
    };
    count(sub, sent.outcome);
    metrics::histogram!(names::WEBHOOK_ATTEMPT_DURATION, "outcome" => sent.outcome.as_str())
        .record(took.as_secs_f64());
    info!(subscription = %sub.id, app = %sub.app_id, event = %event.id, seq = event.seq, attempt = number,
        outcome = sent.outcome.as_str(), status = sent.status, ms = duration_ms, "webhook attempt");
    let kept = record(hub, sub, token, Some(&attempt), next).await?;
    Ok(match next {
        Next::Advance { cursor, .. } if kept => Step::Continue { cursor },
        _ => Step::Stop,
    })
}

/// Delivered moves on; 410 disables; a failure past
/// `webhooks.disable_after_hours` disables; any other failure retries the
/// same event after the backoff or the receiver's `Retry-After`.
fn next_state(
    hub: &Arc<Hub>,
    sub: &SubscriptionRecord,
    event: &StoredEvent,
    sent: &Sending,
    number: u32,
    now: Millis,
) -> Next {
    let cfg = &hub.config.webhooks;
    match sent.outcome {
        Outcome::Delivered => {
            return Next::Advance {
                cursor: event.seq,
                keep_until: Some(now + cfg.claim_ms as i64),
            }
        }
        Outcome::Gone => return Next::Disable(DisabledReason::Gone),
        _ => {}
    }
    let backoff = Backoff {
        base_ms: cfg.retry_base_ms,
        max_delay_ms: cfg.retry_max_delay_secs.saturating_mul(1_000),
    };
    let disable_after = (cfg.disable_after_hours as i64).saturating_mul(3_600_000);
    let jitter: f64 = rand::thread_rng().gen();
    let failing_since = sub.failing_since;
    match backoff.after_failure(
        failing_since,
        now,
        disable_after,
        number,
        jitter,
        sent.retry_after_ms,
    ) {
        AfterFailure::Disable => Next::Disable(DisabledReason::Failing),
        AfterFailure::RetryAt(at) => Next::Retry {
            cursor: event.seq - 1,
            at,
        },
    }
}

/// The body is the stored envelope with `syncEpoch`, as on the gateway and
/// in catch-up; `webhook-id` is the event id. `None`: the installation no
/// longer allows deliveries, seen just before the request, which is not
/// sent.
async fn send(
    hub: &Arc<Hub>,
    sub: &SubscriptionRecord,
    event: &StoredEvent,
    now: Millis,
) -> Result<Option<Sending>, StoreError> {
    let sending = |outcome, status, retry_after_ms| {
        Ok(Some(Sending {
            outcome,
            status,
            retry_after_ms,
        }))
    };
    // The egress client's own URL rules first, counted in
    // `switchboard_egress_blocked_total` as its refusals are: no secret is
    // opened and nothing is signed for a URL it would refuse.
    if hub.webhook_egress.admit(&sub.url).is_err() {
        warn!(subscription = %sub.id, app = %sub.app_id, reason = "not_allowed", "webhook not sent");
        return sending(Outcome::Blocked, None, None);
    }
    let hmac = match secret(hub, sub).await {
        Ok(h) => h,
        Err(e) => {
            warn!(subscription = %sub.id, error = %e, "webhook not sent: its v1 secret does not open");
            return sending(Outcome::Unsigned, None, None);
        }
    };
    let id = event.id.to_string();
    let request = sender::EventRequest {
        url: &sub.url,
        webhook_id: &id,
        hmac,
        body: crate::events::webhook_body(event, &hub.sync_epoch),
    };
    let signed =
        match sender::sign_event(hub.store.as_ref(), &hub.config.webhooks, request, now).await {
            Ok(s) => s,
            Err(e) => {
                warn!(subscription = %sub.id, error = %e, "webhook not sent");
                return sending(Outcome::Unsigned, None, None);
            }
        };
    // The last read before the request: a pause committed before it sends
    // nothing; one committed after it finds at most this request started.
    if !hub.store.subscription_allowed(sub.app_id).await? {
        return Ok(None);
    }
    let answered = signed.post(&hub.webhook_egress).await;
    let retry_after = answered
        .retry_after
        .as_deref()
        .and_then(|v| retry_after_ms(v, now_millis()));
    match answered.outcome {
        Sent::Ok { status, .. } => sending(Outcome::of_status(status), Some(status), retry_after),
        Sent::Redirect { status } => sending(Outcome::Redirect, Some(status), None),
        Sent::Timeout => sending(Outcome::Timeout, None, None),
        Sent::Blocked { .. } => sending(Outcome::Blocked, None, None),
        Sent::TooLarge => sending(Outcome::TooLarge, None, None),
        Sent::Transport { .. } => sending(Outcome::Transport, None, None),
    }
}

async fn secret(
    hub: &Hub,
    sub: &SubscriptionRecord,
) -> anyhow::Result<Option<crate::webhooks::signature::SigningSecret>> {
    if !sub.hmac {
        return Ok(None);
    }
    let Some(sealed) = hub.store.subscription_secret(sub.id).await? else {
        return Ok(None);
    };
    subscription_secret::open_sealed(&hub.config.webhooks, sub.id, &sealed).map(Some)
}

/// A record that asked to keep the claim.
fn wants_claim(next: Next) -> bool {
    matches!(
        next,
        Next::Advance {
            keep_until: Some(_),
            ..
        } | Next::Skip {
            keep_until: Some(_),
            ..
        }
    )
}

fn count(sub: &SubscriptionRecord, outcome: Outcome) {
    metrics::counter!(names::WEBHOOK_ATTEMPTS, "app" => sub.app_id.to_string(), "outcome" => outcome.as_str())
        .increment(1);
}

/// Records the attempt and the next state; publishes a disable's event.
/// `false`: the worker lets go (the claim was lost to another worker, or
/// given back: released, or the installation no longer allows deliveries).
async fn record(
    hub: &Arc<Hub>,
    sub: &SubscriptionRecord,
    token: Uuid,
    attempt: Option<&Attempt>,
    next: Next,
) -> Result<bool, StoreError> {
    let recorded = hub
        .store
        .record_delivery(sub.id, token, attempt, next, now_millis())
        .await?;
    let Some(recorded) = recorded else {
        warn!(subscription = %sub.id, "webhook claim lost before its record; another worker has it");
        return Ok(false);
    };
    if let Next::Disable(reason) = next {
        metrics::counter!(names::WEBHOOK_DISABLED, "reason" => reason.as_str()).increment(1);
        warn!(subscription = %sub.id, app = %sub.app_id, reason = reason.as_str(), "webhook subscription disabled");
        hub.events.publish(&recorded.events);
    }
    if !recorded.kept && wants_claim(next) {
        info!(subscription = %sub.id, app = %sub.app_id, "webhook deliveries paused with the installation");
    }
    Ok(recorded.kept)
}
