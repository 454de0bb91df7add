//! An app's `interactionsUrl` (ADR 0032): the outcome of its verification,
//! stored with the app, and the reads and moves its deliveries need (the
//! stored event by id, an interaction handed to the transport).

use async_trait::async_trait;
use uuid::Uuid;

use super::events::{read, EventDialect};
use super::jobs::{insert_job, JobKind, NewJob};
use super::sql::{Arg, Database, Executor};
use super::StoreResult;
use crate::domain::event::StoredEvent;
use crate::domain::manifest::Manifest;
use crate::domain::Millis;

/// The last verification of an app's URL.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct UrlCheck {
    /// The URL that passed; the state is `verified` while it equals the
    /// manifest's URL.
    pub verified_url: Option<String>,
    pub checked_at: Option<Millis>,
    /// Why the last check failed (a closed name), none when it passed.
    pub reason: Option<String>,
}

impl UrlCheck {
    pub fn verifies(&self, url: &str) -> bool {
        self.verified_url.as_deref() == Some(url)
    }

    /// `{state, reason?, checkedAt?}` of `manifest`'s URL, as the REST
    /// routes and the registration and upgrade answers show it; `None`
    /// without a URL.
    pub fn view(&self, manifest: &Manifest) -> Option<serde_json::Value> {
        use serde_json::json;
        let url = manifest.delivery.interactions_url.as_deref()?;
        let verified = self.verifies(url);
        let mut view = json!({ "state": if verified { "verified" } else { "unverified" } });
        if let (false, Some(reason)) = (verified, &self.reason) {
            view["reason"] = json!(reason);
        }
        if let Some(at) = self.checked_at {
            view["checkedAt"] = json!(crate::domain::event::rfc3339(at));
        }
        Some(view)
    }
}

/// What one check of a URL found.
#[derive(Clone, Copy, Debug)]
pub struct RecordedCheck<'a> {
    pub url: &'a str,
    /// Why it failed (a closed name); none when it passed.
    pub reason: Option<&'a str>,
    pub at: Millis,
}

#[async_trait]
pub trait AppUrlStore: Send + Sync + 'static {
    /// The app's last check; `None` for no such app.
    async fn url_check(&self, app_id: Uuid) -> StoreResult<Option<UrlCheck>>;

    /// Starts a check of the app's URL: its generation, the newest (none
    /// for no such app). Read the manifest after it: an upgrade that
    /// changes the URL later takes a newer generation.
    async fn begin_url_check(&self, app_id: Uuid) -> StoreResult<Option<i64>>;

    /// Records the check `generation` of `url` if no newer check began and
    /// no upgrade changed the URL since (false: it recorded nothing).
    /// Passed, `url` is the verified URL; failed, a verified `url` is
    /// verified no more.
    async fn record_url_check(
        &self,
        app_id: Uuid,
        generation: i64,
        check: &RecordedCheck<'_>,
    ) -> StoreResult<bool>;

    /// One event of `audience`'s stream by its id, as catch-up reads it.
    async fn stream_event(
        &self,
        audience: Uuid,
        event_id: Uuid,
    ) -> StoreResult<Option<StoredEvent>>;

    /// The event an invocation wrote (none before migration 0014).
    async fn invocation_event(&self, invocation_id: Uuid) -> StoreResult<Option<Uuid>>;

    /// The event an interaction wrote.
    async fn interaction_event(&self, interaction_id: Uuid) -> StoreResult<Option<Uuid>>;

    /// The compare-and-swap `received -> dispatched` of an interaction
    /// handed to the app's URL; false when it was elsewhere.
    async fn dispatch_interaction(&self, id: Uuid, now: Millis) -> StoreResult<bool>;
}

/// In a registration's or an upgrade's transaction: a new URL is
/// unverified, and its check is a job that runs after the commit. Returns
/// whether one was written. `previous` is `None` for a new app.
pub(super) async fn check_after_commit(
    ex: &mut dyn Executor,
    app_id: Uuid,
    previous: Option<&Manifest>,
    next: &Manifest,
    now: Millis,
) -> StoreResult<bool> {
    let url = next.delivery.interactions_url.as_deref();
    let before = previous.and_then(|m| m.delivery.interactions_url.as_deref());
    if url == before {
        return Ok(false);
    }
    if previous.is_some() {
        ex.execute(
            "UPDATE apps SET url_verified = NULL, url_checked_at = NULL, url_check_reason = NULL, \
             url_check_gen = url_check_gen + 1 WHERE app_id = $1",
            &[Arg::Id(app_id)],
        )
        .await?;
    }
    if url.is_none() {
        return Ok(false);
    }
    insert_job(ex, &NewJob::new(JobKind::AppUrlVerify, app_id, now), now).await?;
    Ok(true)
}

