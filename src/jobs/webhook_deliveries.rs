//! The webhook subscription worker (ADR 0033): claims due subscriptions
//! and walks each one's cursor over its app's log, one event in flight at a
//! time, in seq order. The log is the outbox: nothing is written on the
//! send path, the cursor moves only when a 2xx is recorded, so a crash
//! repeats at most the event in flight, with the same `webhook-id`.
//!
//! Claims carry this process's owner id: several hub processes may share
//! one PostgreSQL database, so a process gives back only its own claims
//! (at shutdown, once its loops have ended) and lets a dead one's lapse.

use std::sync::Arc;
use std::time::Duration;

use tracing::{info, warn};

use super::webhook_attempt::{self, Step};
use crate::domain::now_millis;
use crate::hub::Hub;
use crate::store::{Claimed, Next, StoreError};

pub async fn run(hub: Arc<Hub>) {
    let cfg = hub.config.webhooks.clone();
    let mut tick = tokio::time::interval(Duration::from_millis(cfg.poll_interval_ms));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut prune =
        tokio::time::interval(Duration::from_millis(hub.config.events.prune_interval_ms));
    let running = Arc::new(tokio::sync::Semaphore::new(cfg.max_concurrent as usize));
    loop {
        tokio::select! {
            _ = tick.tick() => claim(&hub, &running).await,
            _ = prune.tick() => prune_log(&hub).await,
            _ = hub.shutdown.cancelled() => break,
        }
    }
    give_back(&hub, &running).await;
}

/// Shutdown: once the loops have ended (each ends after its request in
/// flight, bounded by `egress.request_timeout_ms`), whatever claim of this
/// process is left is given back, so the next process need not wait for it
/// to lapse. Never another process's: it may be alive.
async fn give_back(hub: &Arc<Hub>, running: &Arc<tokio::sync::Semaphore>) {
    let all = hub.config.webhooks.max_concurrent;
    let wait = Duration::from_millis(hub.config.webhooks.claim_ms);
    if tokio::time::timeout(wait, running.acquire_many(all))
        .await
        .is_err()
    {
        return warn!("webhook loops still running at shutdown; their claims lapse");
    }
    match hub.store.release_webhook_claims(hub.runs.owner()).await {
        Ok(0) => {}
        Ok(n) => info!(subscriptions = n, "gave back this process's webhook claims"),
        Err(e) => warn!(error = %e, "could not give back webhook claims; they lapse"),
    }
}

/// Claims as many due subscriptions as there is room for and runs each.
async fn claim(hub: &Arc<Hub>, running: &Arc<tokio::sync::Semaphore>) {
    let room = running.available_permits() as u32;
    if room == 0 {
        return;
    }
    let now = now_millis();
    let until = now + hub.config.webhooks.claim_ms as i64;
    let owner = hub.runs.owner();
    let claimed = match hub.store.claim_subscriptions(now, until, room, owner).await {
        Ok(c) => c,
        Err(e) => return warn!(error = %e, "claiming webhook subscriptions failed"),
    };
    for c in claimed {
        let permit = running
            .clone()
            .try_acquire_owned()
            .expect("claimed within the room");
        let hub2 = hub.clone();
        hub.tasks.spawn(async move {
            deliver(&hub2, c).await;
            drop(permit);
        });
    }
}

/// Steps through the subscription's events while its claim holds and the
/// receiver takes them; a failure, a caught-up cursor or shutdown ends it.
async fn deliver(hub: &Arc<Hub>, claimed: Claimed) {
    let Claimed {
        mut subscription,
        token,
    } = claimed;
    loop {
        if hub.shutdown.is_cancelled() {
            return release(hub, &subscription, token).await;
        }
        match webhook_attempt::step(hub, &subscription, token).await {
            Ok(Step::Continue { cursor }) => {
                subscription.cursor = cursor;
                subscription.attempts = 0;
                subscription.failing_since = None;
            }
            Ok(Step::Stop) => return,
            Err(e) => {
                // The claim lapses and the event is tried again then.
                warn!(subscription = %subscription.id, error = %e, "webhook delivery step failed");
                return;
            }
        }
    }
}

/// Gives the claim back with the cursor where it is (shutdown).
async fn release(hub: &Arc<Hub>, s: &crate::store::SubscriptionRecord, token: uuid::Uuid) {
    let next = Next::Skip {
        cursor: s.cursor,
        keep_until: None,
    };
    let released: Result<_, StoreError> = hub
        .store
        .record_delivery(s.id, token, None, next, now_millis())
        .await;
    if let Err(e) = released {
        warn!(subscription = %s.id, error = %e, "could not release a webhook claim; it lapses");
    }
}

/// The delivery log keeps `webhooks.delivery_log_retention_hours`.
async fn prune_log(hub: &Arc<Hub>) {
    let hours = hub.config.webhooks.delivery_log_retention_hours as i64;
    let before = now_millis() - hours.saturating_mul(3_600_000);
    match hub.store.prune_attempts(before).await {
        Ok(0) => {}
        Ok(n) => info!(deleted = n, "pruned webhook attempts past retention"),
        Err(e) => warn!(error = %e, "webhook attempt pruning failed"),
    }
}
