//! The delivery half of webhook subscriptions (ADR 0033): claiming due
//! subscriptions, recording each attempt with the subscription's next
//! state in one transaction, and the delivery log. No network call happens
//! in any of these: the worker reads, sends, then records.

use async_trait::async_trait;
use uuid::Uuid;

use super::jobs::JobDialect;
use super::sql::{parsed, Arg, Database, Row};
use super::webhook_subscriptions::{
    disable_in, subscription_row, SubscriptionRecord, SUBSCRIPTION_COLUMNS,
};
use super::StoreResult;
use crate::domain::event::StoredEvent;
use crate::domain::webhook::{DisabledReason, Outcome};
use crate::domain::Millis;

/// A subscription the worker holds until `claimed_until` or its record.
#[derive(Clone, Debug)]
pub struct Claimed {
    pub subscription: SubscriptionRecord,
    /// Every record must present it: a worker whose claim lapsed and was
    /// taken by another cannot move the cursor.
    pub token: Uuid,
}

/// One attempt, as the delivery log keeps it: never a body, header, URL
/// or signature.
#[derive(Clone, Debug, PartialEq)]
pub struct Attempt {
    pub subscription_id: Uuid,
    pub app_id: Uuid,
    /// `None` for a `pruned` gap.
    pub event_id: Option<Uuid>,
    pub seq: u64,
    /// 1 for the first attempt at this event.
    pub attempt: u32,
    pub at: Millis,
    pub duration_ms: u64,
    pub outcome: Outcome,
    pub status: Option<u16>,
    /// When the next attempt is due, for a retry.
    pub next_attempt_at: Option<Millis>,
}

/// What becomes of the subscription with an attempt.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Next {
    /// The event at `cursor` was delivered: the failure state clears. The
    /// claim is kept until `keep_until` (the worker goes on) or released
    /// (`None`).
    Advance {
        cursor: u64,
        keep_until: Option<Millis>,
    },
    /// Events up to `cursor` are not this subscription's (or are gone):
    /// the cursor moves, the failure state of the event after it stays.
    /// `cursor` at the subscription's own gives the claim back.
    Skip {
        cursor: u64,
        keep_until: Option<Millis>,
    },
    /// The event after `cursor` again at `at`; the first failure starts
    /// the failing time.
    Retry {
        cursor: u64,
        at: Millis,
    },
    Disable(DisabledReason),
}

#[async_trait]
pub trait WebhookDeliveryStore: Send + Sync + 'static {
    /// Claims up to `limit` subscriptions that are active, due, not held,
    /// behind their app's log, and whose app's installation is active with
    /// `events:subscribe` held (the pause).
    async fn claim_subscriptions(
        &self,
        now: Millis,
        until: Millis,
        limit: u32,
    ) -> StoreResult<Vec<Claimed>>;

    /// Records `attempt` (if any) and `next` in one transaction, if the
    /// claim is still `token`'s. `None`: the claim was lost and nothing was
    /// written. A disable answers the `app/webhook/disabled` event it wrote.
    async fn record_delivery(
        &self,
        id: Uuid,
        token: Uuid,
        attempt: Option<&Attempt>,
        next: Next,
        now: Millis,
    ) -> StoreResult<Option<Vec<StoredEvent>>>;

    /// Startup: claims left by a process that is gone.
    async fn release_webhook_claims(&self) -> StoreResult<u64>;

    /// The newest `limit` attempts of a subscription, newest first.
    async fn attempts(&self, subscription_id: Uuid, limit: u32) -> StoreResult<Vec<Attempt>>;

    /// Deletes attempts older than `before`.
    async fn prune_attempts(&self, before: Millis) -> StoreResult<u64>;
}

/// The effective scopes hold `events:subscribe`: granted and still
/// requested (ADR 0023).
const HOLDS_EVENTS_SUBSCRIBE: &str =
    "(',' || i.granted_scopes || ',') LIKE '%,events:subscribe,%' \
     AND (',' || i.requested_scopes || ',') LIKE '%,events:subscribe,%'";

const ATTEMPT_COLUMNS: &str = "subscription_id, app_id, event_id, seq, attempt, at, duration_ms, \
     outcome, status, next_attempt_at";

fn attempt_row(r: &Row) -> StoreResult<Attempt> {
    Ok(Attempt {
        subscription_id: r.id("subscription_id")?,
        app_id: r.id("app_id")?,
        event_id: r.opt_id("event_id")?,
        seq: r.int("seq")?.max(0) as u64,
        attempt: r.int("attempt")?.clamp(0, i64::from(u32::MAX)) as u32,
        at: r.int("at")?,
        duration_ms: r.int("duration_ms")?.max(0) as u64,
        outcome: parsed(r.text("outcome")?, "attempt outcome", Outcome::parse)?,
        status: r.opt_int("status")?.map(|s| s.clamp(0, 999) as u16),
        next_attempt_at: r.opt_int("next_attempt_at")?,
    })
}

