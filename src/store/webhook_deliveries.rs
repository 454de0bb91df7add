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

/// What a record came to, when the claim was still the worker's.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    /// A disable's `app/webhook/disabled`; empty otherwise.
    pub events: Vec<StoredEvent>,
    /// The claim is still held (a record that keeps it, on an installation
    /// that is still active with `events:subscribe`): the worker may go
    /// on. `false`: it was given back, and the worker lets go.
    pub kept: bool,
}

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
    /// Claims, for the process `owner`, up to `limit` subscriptions that
    /// are active, due, not held, behind their app's log, and whose app's
    /// installation is active with `events:subscribe` held (the pause).
    /// A read finds them first: a poll with nothing to do writes nothing.
    async fn claim_subscriptions(
        &self,
        now: Millis,
        until: Millis,
        limit: u32,
        owner: Uuid,
    ) -> StoreResult<Vec<Claimed>>;

    /// Records `attempt` (if any) and `next` in one transaction, if the
    /// claim is still `token`'s. `None`: the claim was lost and nothing was
    /// written. A record that would keep the claim gives it back instead
    /// when the app's installation is no longer active with
    /// `events:subscribe` (the pause, within a running loop).
    async fn record_delivery(
        &self,
        id: Uuid,
        token: Uuid,
        attempt: Option<&Attempt>,
        next: Next,
        now: Millis,
    ) -> StoreResult<Option<Recorded>>;

    /// The last seq of `app_id`'s log (0 before its first event), whether
    /// retention kept that event or not.
    async fn stream_head(&self, app_id: Uuid) -> StoreResult<u64>;

    /// Whether `app_id`'s installation is active and holds
    /// `events:subscribe` now: checked again before each send.
    async fn subscription_allowed(&self, app_id: Uuid) -> StoreResult<bool>;

    /// The claims the process `owner` holds, given back (its shutdown,
    /// once its loops have ended). Another process's claims lapse at their
    /// `claimed_until`: it may be alive, on the same PostgreSQL.
    async fn release_webhook_claims(&self, owner: Uuid) -> StoreResult<u64>;

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

/// The claim conditions on subscription `w`: active, due at `now` (a
/// placeholder), not held, behind its app's log, its installation allowing
/// it.
fn claimable(now: &str) -> String {
    format!(
        "w.state = 'active' AND w.next_attempt_at <= {now} \
         AND (w.claimed_until IS NULL OR w.claimed_until < {now}) \
         AND EXISTS (SELECT 1 FROM event_streams s WHERE s.audience = w.app_id AND s.last_seq > w.cursor) \
         AND {}",
        allowed("w")
    )
}

/// `EXISTS`: the app of subscription row `w` has an active installation
/// holding `events:subscribe`.
fn allowed(w: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM installations i WHERE i.app_id = {w}.app_id AND i.state = 'active' \
         AND {HOLDS_EVENTS_SUBSCRIBE})"
    )
}

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

/// The claim columns of a record: kept until `$5` while the installation
/// still allows deliveries, given back otherwise (and always when the
/// record does not keep it).
fn keep_or_release(keep: bool) -> String {
    if !keep {
        return "claimed_until = NULL, claim_token = NULL, claim_owner = NULL".into();
    }
    let allowed = allowed("webhook_subscriptions");
    format!(
        "claimed_until = CASE WHEN {allowed} THEN $5 ELSE NULL END, \
         claim_token = CASE WHEN {allowed} THEN claim_token ELSE NULL END, \
         claim_owner = CASE WHEN {allowed} THEN claim_owner ELSE NULL END"
    )
}

