//! Webhook subscriptions (ADR 0033): what an app subscribed, where its
//! cursor over the app's log stands, and the operator's changes. The
//! delivery half (claims, attempts, the delivery log) is in
//! `webhook_deliveries`.

use async_trait::async_trait;
use serde_json::json;
use uuid::Uuid;

use super::audit_actions::{ActionDetails, NewAction};
use super::identity::IdempotencyRecord;
use super::sql::{parsed, Arg, Database, Executor, Row};
use super::{StoreError, StoreResult};
use crate::domain::event::{NewEvent, StoredEvent};
use crate::domain::installation::{Actor, LifecycleAction};
use crate::domain::manifest::Manifest;
use crate::domain::webhook::{DisabledReason, Source, DISABLED_EVENT};
use crate::domain::Millis;

/// A subscription as stored; the sealed secret is read on its own
/// ([`WebhookStore::subscription_secret`]), only by the sender.
#[derive(Clone, Debug, PartialEq)]
pub struct SubscriptionRecord {
    pub id: Uuid,
    pub app_id: Uuid,
    pub source: Source,
    pub url: String,
    pub event_types: Vec<String>,
    /// Whether requests carry a `v1` signature besides `v1a`.
    pub hmac: bool,
    /// `None` while active.
    pub disabled: Option<DisabledReason>,
    /// The last seq of the app's log this subscription is done with.
    pub cursor: u64,
    /// Failed attempts at the event after the cursor.
    pub attempts: u32,
    pub failing_since: Option<Millis>,
    pub next_attempt_at: Millis,
    pub created_at: Millis,
    pub updated_at: Millis,
}

pub struct NewSubscription<'a> {
    pub id: Uuid,
    pub app_id: Uuid,
    pub source: Source,
    pub url: &'a str,
    pub event_types: &'a [String],
    /// The `v1` secret sealed for this id, if the app asked for one.
    pub sealed_secret: Option<&'a [u8]>,
    /// At most this many subscriptions per app.
    pub limit: u32,
    pub now: Millis,
    /// The `Idempotency-Key` record of the create, written in its
    /// transaction (ADR 0008); made from the stored subscription.
    pub idem: Option<&'a IdemFor<'a>>,
}

/// Builds a create's idempotency record from the subscription it stored.
pub type IdemFor<'a> = dyn Fn(&SubscriptionRecord) -> IdempotencyRecord + Send + Sync + 'a;

#[async_trait]
pub trait WebhookStore: Send + Sync + 'static {
    /// Stores a subscription whose cursor is the app's last seq now: it
    /// takes the events written after it. `Conflict("limit")` when the app
    /// holds `limit` already; `IdempotencyTaken` when its key was used.
    async fn create_subscription(
        &self,
        new: &NewSubscription<'_>,
    ) -> StoreResult<SubscriptionRecord>;

    async fn subscription(&self, id: Uuid) -> StoreResult<Option<SubscriptionRecord>>;

    /// The app's subscriptions, oldest first.
    async fn subscriptions_of(&self, app_id: Uuid) -> StoreResult<Vec<SubscriptionRecord>>;

    /// Every subscription after `after` by id, for the operator.
    async fn all_subscriptions(
        &self,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<SubscriptionRecord>>;

    /// Deletes the app's own subscription of source `api` (a manifest's
    /// follows its manifest): `Ok(false)` when there is none,
    /// `Conflict("manifest")` for a manifest's.
    async fn delete_subscription(&self, app_id: Uuid, id: Uuid) -> StoreResult<bool>;

    /// The sealed `v1` secret, if the subscription has one.
    async fn subscription_secret(&self, id: Uuid) -> StoreResult<Option<Vec<u8>>>;

    /// `actor` disables an active subscription (reason `operator`): the
    /// `app/webhook/disabled` event and the `webhook.disable` audit row are
    /// written in the same transaction; `None` if it is missing or disabled
    /// already.
    async fn disable_subscription(
        &self,
        id: Uuid,
        actor: Actor,
        now: Millis,
    ) -> StoreResult<Option<Vec<StoredEvent>>>;

    /// `actor` re-enables a subscription or makes a waiting one due now,
    /// clearing its failure state; the cursor stays. Audited
    /// (`webhook.retry`) in the same transaction. `false` if it is missing.
    async fn retry_subscription(&self, id: Uuid, actor: Actor, now: Millis) -> StoreResult<bool>;
}

