//! Principal keys: `sbk_<kind>_<key id>_<secret>`.
//!
//! The key id (16 hex characters) is a lookup handle that may appear in logs;
//! the secret (32 random bytes, base64url) is shown once and only its SHA-256
//! is stored. A 256-bit random secret needs no slow hash: nobody can guess it,
//! so the stored digest only has to be one-way. Verification compares digests
//! in constant time, and an unknown key id costs the same comparison, so
//! timing says nothing about which ids exist.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::PrincipalKind;

const KEY_ID_HEX: usize = 16;
const SECRET_B64: usize = 43;

/// A key as presented by a client, split into its parts.
#[derive(Clone, PartialEq, Eq)]
pub struct PresentedKey {
    pub kind: PrincipalKind,
    pub key_id: String,
    secret: String,
}

impl std::fmt::Debug for PresentedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PresentedKey")
            .field("kind", &self.kind)
            .field("key_id", &self.key_id)
            .field("secret", &"<redacted>")
            .finish()
    }
}

impl PresentedKey {
    pub fn secret_hash(&self) -> [u8; 32] {
        hash_secret(&self.secret)
    }
}

/// A freshly minted key. `plaintext` is handed to the principal once and then
/// dropped; only `key_id` and `secret_hash` are stored.
pub struct MintedKey {
    pub key_id: String,
    pub secret_hash: [u8; 32],
    pub plaintext: String,
}

impl std::fmt::Debug for MintedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MintedKey")
            .field("key_id", &self.key_id)
            .field("plaintext", &"<redacted>")
            .finish()
    }
}

fn prefix(kind: PrincipalKind) -> &'static str {
    match kind {
        PrincipalKind::Agent => "sbk_agent_",
        PrincipalKind::App => "sbk_app_",
        PrincipalKind::Person => "sbk_person_",
    }
}

pub fn mint(kind: PrincipalKind) -> MintedKey {
    let mut rng = rand::rngs::OsRng;
    let mut id = [0u8; KEY_ID_HEX / 2];
    rng.fill_bytes(&mut id);
    let mut secret = [0u8; 32];
    rng.fill_bytes(&mut secret);
    let key_id = hex::encode(id);
    let secret = URL_SAFE_NO_PAD.encode(secret);
    MintedKey {
        secret_hash: hash_secret(&secret),
        plaintext: format!("{}{key_id}_{secret}", prefix(kind)),
        key_id,
    }
}

/// Splits a presented key. `None` for anything that is not a well-formed key;
/// callers answer that exactly like a wrong key.
pub fn parse(presented: &str) -> Option<PresentedKey> {
    let (kind, rest) = [
        PrincipalKind::Agent,
        PrincipalKind::App,
        PrincipalKind::Person,
    ]
    .into_iter()
    .find_map(|kind| {
        presented
            .strip_prefix(prefix(kind))
            .map(|rest| (kind, rest))
    })?;
    if rest.len() != KEY_ID_HEX + 1 + SECRET_B64 || !rest.is_ascii() {
        return None;
    }
    let (key_id, secret) = rest.split_at(KEY_ID_HEX);
    let secret = secret.strip_prefix('_')?;
    if !key_id
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        return None;
    }
    if URL_SAFE_NO_PAD.decode(secret).map(|b| b.len()) != Ok(32) {
        return None;
    }
    Some(PresentedKey {
        kind,
        key_id: key_id.to_string(),
        secret: secret.to_string(),
    })
}

pub fn hash_secret(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// Constant-time comparison of a presented key against the stored digest.
/// With no stored digest (unknown key id) it still does the comparison.
pub fn verify(presented: &PresentedKey, stored: Option<&[u8]>) -> bool {
    let digest = presented.secret_hash();
    let dummy = [0u8; 32];
    let (against, known) = match stored {
        Some(s) if s.len() == 32 => (s, true),
        _ => (&dummy[..], false),
    };
    let equal: bool = digest.ct_eq(against).into();
    equal && known
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_keys_parse_and_verify() {
        let k = mint(PrincipalKind::Agent);
        assert!(k.plaintext.starts_with("sbk_agent_"));
        let p = parse(&k.plaintext).unwrap();
        assert_eq!(p.kind, PrincipalKind::Agent);
        assert_eq!(p.key_id, k.key_id);
        assert!(verify(&p, Some(&k.secret_hash)));
        let other = mint(PrincipalKind::Agent);
        assert!(!verify(&p, Some(&other.secret_hash)));
        assert!(!verify(&p, None));
    }

    #[test]
    fn malformed_keys_do_not_parse() {
        let k = mint(PrincipalKind::App).plaintext;
        assert!(parse(&k).is_some());
        assert!(parse(&k[..k.len() - 1]).is_none());
        assert!(parse(&k.replace("sbk_app_", "sbk_bot_")).is_none());
        assert!(parse("").is_none());
        assert!(parse(&format!("{k}x")).is_none());
    }

    /// A person key parses as a person's (ADR 0020 §1), and only the exact
    /// prefix does.
    #[test]
    fn person_keys_parse_as_people() {
        let k = mint(PrincipalKind::Person);
        assert!(k.plaintext.starts_with("sbk_person_"));
        let p = parse(&k.plaintext).unwrap();
        assert_eq!(p.kind, PrincipalKind::Person);
        assert!(verify(&p, Some(&k.secret_hash)));
        assert!(parse(&k.plaintext.replace("sbk_person_", "sbk_persons_")).is_none());
    }

    #[test]
    fn keys_carry_256_bits_and_differ() {
        let a = mint(PrincipalKind::App);
        let b = mint(PrincipalKind::App);
        assert_ne!(a.plaintext, b.plaintext);
        let secret = &a.plaintext[a.plaintext.len() - SECRET_B64..];
        assert_eq!(URL_SAFE_NO_PAD.decode(secret).unwrap().len(), 32);
    }
}
