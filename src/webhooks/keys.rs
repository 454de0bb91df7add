//! The hub's webhook signing keys: Ed25519, sealed at rest with
//! ChaCha20-Poly1305 under `webhooks.key_encryption_key`, rotated with an
//! overlap during which requests carry both signatures. Secrets never leave
//! this module except as a `SigningSecret` for the signer.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use ed25519_dalek::SigningKey;
use rand::RngCore;
use serde::Serialize;

use super::signature::{public_key_string, SigningSecret};
use crate::config::WebhooksConfig;
use crate::domain::event::rfc3339;
use crate::domain::Millis;
use crate::store::{SigningKeyRecord, SigningKeyStore};

/// Where the key-encryption key is configured (the file wins).
enum KekSource<'c> {
    File(&'c str),
    Inline(&'c str),
}

impl<'c> KekSource<'c> {
    fn of(cfg: &'c WebhooksConfig) -> Option<KekSource<'c>> {
        if !cfg.key_encryption_key_file.is_empty() {
            Some(KekSource::File(&cfg.key_encryption_key_file))
        } else if !cfg.key_encryption_key.is_empty() {
            Some(KekSource::Inline(&cfg.key_encryption_key))
        } else {
            None
        }
    }

    /// The setting's name, for errors: never its value.
    fn setting(&self) -> &'static str {
        match self {
            KekSource::File(_) => "webhooks.key_encryption_key_file",
            KekSource::Inline(_) => "webhooks.key_encryption_key",
        }
    }
}

/// The key-encryption key from configuration (the file wins).
pub fn key_encryption_key(cfg: &WebhooksConfig) -> anyhow::Result<[u8; 32]> {
    let source = KekSource::of(cfg).ok_or_else(|| {
        anyhow::anyhow!("set webhooks.key_encryption_key or webhooks.key_encryption_key_file (base64 of 32 random bytes)")
    })?;
    let text = match source {
        KekSource::File(path) => std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read webhooks.key_encryption_key_file: {e}"))?,
        KekSource::Inline(text) => text.to_string(),
    };
    STANDARD
        .decode(text.trim())
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| anyhow::anyhow!("{} must be base64 of exactly 32 bytes", source.setting()))
}

/// Run at startup: every key that signs now must open with the configured
/// key-encryption key, so a wrong or missing one stops the hub with an error
/// naming the setting (never its value) instead of failing the first signed
/// request. A configured key is checked for its format even before any
/// signing key exists.
pub async fn check_at_startup(
    store: &(impl SigningKeyStore + ?Sized),
    cfg: &WebhooksConfig,
    now: Millis,
) -> anyhow::Result<()> {
    let signing = signing_now(store, now).await?;
    let Some(source) = KekSource::of(cfg) else {
        anyhow::ensure!(
            signing.is_empty(),
            "{} webhook signing key(s) are stored, but neither webhooks.key_encryption_key nor webhooks.key_encryption_key_file is set to open them",
            signing.len()
        );
        return Ok(());
    };
    let kek = key_encryption_key(cfg)?;
    for k in &signing {
        open_key(&kek, k).map_err(|e| {
            anyhow::anyhow!(
                "{} is not the key that sealed the stored signing keys: {e}",
                source.setting()
            )
        })?;
    }
    Ok(())
}

/// `nonce || ciphertext`, with the key id as associated data so a sealed
/// secret cannot be moved to another key's row.
pub(crate) fn seal(kek: &[u8; 32], key_id: &str, secret: &[u8]) -> Vec<u8> {
    let cipher = ChaCha20Poly1305::new(Key::from_slice(kek));
    let mut nonce = [0u8; 12];
    rand::rngs::OsRng.fill_bytes(&mut nonce);
    let mut out = nonce.to_vec();
    let sealed = cipher
        .encrypt(
            Nonce::from_slice(&nonce),
            Payload {
                msg: secret,
                aad: key_id.as_bytes(),
            },
        )
        .expect("encryption cannot fail");
    out.extend(sealed);
    out
}

pub(crate) fn open(kek: &[u8; 32], key_id: &str, sealed: &[u8]) -> anyhow::Result<Vec<u8>> {
    anyhow::ensure!(sealed.len() > 12, "a sealed key is too short");
    let cipher = ChaCha20Poly1305::new(Key::from_slice(kek));
    cipher
        .decrypt(
            Nonce::from_slice(&sealed[..12]),
            Payload {
                msg: &sealed[12..],
                aad: key_id.as_bytes(),
            },
        )
        .map_err(|_| {
            anyhow::anyhow!(
                "signing key {key_id} does not open with the configured key-encryption key"
            )
        })
}