#[async_trait]
impl<D: Database + JobDialect> WebhookDeliveryStore for D {
    async fn claim_subscriptions(
        &self,
        now: Millis,
        until: Millis,
        limit: u32,
    ) -> StoreResult<Vec<Claimed>> {
        let token = Uuid::new_v4();
        // The row lock (PostgreSQL) is on the subscription alone: the
        // conditions on the log and the installation are EXISTS, so the
        // claim never holds an append or a lifecycle change.
        let sql = format!(
            "UPDATE webhook_subscriptions SET claimed_until = $1, claim_token = $2 WHERE id IN \
             (SELECT w.id FROM webhook_subscriptions w WHERE w.state = 'active' AND w.next_attempt_at <= $3 \
              AND (w.claimed_until IS NULL OR w.claimed_until < $3) \
              AND EXISTS (SELECT 1 FROM event_streams s WHERE s.audience = w.app_id AND s.last_seq > w.cursor) \
              AND EXISTS (SELECT 1 FROM installations i WHERE i.app_id = w.app_id AND i.state = 'active' \
                          AND {HOLDS_EVENTS_SUBSCRIBE}) \
              ORDER BY w.next_attempt_at LIMIT $4{}) \
             RETURNING {SUBSCRIPTION_COLUMNS}",
            D::SKIP_LOCKED
        );
        let rows = self
            .write()
            .await?
            .fetch_all(
                &sql,
                &[
                    Arg::Int(until),
                    Arg::Id(token),
                    Arg::Int(now),
                    Arg::Int(i64::from(limit)),
                ],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(Claimed {
                    subscription: subscription_row(r)?,
                    token,
                })
            })
            .collect()
    }

    async fn record_delivery(
        &self,
        id: Uuid,
        token: Uuid,
        attempt: Option<&Attempt>,
        next: Next,
        now: Millis,
    ) -> StoreResult<Option<Vec<StoredEvent>>> {
        let mut tx = self.begin().await?;
        let held =
            "id = $1 AND claim_token = $2 AND claimed_until IS NOT NULL AND state = 'active'";
        let mut events = Vec::new();
        let changed = match next {
            Next::Advance { cursor, keep_until } | Next::Skip { cursor, keep_until } => {
                let release = match keep_until {
                    Some(_) => "claimed_until = $5",
                    None => "claimed_until = NULL, claim_token = NULL",
                };
                let delivered = match next {
                    Next::Advance { .. } => {
                        "attempts = 0, failing_since = NULL, next_attempt_at = $4, "
                    }
                    _ => "",
                };
                let sql = format!(
                    "UPDATE webhook_subscriptions SET cursor = $3, {delivered}{release}, updated_at = $4 \
                     WHERE {held} AND cursor <= $3"
                );
                let mut args = vec![
                    Arg::Id(id),
                    Arg::Id(token),
                    Arg::Int(cursor.min(i64::MAX as u64) as i64),
                    Arg::Int(now),
                ];
                if let Some(until) = keep_until {
                    args.push(Arg::Int(until));
                }
                tx.execute(&sql, &args).await?
            }
            Next::Retry { cursor, at } => {
                let sql = format!(
                    "UPDATE webhook_subscriptions SET cursor = $5, attempts = attempts + 1, \
                     failing_since = COALESCE(failing_since, $3), next_attempt_at = $4, \
                     claimed_until = NULL, claim_token = NULL, updated_at = $3 WHERE {held} AND cursor <= $5"
                );
                tx.execute(
                    &sql,
                    &[
                        Arg::Id(id),
                        Arg::Id(token),
                        Arg::Int(now),
                        Arg::Int(at),
                        Arg::Int(cursor.min(i64::MAX as u64) as i64),
                    ],
                )
                .await?
            }
            Next::Disable(reason) => {
                let sql = format!(
                    "UPDATE webhook_subscriptions SET updated_at = updated_at WHERE {held}"
                );
                let mine = tx.execute(&sql, &[Arg::Id(id), Arg::Id(token)]).await?;
                if mine == 1 {
                    events = disable_in(&mut *tx, id, reason, now)
                        .await?
                        .unwrap_or_default();
                }
                mine
            }
        };
        if changed != 1 {
            return Ok(None);
        }
        if let Some(a) = attempt {
            let sql = format!(
                "INSERT INTO webhook_attempts ({ATTEMPT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
            );
            tx.execute(
                &sql,
                &[
                    Arg::Id(a.subscription_id),
                    Arg::Id(a.app_id),
                    Arg::OptId(a.event_id),
                    Arg::Int(a.seq.min(i64::MAX as u64) as i64),
                    Arg::Int(i64::from(a.attempt)),
                    Arg::Int(a.at),
                    Arg::Int(a.duration_ms.min(i64::MAX as u64) as i64),
                    Arg::Text(a.outcome.as_str()),
                    Arg::OptInt(a.status.map(i64::from)),
                    Arg::OptInt(a.next_attempt_at),
                ],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(Some(events))
    }

    async fn release_webhook_claims(&self) -> StoreResult<u64> {
        self.write()
            .await?
            .execute(
                "UPDATE webhook_subscriptions SET claimed_until = NULL, claim_token = NULL \
                 WHERE claimed_until IS NOT NULL",
                &[],
            )
            .await
    }

    async fn attempts(&self, subscription_id: Uuid, limit: u32) -> StoreResult<Vec<Attempt>> {
        let sql = format!(
            "SELECT {ATTEMPT_COLUMNS} FROM webhook_attempts WHERE subscription_id = $1 \
             ORDER BY id DESC LIMIT $2"
        );
        let rows = self
            .read()
            .await?
            .fetch_all(
                &sql,
                &[Arg::Id(subscription_id), Arg::Int(i64::from(limit))],
            )
            .await?;
        rows.iter().map(attempt_row).collect()
    }

    async fn prune_attempts(&self, before: Millis) -> StoreResult<u64> {
        self.write()
            .await?
            .execute(
                "DELETE FROM webhook_attempts WHERE at < $1",
                &[Arg::Int(before)],
            )
            .await
    }
}
