//! The messages on `sb.control` (ADR 0034 §4): a change made through one
//! node that must close sockets or drop cached entries on every node. Each
//! names only ids: the receiving node reads what it needs from the store
//! (an installation's state) or acts on what it holds (its sockets). At
//! most once: the database sweep (`gateway::revocations`) finds the same
//! changes within `gateway.revocation_check_interval_ms`.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "control", rename_all = "snake_case")]
pub enum Control {
    /// Keys revoked or rotated away: their sockets close with 4003.
    KeysRevoked {
        principal: Uuid,
        key_ids: Vec<String>,
    },
    /// A person disabled: every socket of theirs closes with 4003.
    Disabled { principal: Uuid },
    /// An app's installation changed (suspend, resume, uninstall, scopes,
    /// upgrade): its cached entry is dropped and read again, and its
    /// sockets closed 4012 or 4018 as the row now says.
    InstallationChanged { app_id: Uuid, uninstalled: bool },
}

impl Control {
    pub fn encode(&self) -> bytes::Bytes {
        serde_json::to_vec(self)
            .expect("a control message serializes")
            .into()
    }

    /// `None` for a message this version does not read.
    pub fn decode(message: &[u8]) -> Option<Control> {
        serde_json::from_slice(message).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_round_trip_and_unknown_ones_are_refused() {
        let all = [
            Control::KeysRevoked {
                principal: Uuid::new_v4(),
                key_ids: vec!["k1".into()],
            },
            Control::Disabled {
                principal: Uuid::new_v4(),
            },
            Control::InstallationChanged {
                app_id: Uuid::new_v4(),
                uninstalled: true,
            },
        ];
        for c in all {
            assert_eq!(Control::decode(&c.encode()), Some(c));
        }
        assert_eq!(Control::decode(br#"{"control":"nope"}"#), None);
        assert_eq!(Control::decode(b"\xff"), None);
    }
}