pub(super) const SUBSCRIPTION_COLUMNS: &str = "id, app_id, source, url, event_types, \
     CASE WHEN sealed_secret IS NULL THEN 0 ELSE 1 END AS hmac, state, disabled_reason, cursor, \
     attempts, failing_since, next_attempt_at, created_at, updated_at";

pub(super) fn subscription_row(r: &Row) -> StoreResult<SubscriptionRecord> {
    let disabled = match r.text("state")?.as_str() {
        "active" => None,
        _ => Some(parsed(
            r.opt_text("disabled_reason")?.unwrap_or_default(),
            "disabled reason",
            DisabledReason::parse,
        )?),
    };
    Ok(SubscriptionRecord {
        id: r.id("id")?,
        app_id: r.id("app_id")?,
        source: parsed(r.text("source")?, "subscription source", Source::parse)?,
        url: r.text("url")?,
        event_types: serde_json::from_str(&r.text("event_types")?)
            .map_err(|e| StoreError::Corrupt(format!("subscription event types: {e}")))?,
        hmac: r.int("hmac")? == 1,
        disabled,
        cursor: r.int("cursor")?.max(0) as u64,
        attempts: r.int("attempts")?.clamp(0, i64::from(u32::MAX)) as u32,
        failing_since: r.opt_int("failing_since")?,
        next_attempt_at: r.int("next_attempt_at")?,
        created_at: r.int("created_at")?,
        updated_at: r.int("updated_at")?,
    })
}

/// Disables `id` if active and writes the app's event, in `tx`.
pub(super) async fn disable_in(
    tx: &mut dyn Executor,
    id: Uuid,
    reason: DisabledReason,
    now: Millis,
) -> StoreResult<Option<Vec<StoredEvent>>> {
    let row = tx
        .fetch_optional(
            "UPDATE webhook_subscriptions SET state = 'disabled', disabled_reason = $1, \
             claimed_until = NULL, claim_token = NULL, updated_at = $2 \
             WHERE id = $3 AND state = 'active' RETURNING app_id",
            &[Arg::Text(reason.as_str()), Arg::Int(now), Arg::Id(id)],
        )
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let app_id = row.id("app_id")?;
    let payload = json!({"subscriptionId": id, "reason": reason.as_str()});
    let event = NewEvent::new(app_id, DISABLED_EVENT, payload);
    Ok(Some(tx.append_events(&[event], now).await?))
}

/// The app's installation is allowed deliveries again (a resume, or
/// `events:subscribe` granted back), in that change's transaction: the
/// pause was not a failure, so its time does not count toward
/// `webhooks.disable_after_hours`.
pub(super) async fn pause_ended(
    tx: &mut dyn Executor,
    app_id: Uuid,
    now: Millis,
) -> StoreResult<()> {
    tx.execute(
        "UPDATE webhook_subscriptions SET failing_since = NULL, updated_at = $1 \
         WHERE app_id = $2 AND failing_since IS NOT NULL",
        &[Arg::Int(now), Arg::Id(app_id)],
    )
    .await?;
    Ok(())
}

/// Keeps the app's manifest subscription in step with `manifest`, in the
/// registration's or upgrade's transaction: made when the manifest names
/// `delivery.eventsUrl` and `eventSubscriptions` (taking the events written
/// after it), its URL and types replaced with its cursor and state kept,
/// or deleted when the manifest drops either.
pub(super) async fn follow_manifest(
    tx: &mut dyn Executor,
    app_id: Uuid,
    manifest: &Manifest,
    now: Millis,
) -> StoreResult<()> {
    let Some((url, types)) = manifest.events_subscription() else {
        tx.execute(
            "DELETE FROM webhook_subscriptions WHERE app_id = $1 AND source = 'manifest'",
            &[Arg::Id(app_id)],
        )
        .await?;
        return Ok(());
    };
    let types = serde_json::to_string(types).expect("strings serialize");
    let changed = tx
        .execute(
            "UPDATE webhook_subscriptions SET url = $1, event_types = $2, updated_at = $3 \
             WHERE app_id = $4 AND source = 'manifest'",
            &[
                Arg::Text(url),
                Arg::Text(&types),
                Arg::Int(now),
                Arg::Id(app_id),
            ],
        )
        .await?;
    if changed > 0 {
        return Ok(());
    }
    let cursor = last_seq(tx, app_id).await?;
    tx.execute(
        "INSERT INTO webhook_subscriptions (id, app_id, source, url, event_types, state, cursor, \
         next_attempt_at, created_at, updated_at) \
         VALUES ($1, $2, 'manifest', $3, $4, 'active', $5, $6, $6, $6)",
        &[
            Arg::Id(Uuid::now_v7()),
            Arg::Id(app_id),
            Arg::Text(url),
            Arg::Text(&types),
            Arg::Int(cursor),
            Arg::Int(now),
        ],
    )
    .await?;
    Ok(())
}

