//! The client of an app's `interactionsUrl` (ADR 0032): one egress client
//! of purpose `interactions` (`app.interaction_timeout_ms`, the answer
//! capped), the stored URL passed through the egress client's own rules
//! before anything else, and every request signed `v1a` with the hub's keys (or, for
//! the verification's one refusal, a key published nowhere). What is sent
//! and what the answers mean are `app_url`'s and `domain::app_reply`'s.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use uuid::Uuid;

use super::egress::{EgressClient, Outcome, Resolver, Settings, SystemResolver};
use super::keys;
use super::signature::{self, SigningSecret};
use crate::config::Config;
use crate::domain::app_reply::{by_status, ByStatus, Reason};
use crate::domain::Millis;
use crate::store::SigningKeyStore;

/// The egress client of the `interactions` purpose: the egress rules,
/// `app.interaction_timeout_ms` and the answer's cap.
pub struct Client {
    egress: EgressClient,
    webhooks: crate::config::WebhooksConfig,
}

/// How a request is signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signing {
    /// With every key that signs now (ADR 0011).
    Hub,
    /// With a throwaway key published nowhere: the verification's request
    /// that a checking app must refuse.
    Throwaway,
}

/// What one request gave, before its body is decoded.
#[derive(Debug, PartialEq, Eq)]
pub enum Sent {
    /// 200, with the body.
    Answer(Vec<u8>),
    /// 202.
    Deferred,
    /// Any other status: 401 is the verification's business.
    Status(u16),
    Failed(Reason),
}

impl Client {
    pub fn from_config(config: &Config) -> anyhow::Result<Client> {
        Self::with_resolver(config, Arc::new(SystemResolver))
    }

    pub fn with_resolver(config: &Config, resolver: Arc<dyn Resolver>) -> anyhow::Result<Client> {
        let mut settings = Settings::from_config(&config.egress)?;
        let timeout = Duration::from_millis(config.app.interaction_timeout_ms);
        settings.request_timeout = timeout;
        settings.connect_timeout = settings.connect_timeout.min(timeout);
        settings.max_response_bytes = config
            .server
            .max_http_body_bytes
            .min(config.egress.max_response_bytes);
        let egress = EgressClient::new("interactions", settings, resolver).map_err(|e| {
            anyhow::anyhow!(
                "egress.extra_ca_file {:?}: {e}",
                config.egress.extra_ca_file
            )
        })?;
        Ok(Client {
            egress,
            webhooks: config.webhooks.clone(),
        })
    }

    /// One signed POST of `body` to `url` with `webhook-id` = `id`, ended
    /// at `deadline` if it is sooner than the client's own. The URL passes
    /// the egress client's own rules first ([`EgressClient::admit`]), before
    /// any key is read: a stored URL may name a host the operator has
    /// removed since (ADR 0032 §1), and its refusal is counted `blocked`.
    pub async fn post(
        &self,
        store: &(impl SigningKeyStore + ?Sized),
        url: &str,
        id: &str,
        body: Vec<u8>,
        signing: Signing,
        deadline: Option<Duration>,
    ) -> Sent {
        if self.egress.admit(url).is_err() {
            return Sent::Failed(Reason::Blocked);
        }
        let now = crate::domain::now_millis();
        let secrets = match self.secrets(store, signing, now).await {
            Ok(s) => s,
            Err(reason) => return Sent::Failed(reason),
        };
        let signed = signature::headers(id, now.div_euclid(1000), &body, &secrets);
        let mut headers: Vec<(&str, &str)> = signed.iter().map(|(n, v)| (*n, v.as_str())).collect();
        headers.push(("content-type", "application/json"));
        let request = self.egress.post(url, &headers, body);
        let outcome = match deadline {
            Some(d) => tokio::time::timeout(d, request)
                .await
                .unwrap_or(Outcome::Timeout),
            None => request.await,
        };
        sent(outcome)
    }

    async fn secrets(
        &self,
        store: &(impl SigningKeyStore + ?Sized),
        signing: Signing,
        now: Millis,
    ) -> Result<Vec<SigningSecret>, Reason> {
        if signing == Signing::Throwaway {
            let key = ed25519_dalek::SigningKey::generate(&mut rand::rngs::OsRng);
            return Ok(vec![SigningSecret::Ed25519(key)]);
        }
        match keys::signers(store, &self.webhooks, now).await {
            Ok(s) if s.is_empty() => Err(Reason::NoSigningKey),
            Ok(s) => Ok(s),
            Err(e) => {
                tracing::error!(error = %e, "loading webhook signing keys failed");
                Err(Reason::NoSigningKey)
            }
        }
    }
}

fn sent(outcome: Outcome) -> Sent {
    match outcome {
        Outcome::Ok { status, body } => match by_status(status) {
            ByStatus::Decode => Sent::Answer(body),
            ByStatus::Deferred => Sent::Deferred,
            ByStatus::Failed(_) => Sent::Status(status),
        },
        Outcome::Timeout => Sent::Failed(Reason::Timeout),
        Outcome::Blocked { .. } => Sent::Failed(Reason::Blocked),
        Outcome::Redirect { .. } => Sent::Failed(Reason::Redirect),
        Outcome::TooLarge => Sent::Failed(Reason::TooLarge),
        Outcome::Transport { .. } => Sent::Failed(Reason::Transport),
    }
}

/// The reason of a status that is neither 200 nor 202.
pub fn status_reason(status: u16) -> Reason {
    match by_status(status) {
        ByStatus::Failed(reason) => reason,
        _ => Reason::HttpStatus,
    }
}

/// An envelope that is stored nowhere (the ping, an autocomplete request):
/// no `seq`.
pub fn ephemeral_body(
    id: Uuid,
    event_type: &str,
    audience: Uuid,
    payload: Value,
    sync_epoch: &str,
) -> Vec<u8> {
    let envelope = serde_json::json!({
        "id": id,
        "type": event_type,
        "occurredAt": crate::domain::event::rfc3339(crate::domain::now_millis()),
        "audience": audience,
        "payload": payload,
        "syncEpoch": sync_epoch,
    });
    serde_json::to_vec(&envelope).expect("json")
}
