//! Changes that close sockets, made here and announced to the other nodes
//! on `sb.control` (ADR 0034 §4). Nothing is announced in `single` mode.

use uuid::Uuid;

use super::Hub;
use crate::cluster::control::Control;
use crate::cluster::{subjects, Kind};
use crate::rpc::close_code;

impl Hub {
    /// Closes the sockets on these revoked keys, on this node and (through
    /// `sb.control`) on every other; returns how many closed here.
    pub fn close_revoked_keys(&self, principal: Uuid, key_ids: &[String]) -> usize {
        if !key_ids.is_empty() {
            self.announce(&Control::KeysRevoked {
                principal,
                key_ids: key_ids.to_vec(),
            });
        }
        self.registry
            .close_keys(principal, key_ids, close_code::KEY_REVOKED, "key revoked")
    }

    /// Tells every other node of a change: at most once, never waiting.
    pub fn announce(&self, control: &Control) {
        if self.cluster.client().is_some() {
            self.cluster
                .publish(Kind::Control, subjects::CONTROL, control.encode());
        }
    }
}