/// The app's last seq (0 before its first event).
async fn last_seq(tx: &mut dyn Executor, app_id: Uuid) -> StoreResult<i64> {
    tx.fetch_optional(
        "SELECT last_seq FROM event_streams WHERE audience = $1",
        &[Arg::Id(app_id)],
    )
    .await?
    .map_or(Ok(0), |r| r.int("last_seq"))
}

#[async_trait]
impl<D: Database> WebhookStore for D {
    async fn create_subscription(
        &self,
        new: &NewSubscription<'_>,
    ) -> StoreResult<SubscriptionRecord> {
        let mut tx = self.begin().await?;
        // A write first: the app's row is held until commit, so two creates
        // cannot both pass the count (PostgreSQL's row lock, SQLite's
        // write lock).
        tx.execute(
            "UPDATE apps SET updated_at = updated_at WHERE app_id = $1",
            &[Arg::Id(new.app_id)],
        )
        .await?;
        let held = tx
            .fetch_optional(
                "SELECT COUNT(*) AS n FROM webhook_subscriptions WHERE app_id = $1",
                &[Arg::Id(new.app_id)],
            )
            .await?
            .map_or(Ok(0), |r| r.int("n"))?;
        if held >= i64::from(new.limit) {
            return Err(StoreError::Conflict("limit".into()));
        }
        let cursor = last_seq(&mut *tx, new.app_id).await?;
        let types = serde_json::to_string(new.event_types).expect("strings serialize");
        // A NULL secret is written as a literal: a typed NULL argument
        // would be text, which PostgreSQL refuses for a bytea column.
        let secret_value = if new.sealed_secret.is_some() {
            "$8"
        } else {
            "NULL"
        };
        let sql = format!(
            "INSERT INTO webhook_subscriptions (id, app_id, source, url, event_types, sealed_secret, \
             state, cursor, next_attempt_at, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, {secret_value}, 'active', $6, $7, $7, $7) RETURNING {SUBSCRIPTION_COLUMNS}"
        );
        let mut args = vec![
            Arg::Id(new.id),
            Arg::Id(new.app_id),
            Arg::Text(new.source.as_str()),
            Arg::Text(new.url),
            Arg::Text(&types),
            Arg::Int(cursor),
            Arg::Int(new.now),
        ];
        if let Some(secret) = new.sealed_secret {
            args.push(Arg::Bytes(secret));
        }
        let row = tx
            .fetch_optional(&sql, &args)
            .await?
            .ok_or_else(|| StoreError::Corrupt("insert returned no row".into()))?;
        let record = subscription_row(&row)?;
        let idem = new.idem.map(|f| f(&record));
        super::identity::insert_idempotency(&mut *tx, idem.as_ref(), new.now).await?;
        tx.commit().await?;
        Ok(record)
    }

    async fn subscription(&self, id: Uuid) -> StoreResult<Option<SubscriptionRecord>> {
        let sql = format!("SELECT {SUBSCRIPTION_COLUMNS} FROM webhook_subscriptions WHERE id = $1");
        self.read()
            .await?
            .fetch_optional(&sql, &[Arg::Id(id)])
            .await?
            .map(|r| subscription_row(&r))
            .transpose()
    }

    async fn subscriptions_of(&self, app_id: Uuid) -> StoreResult<Vec<SubscriptionRecord>> {
        let sql = format!(
            "SELECT {SUBSCRIPTION_COLUMNS} FROM webhook_subscriptions WHERE app_id = $1 \
             ORDER BY created_at, id"
        );
        let rows = self
            .read()
            .await?
            .fetch_all(&sql, &[Arg::Id(app_id)])
            .await?;
        rows.iter().map(subscription_row).collect()
    }

