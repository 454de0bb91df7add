//! Standard Webhooks signatures: the `webhook-id`, `webhook-timestamp` and
//! `webhook-signature` headers over `{id}.{timestamp}.{body}`.
//!
//! - `v1,<base64>`: HMAC-SHA256 with a `whsec_<base64>` secret, for receivers
//!   that use the reference libraries;
//! - `v1a,<base64>`: Ed25519; secret keys `whsk_<base64 seed>`, public keys
//!   `whpk_<base64>` (the reference libraries implement only `v1`).
//!
//! Several signatures, space-separated, let receivers holding either key of
//! a rotation accept. Verification accepts any valid listed signature and
//! refuses timestamps outside a tolerance, so a captured request cannot be
//! replayed later. The SDK re-exports the verifier for app authors.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

pub const ID_HEADER: &str = "webhook-id";
pub const TIMESTAMP_HEADER: &str = "webhook-timestamp";
pub const SIGNATURE_HEADER: &str = "webhook-signature";

/// Receivers' default tolerance (the reference libraries use 5 minutes).
pub const DEFAULT_TOLERANCE_SECONDS: i64 = 300;

/// A key that signs.
#[derive(Clone)]
pub enum SigningSecret {
    /// `v1`: HMAC-SHA256.
    Hmac(Vec<u8>),
    /// `v1a`: Ed25519.
    Ed25519(SigningKey),
}

impl std::fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SigningSecret::Hmac(_) => "SigningSecret::Hmac(<redacted>)",
            SigningSecret::Ed25519(_) => "SigningSecret::Ed25519(<redacted>)",
        })
    }
}

/// A key that verifies. The HMAC variant holds a shared secret, so Debug
/// redacts it.
#[derive(Clone)]
pub enum VerificationKey {
    Hmac(Vec<u8>),
    Ed25519(VerifyingKey),
}

