//! The check of an app's `interactionsUrl` (ADR 0032 §2): a signed `ping`
//! whose nonce the app must echo, then a request signed by a key
//! published nowhere, which it must refuse with 401. Both pass: the URL is
//! verified. Run after the commit that named the URL (the job
//! `app_url_verify`), and on demand (`switchboard app verify-url`, its
//! REST route); never inside a transaction.

use rand::RngCore;
use serde_json::json;
use uuid::Uuid;

use super::{record, Delivered};
use crate::domain::app_reply::{decode, NonceEcho, Reason};
use crate::domain::{now_millis, Millis};
use crate::store::{RecordedCheck, Store, StoreResult};
use crate::webhooks::interactions::{ephemeral_body, status_reason, Client, Sent, Signing};

/// The ping's event type.
pub const PING: &str = "app/interactions_url/ping";

/// One check's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    pub verified: bool,
    pub reason: Option<Reason>,
    pub checked_at: Millis,
    /// False when a newer check (or an upgrade that changed the URL)
    /// began before this one ended: its outcome was not recorded.
    pub recorded: bool,
}

/// Checks `app_id`'s current URL and records the result unless a newer
/// check began meanwhile. `None` when the app does not exist or names no
/// URL.
pub async fn run(
    store: &dyn Store,
    client: &Client,
    sync_epoch: &str,
    app_id: Uuid,
) -> StoreResult<Option<Checked>> {
    // The generation first, the manifest after it: an upgrade between the
    // two is read here, one after both takes a newer generation.
    let Some(generation) = store.begin_url_check(app_id).await? else {
        return Ok(None);
    };
    let Some(app) = store.app(app_id).await? else {
        return Ok(None);
    };
    let Some(url) = app.manifest.delivery.interactions_url.clone() else {
        return Ok(None);
    };
    let reason = check(store, client, sync_epoch, app_id, &url).await.err();
    let now = now_millis();
    let found = RecordedCheck {
        url: &url,
        reason: reason.map(Reason::as_str),
        at: now,
    };
    let recorded = store.record_url_check(app_id, generation, &found).await?;
    if !recorded {
        tracing::info!(app = %app_id, "a newer check of the interactions URL began first; this one recorded nothing");
    }
    let outcome = match reason {
        None => Delivered::Answered,
        Some(r) => Delivered::Failed(r),
    };
    record(app_id, "verification", &url, outcome);
    Ok(Some(Checked {
        verified: reason.is_none(),
        reason,
        checked_at: now,
        recorded,
    }))
}

/// The two requests, in an order drawn for each check: an app cannot pass
/// by answering the first request with the echo and the second with 401
/// without checking any signature.
async fn check(
    store: &dyn Store,
    client: &Client,
    sync_epoch: &str,
    app_id: Uuid,
    url: &str,
) -> Result<(), Reason> {
    if rand::random::<bool>() {
        echo(store, client, sync_epoch, app_id, url).await?;
        refusal(store, client, sync_epoch, app_id, url).await
    } else {
        refusal(store, client, sync_epoch, app_id, url).await?;
        echo(store, client, sync_epoch, app_id, url).await
    }
}

/// The signed ping: 200 with exactly its nonce.
async fn echo(
    store: &dyn Store,
    client: &Client,
    sync_epoch: &str,
    app_id: Uuid,
    url: &str,
) -> Result<(), Reason> {
    let (id, nonce, body) = ping(app_id, sync_epoch);
    match client.post(store, url, &id, body, Signing::Hub, None).await {
        Sent::Answer(answer) => match decode::<NonceEcho>(&answer) {
            Ok(echo) if echo.nonce == nonce => Ok(()),
            _ => Err(Reason::NonceMismatch),
        },
        Sent::Deferred => Err(Reason::HttpStatus),
        Sent::Status(status) => Err(status_reason(status)),
        Sent::Failed(reason) => Err(reason),
    }
}

/// The ping signed by a key published nowhere: 401.
async fn refusal(
    store: &dyn Store,
    client: &Client,
    sync_epoch: &str,
    app_id: Uuid,
    url: &str,
) -> Result<(), Reason> {
    let (id, _, body) = ping(app_id, sync_epoch);
    match client
        .post(store, url, &id, body, Signing::Throwaway, None)
        .await
    {
        Sent::Status(401) => Ok(()),
        // The app was not reached: that is not the app accepting it.
        Sent::Failed(reason) => Err(reason),
        _ => Err(Reason::SignatureNotChecked),
    }
}

/// A ping's id, nonce and body.
fn ping(app_id: Uuid, sync_epoch: &str) -> (String, String, Vec<u8>) {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    let nonce: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let id = Uuid::now_v7();
    let body = ephemeral_body(id, PING, app_id, json!({ "nonce": nonce }), sync_epoch);
    (id.to_string(), nonce, body)
}