/// Opens a stored key and checks it against its published public key.
fn open_key(kek: &[u8; 32], k: &SigningKeyRecord) -> anyhow::Result<SigningKey> {
    let seed: [u8; 32] = open(kek, &k.key_id, &k.sealed_secret)?
        .try_into()
        .map_err(|_| anyhow::anyhow!("signing key {} is not 32 bytes", k.key_id))?;
    let key = SigningKey::from_bytes(&seed);
    anyhow::ensure!(
        public_key_string(&key.verifying_key()) == k.public_key,
        "signing key {} does not match its public key",
        k.key_id
    );
    Ok(key)
}

/// What happens to the keys that sign now when a new one becomes active.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Previous {
    /// They must open with the configured key-encryption key, and keep
    /// signing for `webhooks.rotation_overlap_hours`.
    Overlap,
    /// They are retired at once without being opened: the way back for an
    /// operator who lost the key-encryption key that sealed them (the hub
    /// refuses to start while a signing key cannot be opened).
    Discard,
}

/// Makes a new active key (from `secret`, or fresh); the previous ones are
/// handled as `previous` says. Returns the new key id.
pub async fn rotate(
    store: &(impl SigningKeyStore + ?Sized),
    cfg: &WebhooksConfig,
    secret: Option<SigningKey>,
    previous: Previous,
    now: Millis,
) -> anyhow::Result<String> {
    let kek = key_encryption_key(cfg)?;
    // A wrong key-encryption key must fail here, not later while signing.
    if previous == Previous::Overlap {
        for k in store.signing_keys().await? {
            if is_signing(&k, now) {
                open_key(&kek, &k)?;
            }
        }
    }
    let key = secret.unwrap_or_else(|| SigningKey::generate(&mut rand::rngs::OsRng));
    let mut id = [0u8; 8];
    rand::rngs::OsRng.fill_bytes(&mut id);
    let key_id = format!("whk_{}", hex::encode(id));
    let record = SigningKeyRecord {
        sealed_secret: seal(&kek, &key_id, &key.to_bytes()),
        key_id,
        public_key: public_key_string(&key.verifying_key()),
        state: "active".into(),
        created_at: now,
        retires_at: None,
    };
    let overlap = match previous {
        Previous::Overlap => (cfg.rotation_overlap_hours as i64).saturating_mul(3_600_000),
        Previous::Discard => 0,
    };
    store
        .rotate_signing_key(&record, now, now.saturating_add(overlap))
        .await?;
    Ok(record.key_id)
}

/// The keys that sign now: the active one and secondaries within overlap.
pub async fn signers(
    store: &(impl SigningKeyStore + ?Sized),
    cfg: &WebhooksConfig,
    now: Millis,
) -> anyhow::Result<Vec<SigningSecret>> {
    let signing = signing_now(store, now).await?;
    // No key yet is its own answer, whether or not a key-encryption key is
    // configured.
    if signing.is_empty() {
        return Ok(Vec::new());
    }
    let kek = key_encryption_key(cfg)?;
    signing
        .iter()
        .map(|k| Ok(SigningSecret::Ed25519(open_key(&kek, k)?)))
        .collect()
}

/// The stored keys that sign at `now`: the active one and secondaries
/// within their overlap.
async fn signing_now(
    store: &(impl SigningKeyStore + ?Sized),
    now: Millis,
) -> anyhow::Result<Vec<SigningKeyRecord>> {
    Ok(store
        .signing_keys()
        .await?
        .into_iter()
        .filter(|k| is_signing(k, now))
        .collect())
}

fn is_signing(k: &SigningKeyRecord, now: Millis) -> bool {
    k.state == "active" || (k.state == "secondary" && k.retires_at.is_some_and(|r| r > now))
}

/// A key as published to receivers. No secret, ever.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishedKey {
    pub key_id: String,
    /// `whpk_...`
    pub public_key: String,
    /// `active`, `secondary` or `retired`.
    pub state: String,
    pub valid_from: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_until: Option<String>,
}

pub async fn published(
    store: &(impl SigningKeyStore + ?Sized),
    now: Millis,
) -> anyhow::Result<Vec<PublishedKey>> {
    Ok(store
        .signing_keys()
        .await?
        .into_iter()
        .map(|k| PublishedKey {
            state: if k.state == "secondary" && !is_signing(&k, now) {
                "retired".into()
            } else {
                k.state.clone()
            },
            key_id: k.key_id,
            public_key: k.public_key,
            valid_from: rfc3339(k.created_at),
            valid_until: k.retires_at.map(rfc3339),
        })
        .collect())
}