#[async_trait]
impl<D: Database + JobDialect> WebhookDeliveryStore for D {
    async fn claim_subscriptions(
        &self,
        now: Millis,
        until: Millis,
        limit: u32,
        owner: Uuid,
    ) -> StoreResult<Vec<Claimed>> {
        // The read first: most polls find nothing, and an UPDATE would
        // take the writer lock (SQLite) for it on every poll.
        let due = format!(
            "SELECT w.id FROM webhook_subscriptions w WHERE {} LIMIT 1",
            claimable("$1")
        );
        let probe = [Arg::Int(now)];
        if self
            .read()
            .await?
            .fetch_optional(&due, &probe)
            .await?
            .is_none()
        {
            return Ok(Vec::new());
        }
        let token = Uuid::new_v4();
        // The row lock (PostgreSQL) is on the subscription alone: the
        // conditions on the log and the installation are EXISTS, so the
        // claim never holds an append or a lifecycle change.
        let sql = format!(
            "UPDATE webhook_subscriptions SET claimed_until = $1, claim_token = $2, claim_owner = $5 \
             WHERE id IN (SELECT w.id FROM webhook_subscriptions w WHERE {} \
              ORDER BY w.next_attempt_at LIMIT $4{}) \
             RETURNING {SUBSCRIPTION_COLUMNS}",
            claimable("$3"),
            D::SKIP_LOCKED
        );
        let owner = owner.to_string();
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
                    Arg::Text(&owner),
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
    ) -> StoreResult<Option<Recorded>> {
        let mut tx = self.begin().await?;
        let held =
            "id = $1 AND claim_token = $2 AND claimed_until IS NOT NULL AND state = 'active'";
        let mut recorded = Recorded {
            events: Vec::new(),
            kept: false,
        };
        let changed = match next {
            Next::Advance { cursor, keep_until } | Next::Skip { cursor, keep_until } => {
                let delivered = match next {
                    Next::Advance { .. } => {
                        "attempts = 0, failing_since = NULL, next_attempt_at = $4, "
                    }
                    _ => "",
                };
                let sql = format!(
                    "UPDATE webhook_subscriptions SET cursor = $3, {delivered}{}, updated_at = $4 \
                     WHERE {held} AND cursor <= $3 RETURNING claim_token",
                    keep_or_release(keep_until.is_some())
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
                match tx.fetch_optional(&sql, &args).await? {
                    Some(row) => {
                        recorded.kept = row.opt_id("claim_token")?.is_some();
                        1
                    }
                    None => 0,
                }
            }
            Next::Retry { cursor, at } => {
                let sql = format!(
                    "UPDATE webhook_subscriptions SET cursor = $5, attempts = attempts + 1, \
                     failing_since = COALESCE(failing_since, $3), next_attempt_at = $4, \
                     claimed_until = NULL, claim_token = NULL, claim_owner = NULL, updated_at = $3 \
                     WHERE {held} AND cursor <= $5"
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
                    recorded.events = disable_in(&mut *tx, id, reason, now)
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
        Ok(Some(recorded))
    }

    async fn stream_head(&self, app_id: Uuid) -> StoreResult<u64> {
        let row = self
            .read()
            .await?
            .fetch_optional(
                "SELECT last_seq FROM event_streams WHERE audience = $1",
                &[Arg::Id(app_id)],
            )
            .await?;
        Ok(row.map_or(Ok(0), |r| r.int("last_seq"))?.max(0) as u64)
    }

    async fn subscription_allowed(&self, app_id: Uuid) -> StoreResult<bool> {
        let sql = format!(
            "SELECT 1 AS one FROM installations i WHERE i.app_id = $1 AND i.state = 'active' \
             AND {HOLDS_EVENTS_SUBSCRIBE}"
        );
        Ok(self
            .read()
            .await?
            .fetch_optional(&sql, &[Arg::Id(app_id)])
            .await?
            .is_some())
    }

    async fn release_webhook_claims(&self, owner: Uuid) -> StoreResult<u64> {
        let owner = owner.to_string();
        self.write()
            .await?
            .execute(
                "UPDATE webhook_subscriptions SET claimed_until = NULL, claim_token = NULL, \
                 claim_owner = NULL WHERE claim_owner = $1 AND claimed_until IS NOT NULL",
                &[Arg::Text(&owner)],
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