    async fn all_subscriptions(
        &self,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<SubscriptionRecord>> {
        let sql = match after {
            Some(_) => format!(
                "SELECT {SUBSCRIPTION_COLUMNS} FROM webhook_subscriptions WHERE id > $1 ORDER BY id LIMIT $2"
            ),
            None => format!(
                "SELECT {SUBSCRIPTION_COLUMNS} FROM webhook_subscriptions WHERE $1 IS NULL ORDER BY id LIMIT $2"
            ),
        };
        let rows = self
            .read()
            .await?
            .fetch_all(&sql, &[Arg::OptId(after), Arg::Int(i64::from(limit))])
            .await?;
        rows.iter().map(subscription_row).collect()
    }

    async fn delete_subscription(&self, app_id: Uuid, id: Uuid) -> StoreResult<bool> {
        // The write first: a read before it in a deferred transaction
        // could see a row another writer deletes, and SQLite then fails
        // the upgrade to a write instead of waiting for its lock.
        let mut tx = self.begin().await?;
        let deleted = tx
            .fetch_optional(
                "DELETE FROM webhook_subscriptions WHERE id = $1 AND app_id = $2 AND source = 'api' \
                 RETURNING id",
                &[Arg::Id(id), Arg::Id(app_id)],
            )
            .await?;
        if deleted.is_some() {
            tx.commit().await?;
            return Ok(true);
        }
        let manifest = tx
            .fetch_optional(
                "SELECT 1 AS one FROM webhook_subscriptions WHERE id = $1 AND app_id = $2",
                &[Arg::Id(id), Arg::Id(app_id)],
            )
            .await?;
        tx.rollback().await?;
        match manifest {
            Some(_) => Err(StoreError::Conflict("manifest".into())),
            None => Ok(false),
        }
    }

    async fn subscription_secret(&self, id: Uuid) -> StoreResult<Option<Vec<u8>>> {
        self.read()
            .await?
            .fetch_optional(
                "SELECT sealed_secret FROM webhook_subscriptions WHERE id = $1 AND sealed_secret IS NOT NULL",
                &[Arg::Id(id)],
            )
            .await?
            .map(|r| r.bytes("sealed_secret"))
            .transpose()
    }

    async fn disable_subscription(
        &self,
        id: Uuid,
        actor: Actor,
        now: Millis,
    ) -> StoreResult<Option<Vec<StoredEvent>>> {
        let mut tx = self.begin().await?;
        let events = disable_in(&mut *tx, id, DisabledReason::Operator, now).await?;
        if let Some(app_id) = events.as_ref().and_then(|e| e.first()).map(|e| e.audience) {
            audit(
                &mut *tx,
                actor,
                LifecycleAction::WebhookDisable,
                app_id,
                id,
                now,
            )
            .await?;
        }
        tx.commit().await?;
        Ok(events)
    }

    async fn retry_subscription(&self, id: Uuid, actor: Actor, now: Millis) -> StoreResult<bool> {
        let mut tx = self.begin().await?;
        let row = tx
            .fetch_optional(
                "UPDATE webhook_subscriptions SET state = 'active', disabled_reason = NULL, \
                 attempts = 0, failing_since = NULL, next_attempt_at = $1, updated_at = $1 \
                 WHERE id = $2 RETURNING app_id",
                &[Arg::Int(now), Arg::Id(id)],
            )
            .await?;
        let Some(row) = row else {
            return Ok(false);
        };
        let app_id = row.id("app_id")?;
        audit(
            &mut *tx,
            actor,
            LifecycleAction::WebhookRetry,
            app_id,
            id,
            now,
        )
        .await?;
        tx.commit().await?;
        Ok(true)
    }
}

/// The owner action on a subscription, in its transaction: the
/// subscription's id, never its URL or secret.
async fn audit(
    tx: &mut dyn Executor,
    actor: Actor,
    action: LifecycleAction,
    app_id: Uuid,
    subscription: Uuid,
    now: Millis,
) -> StoreResult<()> {
    NewAction {
        actor,
        action,
        app_id,
        before: None,
        after: None,
        at: now,
        details: Some(ActionDetails {
            subscription_id: Some(subscription),
            ..ActionDetails::default()
        }),
    }
    .record(tx)
    .await
}
