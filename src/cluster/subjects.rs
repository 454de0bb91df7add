//! Every NATS subject switchboard uses, in one place (ADR 0034).
//!
//! All start with [`PREFIX`]; a node id is one subject token (checked by
//! `config::check_node_id`), so no id can widen a subscription.

/// The first token of every subject.
pub const PREFIX: &str = "sb";

/// Wake-ups after a commit: `(audience, seq)` hints, broadcast to every
/// node ([`super::wake`] has the format). Nothing in one matters: a node
/// reads the log.
pub const WAKE: &str = "sb.wake";

/// Ephemeral events (never stored) with their payload, broadcast to every
/// node, at most once.
pub const EPHEMERAL: &str = "sb.ephemeral";

/// Cluster-wide control: revocations, disables, installation and rights
/// changes that close sockets or drop cached entries on every node.
pub const CONTROL: &str = "sb.control";

/// Hook calls to the app sockets one node holds (request/reply).
pub fn node_hook(node_id: &str) -> String {
    format!("{PREFIX}.node.{node_id}.hook")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_share_the_prefix() {
        for s in [WAKE, EPHEMERAL, CONTROL, &node_hook("n1")] {
            assert!(s.starts_with(&format!("{PREFIX}.")), "{s}");
        }
        assert_eq!(node_hook("n1"), "sb.node.n1.hook");
    }
}
