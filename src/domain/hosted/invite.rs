//! Invite links to rooms (ADR 0031 §6): `sbinv_<id>_<secret>`, the id 32
//! hex digits (a UUID), the secret 32 random bytes as 64 hex digits. Only
//! `sha256(secret)` is stored; a presented secret is compared with it in
//! constant time. Pure: the store spends uses, `hosted::invites` and
//! `handlers::invites` decide.

use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use uuid::Uuid;

use super::primitives::{ParamBounds, Params};
use crate::domain::Millis;

pub const PREFIX: &str = "sbinv_";

/// The one answer to every link that does not let its holder in: unknown
/// id, wrong secret, expired, used up, or its maker no longer able to write
/// the room ("revoked"). Telling them apart would tell a guesser which ids
/// exist.
pub const NOT_VALID: &str = "the invite link is not valid (unknown, expired, used up or revoked)";

/// A parsed link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    pub id: Uuid,
    pub secret: [u8; 32],
}

/// The link's text, shown once to the app that made it.
pub fn format(id: Uuid, secret: &[u8; 32]) -> String {
    format!("{PREFIX}{}_{}", id.simple(), hex::encode(secret))
}

/// `None` for anything not shaped as a link (answered as [`NOT_VALID`]).
pub fn parse(text: &str) -> Option<Link> {
    let rest = text.strip_prefix(PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    if id.len() != 32 || secret.len() != 64 {
        return None;
    }
    let id = Uuid::try_parse(id).ok()?;
    let mut bytes = [0u8; 32];
    hex::decode_to_slice(secret, &mut bytes).ok()?;
    Some(Link { id, secret: bytes })
}

pub fn hash(secret: &[u8; 32]) -> Vec<u8> {
    Sha256::digest(secret).to_vec()
}

/// Whether `secret` is the one whose hash is stored, in constant time
/// over the (public) hash length.
pub fn matches(stored_hash: &[u8], secret: &[u8; 32]) -> bool {
    let presented = hash(secret);
    stored_hash.len() == presented.len() && bool::from(stored_hash.ct_eq(&presented))
}

/// Whether a stored link still lets someone in, on its own terms.
pub fn usable(uses_left: i64, expires_at: Millis, now: Millis) -> bool {
    uses_left > 0 && now < expires_at
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Create {
    room: Uuid,
    #[serde(default)]
    max_uses: Option<u64>,
    #[serde(default)]
    ttl_seconds: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Accept {
    link: String,
}

/// `invite_create {room, max_uses?, ttl_seconds?}`, each bound 1 to its
/// maximum's config key, defaulting to its default's.
pub(super) fn create(p: Create, b: &ParamBounds) -> Result<Params, String> {
    let max_uses = p.max_uses.unwrap_or(b.invite_default_uses);
    if max_uses == 0 || max_uses > b.invite_max_uses {
        return Err(format!(
            "params.max_uses must be from 1 to {} (hosted.invite_max_uses)",
            b.invite_max_uses
        ));
    }
    let ttl_seconds = p.ttl_seconds.unwrap_or(b.invite_default_ttl_seconds);
    if ttl_seconds == 0 || ttl_seconds > b.invite_max_ttl_seconds {
        return Err(format!(
            "params.ttl_seconds must be from 1 to {} (hosted.invite_max_ttl_seconds)",
            b.invite_max_ttl_seconds
        ));
    }
    Ok(Params::InviteCreate {
        room: p.room,
        max_uses,
        ttl_seconds,
    })
}

/// `invite_accept {link}` and `rooms_join {link}`: the text is checked by
/// the redemption (a malformed link answers as every other invalid one).
pub(super) fn accept(p: Accept) -> Params {
    Params::InviteAccept { link: p.link }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_round_trip_and_nothing_else_parses() {
        let id = Uuid::now_v7();
        let secret = [7u8; 32];
        let text = format(id, &secret);
        assert_eq!(text.len(), PREFIX.len() + 32 + 1 + 64);
        assert_eq!(parse(&text), Some(Link { id, secret }));
        for bad in [
            "",
            "sbinv_",
            &text[1..],
            &text[..text.len() - 1],
            &format!("{text}0"),
            &text.replace('_', "-"),
            &format!("sbinv_{}_{}", id, hex::encode(secret)),
            &format!("sbinv_{}_{}", id.simple(), "zz".repeat(32)),
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_secret_is_checked_against_its_hash_only() {
        let secret = [1u8; 32];
        let stored = hash(&secret);
        assert_eq!(stored.len(), 32);
        assert!(matches(&stored, &secret));
        assert!(!matches(&stored, &[2u8; 32]));
        assert!(!matches(&stored[..31], &secret));
    }

    #[test]
    fn usable_until_used_up_or_expired() {
        assert!(usable(1, 10, 9));
        assert!(!usable(0, 10, 9));
        assert!(!usable(1, 10, 10));
    }

    #[test]
    fn create_is_bounded_by_config_and_defaults_to_it() {
        let b = ParamBounds::for_tests();
        let room = Uuid::now_v7();
        let c = |m, t| {
            create(
                Create {
                    room,
                    max_uses: m,
                    ttl_seconds: t,
                },
                &b,
            )
        };
        assert_eq!(
            c(None, None),
            Ok(Params::InviteCreate {
                room,
                max_uses: b.invite_default_uses,
                ttl_seconds: b.invite_default_ttl_seconds
            })
        );
        assert!(c(Some(0), None).unwrap_err().contains("max_uses"));
        assert!(c(Some(b.invite_max_uses + 1), None)
            .unwrap_err()
            .contains("hosted.invite_max_uses"));
        assert!(c(None, Some(b.invite_max_ttl_seconds + 1))
            .unwrap_err()
            .contains("hosted.invite_max_ttl_seconds"));
    }
}