impl std::fmt::Debug for VerificationKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerificationKey::Hmac(_) => f.write_str("VerificationKey::Hmac(<redacted>)"),
            VerificationKey::Ed25519(k) => {
                write!(f, "VerificationKey::Ed25519({})", public_key_string(k))
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyFormatError {
    #[error("a key must start with {0}")]
    Prefix(&'static str),
    #[error("the key is not valid base64 of the right length")]
    Encoding,
}

fn decode(text: &str, prefix: &'static str) -> Result<Vec<u8>, KeyFormatError> {
    let body = text
        .strip_prefix(prefix)
        .ok_or(KeyFormatError::Prefix(prefix))?;
    STANDARD.decode(body).map_err(|_| KeyFormatError::Encoding)
}

impl SigningSecret {
    /// `whsec_<base64>` (HMAC) or `whsk_<base64 32-byte seed>` (Ed25519).
    pub fn parse(text: &str) -> Result<SigningSecret, KeyFormatError> {
        if text.starts_with("whsec_") {
            let key = decode(text, "whsec_")?;
            if key.is_empty() {
                return Err(KeyFormatError::Encoding);
            }
            return Ok(SigningSecret::Hmac(key));
        }
        let seed: [u8; 32] = decode(text, "whsk_")?
            .try_into()
            .map_err(|_| KeyFormatError::Encoding)?;
        Ok(SigningSecret::Ed25519(SigningKey::from_bytes(&seed)))
    }

    pub fn verification_key(&self) -> VerificationKey {
        match self {
            SigningSecret::Hmac(k) => VerificationKey::Hmac(k.clone()),
            SigningSecret::Ed25519(k) => VerificationKey::Ed25519(k.verifying_key()),
        }
    }

    /// One `v1,...` or `v1a,...` signature.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let content = signed_content(id, timestamp, body);
        match self {
            SigningSecret::Hmac(key) => {
                let mut mac =
                    Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
                mac.update(&content);
                format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
            }
            SigningSecret::Ed25519(key) => {
                format!("v1a,{}", STANDARD.encode(key.sign(&content).to_bytes()))
            }
        }
    }
}

impl VerificationKey {
    /// `whsec_...` (HMAC) or `whpk_<base64 32 bytes>` (Ed25519).
    pub fn parse(text: &str) -> Result<VerificationKey, KeyFormatError> {
        if text.starts_with("whsec_") {
            return match SigningSecret::parse(text)? {
                SigningSecret::Hmac(k) => Ok(VerificationKey::Hmac(k)),
                SigningSecret::Ed25519(_) => Err(KeyFormatError::Encoding),
            };
        }
        let bytes: [u8; 32] = decode(text, "whpk_")?
            .try_into()
            .map_err(|_| KeyFormatError::Encoding)?;
        VerifyingKey::from_bytes(&bytes)
            .map(VerificationKey::Ed25519)
            .map_err(|_| KeyFormatError::Encoding)
    }
}

/// `whpk_<base64>` of an Ed25519 public key.
pub fn public_key_string(key: &VerifyingKey) -> String {
    format!("whpk_{}", STANDARD.encode(key.as_bytes()))
}

/// `whsk_<base64 seed>` of an Ed25519 secret key. Never log or return it.
pub fn secret_key_string(key: &SigningKey) -> String {
    format!("whsk_{}", STANDARD.encode(key.to_bytes()))
}

pub fn signed_content(id: &str, timestamp: i64, body: &[u8]) -> Vec<u8> {
    let mut content = format!("{id}.{timestamp}.").into_bytes();
    content.extend_from_slice(body);
    content
}

/// The three headers, with one signature per secret (all active keys during
/// a rotation).
pub fn headers(
    id: &str,
    timestamp: i64,
    body: &[u8],
    secrets: &[SigningSecret],
) -> [(&'static str, String); 3] {
    let signatures: Vec<String> = secrets
        .iter()
        .map(|s| s.sign(id, timestamp, body))
        .collect();
    [
        (ID_HEADER, id.to_string()),
        (TIMESTAMP_HEADER, timestamp.to_string()),
        (SIGNATURE_HEADER, signatures.join(" ")),
    ]
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("the webhook-timestamp header is not a Unix time in seconds")]
    BadTimestamp,
    #[error("the timestamp is outside the tolerance")]
    Expired,
    #[error("no listed signature verifies with the given keys")]
    NoValidSignature,
}

/// Accepts the request if any listed signature verifies with any key and
/// the timestamp lies within `tolerance` seconds of `now`.
pub fn verify(
    id: &str,
    timestamp: &str,
    signature_header: &str,
    body: &[u8],
    keys: &[VerificationKey],
    now: i64,
    tolerance: i64,
) -> Result<(), VerifyError> {
    let ts: i64 = timestamp
        .trim()
        .parse()
        .map_err(|_| VerifyError::BadTimestamp)?;
    if ts.abs_diff(now) > tolerance.max(0) as u64 {
        return Err(VerifyError::Expired);
    }
    let content = signed_content(id, ts, body);
    for entry in signature_header.split_whitespace() {
        let Some((version, sig)) = entry.split_once(',') else {
            continue;
        };
        let Ok(sig) = STANDARD.decode(sig) else {
            continue;
        };
        for key in keys {
            let ok = match (version, key) {
                ("v1", VerificationKey::Hmac(k)) => {
                    let mut mac =
                        Hmac::<Sha256>::new_from_slice(k).expect("HMAC takes any key length");
                    mac.update(&content);
                    let expected = mac.finalize().into_bytes();
                    expected.as_slice().ct_eq(&sig).into()
                }
                ("v1a", VerificationKey::Ed25519(k)) => ed25519_dalek::Signature::from_slice(&sig)
                    .map(|s| k.verify_strict(&content, &s).is_ok())
                    .unwrap_or(false),
                _ => false,
            };
            if ok {
                return Ok(());
            }
        }
    }
    Err(VerifyError::NoValidSignature)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Vectors from an independent implementation: Python's hmac/hashlib for
    // v1, the `cryptography` package's Ed25519 for v1a.
    const ID: &str = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W";
    const TS: i64 = 1674087231;
    const BODY: &str = r#"{"type":"contact.created","timestamp":"2023-01-19T00:13:51.813Z","data":{"id":"cont_123"}}"#;
    const WHSEC: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const V1: &str = "v1,PG0KsnW4TO0QqBcRj4/vDQdL2T+LMdmsiTbpvZap0HE=";
    const WHSK: &str = "whsk_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    const WHPK: &str = "whpk_A6EHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg=";
    const V1A: &str = "v1a,DSRB2c38LTP2OfSwNOsNS8g/8rE2e4JvIEY/s9isIoYWZZ25fzIrTRAs3+Xkh9fF/L73eOUYxsMzduGQjT58Cg==";

    #[test]
    fn signatures_match_the_independent_vectors() {
        assert_eq!(
            SigningSecret::parse(WHSEC)
                .unwrap()
                .sign(ID, TS, BODY.as_bytes()),
            V1
        );
        let sk = SigningSecret::parse(WHSK).unwrap();
        assert_eq!(sk.sign(ID, TS, BODY.as_bytes()), V1A);
        match sk {
            SigningSecret::Ed25519(k) => {
                assert_eq!(public_key_string(&k.verifying_key()), WHPK);
                assert_eq!(secret_key_string(&k), WHSK);
            }
            _ => panic!(),
        }
    }

    #[test]
    fn verification_accepts_valid_and_refuses_tampering() {
        let keys = [
            VerificationKey::parse(WHPK).unwrap(),
            VerificationKey::parse(WHSEC).unwrap(),
        ];
        let header = format!("{V1A} {V1}");
        let ts = TS.to_string();
        let check = |id: &str, ts: &str, body: &str, keys: &[VerificationKey]| {
            verify(
                id,
                ts,
                &header,
                body.as_bytes(),
                keys,
                TS + 10,
                DEFAULT_TOLERANCE_SECONDS,
            )
        };
        assert_eq!(check(ID, &ts, BODY, &keys), Ok(()));
        assert_eq!(check(ID, &ts, BODY, &keys[..1]), Ok(()), "v1a alone");
        assert_eq!(check(ID, &ts, BODY, &keys[1..]), Ok(()), "v1 alone");
        assert_eq!(
            check(ID, &ts, &BODY.replace("123", "124"), &keys),
            Err(VerifyError::NoValidSignature)
        );
        assert_eq!(
            check("msg_other", &ts, BODY, &keys),
            Err(VerifyError::NoValidSignature)
        );
        assert_eq!(
            check(ID, &(TS + 1).to_string(), BODY, &keys),
            Err(VerifyError::NoValidSignature)
        );
        let other = VerificationKey::Ed25519(SigningKey::from_bytes(&[5u8; 32]).verifying_key());
        assert_eq!(
            check(ID, &ts, BODY, &[other]),
            Err(VerifyError::NoValidSignature)
        );
        assert_eq!(
            verify(
                ID,
                &ts,
                &header,
                BODY.as_bytes(),
                &keys,
                TS + 301,
                DEFAULT_TOLERANCE_SECONDS
            ),
            Err(VerifyError::Expired)
        );
        assert_eq!(
            check(ID, "yesterday", BODY, &keys),
            Err(VerifyError::BadTimestamp)
        );
    }

    #[test]
    fn rotation_carries_both_signatures_and_either_receiver_accepts() {
        let old = SigningSecret::Ed25519(SigningKey::from_bytes(&[1u8; 32]));
        let new = SigningSecret::Ed25519(SigningKey::from_bytes(&[2u8; 32]));
        let [_, _, (_, sig)] = headers(ID, TS, BODY.as_bytes(), &[new.clone(), old.clone()]);
        assert_eq!(sig.split(' ').count(), 2);
        for receiver in [old.verification_key(), new.verification_key()] {
            assert_eq!(
                verify(
                    ID,
                    &TS.to_string(),
                    &sig,
                    BODY.as_bytes(),
                    &[receiver],
                    TS,
                    300
                ),
                Ok(())
            );
        }
    }

    #[test]
    fn key_formats_are_checked() {
        assert!(matches!(
            SigningSecret::parse("whsk_AAAA"),
            Err(KeyFormatError::Encoding)
        ));
        assert!(matches!(
            SigningSecret::parse("sk_live"),
            Err(KeyFormatError::Prefix(_))
        ));
        assert!(VerificationKey::parse("whpk_!!").is_err());
        assert!(format!("{:?}", SigningSecret::parse(WHSK).unwrap()).contains("redacted"));
    }
}