/// `$1` audience, `$2` event id: catch-up's columns for one event. The
/// index is scanned from the stream's newest row, where a delivery's
/// event is.
const ONE_EVENT: &str = "SELECT s.audience, i.seq, p.event_id, p.type, p.occurred_at, \
     CAST(p.body AS TEXT) AS body, m.id AS message_id, m.conversation_id, m.seq AS message_seq, \
     m.sender_id, m.origin, m.parts, m.reply_to, m.thread_id, m.created_at, \
     m.reply_to_interaction, CAST(m.card AS TEXT) AS card \
     FROM event_streams s JOIN event_payloads p ON p.event_id = $2 \
     JOIN event_index i ON i.stream = s.stream AND i.payload = p.id \
     LEFT JOIN messages m ON m.id = p.message_id \
     WHERE s.audience = $1 ORDER BY i.seq DESC LIMIT 1";

#[async_trait]
impl<D: Database + EventDialect> AppUrlStore for D {
    async fn url_check(&self, app_id: Uuid) -> StoreResult<Option<UrlCheck>> {
        let row = self
            .read()
            .await?
            .fetch_optional(
                "SELECT url_verified, url_checked_at, url_check_reason FROM apps WHERE app_id = $1",
                &[Arg::Id(app_id)],
            )
            .await?;
        row.map(|r| {
            Ok(UrlCheck {
                verified_url: r.opt_text("url_verified")?,
                checked_at: r.opt_int("url_checked_at")?,
                reason: r.opt_text("url_check_reason")?,
            })
        })
        .transpose()
    }

    async fn begin_url_check(&self, app_id: Uuid) -> StoreResult<Option<i64>> {
        let row = self
            .write()
            .await?
            .fetch_optional(
                "UPDATE apps SET url_check_gen = url_check_gen + 1 WHERE app_id = $1 \
                 RETURNING url_check_gen",
                &[Arg::Id(app_id)],
            )
            .await?;
        row.map(|r| r.int("url_check_gen")).transpose()
    }

    async fn record_url_check(
        &self,
        app_id: Uuid,
        generation: i64,
        check: &RecordedCheck<'_>,
    ) -> StoreResult<bool> {
        let sql = match check.reason {
            None => {
                "UPDATE apps SET url_verified = $2, url_checked_at = $3, url_check_reason = $4 \
                     WHERE app_id = $1 AND url_check_gen = $5"
            }
            Some(_) => {
                "UPDATE apps SET url_verified = CASE WHEN url_verified = $2 THEN NULL \
                 ELSE url_verified END, url_checked_at = $3, url_check_reason = $4 \
                 WHERE app_id = $1 AND url_check_gen = $5"
            }
        };
        let recorded = self
            .write()
            .await?
            .execute(
                sql,
                &[
                    Arg::Id(app_id),
                    Arg::Text(check.url),
                    Arg::Int(check.at),
                    Arg::OptText(check.reason),
                    Arg::Int(generation),
                ],
            )
            .await?;
        Ok(recorded == 1)
    }

    async fn stream_event(
        &self,
        audience: Uuid,
        event_id: Uuid,
    ) -> StoreResult<Option<StoredEvent>> {
        let row = self
            .read()
            .await?
            .fetch_optional(ONE_EVENT, &[Arg::Id(audience), Arg::Id(event_id)])
            .await?;
        row.map(|r| read::stored_event(&r, D::STORED_JSON))
            .transpose()
    }

    async fn invocation_event(&self, invocation_id: Uuid) -> StoreResult<Option<Uuid>> {
        let row = self
            .read()
            .await?
            .fetch_optional(
                "SELECT event_id FROM command_invocations WHERE id = $1",
                &[Arg::Id(invocation_id)],
            )
            .await?;
        Ok(match row {
            Some(r) => r.opt_id("event_id")?,
            None => None,
        })
    }

    async fn interaction_event(&self, interaction_id: Uuid) -> StoreResult<Option<Uuid>> {
        let row = self
            .read()
            .await?
            .fetch_optional(
                "SELECT event_id FROM interactions WHERE id = $1",
                &[Arg::Id(interaction_id)],
            )
            .await?;
        row.map(|r| r.id("event_id")).transpose()
    }

    async fn dispatch_interaction(&self, id: Uuid, now: Millis) -> StoreResult<bool> {
        let moved = self
            .write()
            .await?
            .execute(
                "UPDATE interactions SET state = 'dispatched', updated_at = $2 \
                 WHERE id = $1 AND state = 'received'",
                &[Arg::Id(id), Arg::Int(now)],
            )
            .await?;
        Ok(moved == 1)
    }
}
