//! Signs a body with every key that signs now and sends it through the
//! egress client. Deliveries (`interactions_url`, subscriptions) and the
//! operator's test send share this path, so what a receiver verifies in a
//! test is what it verifies in production.

use super::egress::{Answered, EgressClient, Outcome};
use super::{keys, signature};
use crate::config::WebhooksConfig;
use crate::domain::Millis;
use crate::store::SigningKeyStore;

#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("no webhook signing key exists yet; run `switchboard keys rotate` to make one")]
    NoSigningKey,
    #[error(transparent)]
    Keys(#[from] anyhow::Error),
}

#[derive(Debug)]
pub struct SignedSend {
    /// The `webhook-id` header: receivers deduplicate on it.
    pub webhook_id: String,
    pub outcome: Outcome,
}

pub async fn post_signed(
    store: &(impl SigningKeyStore + ?Sized),
    cfg: &WebhooksConfig,
    egress: &EgressClient,
    url: &str,
    body: Vec<u8>,
    now: Millis,
) -> Result<SignedSend, SendError> {
    let secrets = keys::signers(store, cfg, now).await?;
    if secrets.is_empty() {
        return Err(SendError::NoSigningKey);
    }
    let webhook_id = format!("msg_{}", uuid::Uuid::now_v7().simple());
    let timestamp = now.div_euclid(1000);
    let signed = signature::headers(&webhook_id, timestamp, &body, &secrets);
    let mut headers: Vec<(&str, &str)> = signed.iter().map(|(n, v)| (*n, v.as_str())).collect();
    headers.push(("content-type", "application/json"));
    let outcome = egress.post(url, &headers, body).await;
    Ok(SignedSend {
        webhook_id,
        outcome,
    })
}

/// A stored event on its way to a receiver.
pub struct EventRequest<'a> {
    pub url: &'a str,
    /// The event's id: the receiver's key for deduplication, the same on
    /// every way and every attempt.
    pub webhook_id: &'a str,
    /// A subscription's `v1` secret, signing besides the hub's keys.
    pub hmac: Option<signature::SigningSecret>,
    pub body: Vec<u8>,
}

/// A stored event signed with every key that signs now (and the
/// subscription's `v1` secret, if any), not yet sent: the caller checks
/// what may have changed while the keys were read (a paused installation)
/// just before [`post`](Self::post).
pub struct SignedEvent<'a> {
    url: &'a str,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

pub async fn sign_event<'a>(
    store: &(impl SigningKeyStore + ?Sized),
    cfg: &WebhooksConfig,
    request: EventRequest<'a>,
    now: Millis,
) -> Result<SignedEvent<'a>, SendError> {
    let mut secrets = keys::signers(store, cfg, now).await?;
    if secrets.is_empty() {
        return Err(SendError::NoSigningKey);
    }
    secrets.extend(request.hmac);
    let timestamp = now.div_euclid(1000);
    let mut headers = Vec::from(signature::headers(
        request.webhook_id,
        timestamp,
        &request.body,
        &secrets,
    ));
    headers.push(("content-type", "application/json".to_string()));
    Ok(SignedEvent {
        url: request.url,
        headers,
        body: request.body,
    })
}

impl SignedEvent<'_> {
    /// One request through the egress client; the answer keeps its
    /// `Retry-After`.
    pub async fn post(self, egress: &EgressClient) -> Answered {
        let headers: Vec<(&str, &str)> =
            self.headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        egress.post_answered(self.url, &headers, self.body).await
    }
}
