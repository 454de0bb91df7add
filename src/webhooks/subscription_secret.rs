//! A subscription's `v1` HMAC secret (ADR 0033): 32 random bytes, shown
//! once as `whsec_<base64>`, kept sealed like the signing keys (ADR 0011)
//! with the subscription's id as associated data, since the hub must sign
//! with it and so cannot keep only a hash.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rand::RngCore;
use uuid::Uuid;

use super::keys::{key_encryption_key, open, seal};
use super::signature::SigningSecret;
use crate::config::WebhooksConfig;

/// A fresh secret: what the app is shown once, and the sealed bytes to
/// store for `subscription`.
pub struct Minted {
    /// `whsec_<base64>`. Never logged.
    pub shown: String,
    pub sealed: Vec<u8>,
}

impl std::fmt::Debug for Minted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Minted(<redacted>)")
    }
}

/// The associated data: not a signing key's id, so neither seal opens as
/// the other.
fn aad(subscription: Uuid) -> String {
    format!("webhook_subscription:{subscription}")
}

pub fn mint(cfg: &WebhooksConfig, subscription: Uuid) -> anyhow::Result<Minted> {
    let kek = key_encryption_key(cfg)?;
    let mut secret = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut secret);
    Ok(Minted {
        shown: format!("whsec_{}", STANDARD.encode(secret)),
        sealed: seal(&kek, &aad(subscription), &secret),
    })
}

/// The signer of a stored secret.
pub fn open_sealed(
    cfg: &WebhooksConfig,
    subscription: Uuid,
    sealed: &[u8],
) -> anyhow::Result<SigningSecret> {
    let kek = key_encryption_key(cfg)?;
    let secret = open(&kek, &aad(subscription), sealed).map_err(|_| {
        anyhow::anyhow!(
            "the v1 secret of subscription {subscription} does not open with the configured key-encryption key"
        )
    })?;
    Ok(SigningSecret::Hmac(secret))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> WebhooksConfig {
        WebhooksConfig {
            key_encryption_key: STANDARD.encode([7u8; 32]),
            ..WebhooksConfig::default()
        }
    }

    #[test]
    fn a_minted_secret_opens_for_its_subscription_only() {
        let id = Uuid::now_v7();
        let minted = mint(&cfg(), id).unwrap();
        let shown = SigningSecret::parse(&minted.shown).unwrap();
        let opened = open_sealed(&cfg(), id, &minted.sealed).unwrap();
        assert_eq!(
            opened.sign("msg", 1, b"{}"),
            shown.sign("msg", 1, b"{}"),
            "the hub signs with what the app was shown"
        );
        assert!(open_sealed(&cfg(), Uuid::now_v7(), &minted.sealed).is_err());
        let other = WebhooksConfig {
            key_encryption_key: STANDARD.encode([8u8; 32]),
            ..WebhooksConfig::default()
        };
        assert!(open_sealed(&other, id, &minted.sealed).is_err());
        assert!(!format!("{minted:?}").contains("whsec_"));
    }
}
