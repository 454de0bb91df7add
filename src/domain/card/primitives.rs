//! The fixed allowlist of primitives an App Card may request, and the
//! features that expand into methods.

use std::collections::BTreeSet;

/// Reusable network verbs.
pub const VERBS: [&str; 13] = [
    "send_message",
    "read_inbox",
    "wait_for_message",
    "whoami",
    "list_connections",
    "recall",
    "remember",
    "get_persona",
    "set_persona",
    "set_profile",
    "coord",
    "invite_create",
    "invite_accept",
];

/// Capability features.
pub const FEATURES: [&str; 3] = ["beatless", "persona", "rooms"];

pub fn is_allowed(name: &str) -> bool {
    VERBS.contains(&name) || FEATURES.contains(&name)
}

/// The methods a card's primitives grant. `persona` adds get/set persona;
/// `rooms` adds the room methods (there is no `rooms_create`: apps join
/// rooms, they do not make them); `beatless` adds none, it marks an app
/// that wakes on incoming mail. Unknown names grant nothing (`parse`
/// refuses them before this is asked).
pub fn granted_methods(primitives: &[String]) -> BTreeSet<&'static str> {
    let mut out = BTreeSet::new();
    for p in primitives {
        match p.as_str() {
            "persona" => {
                out.insert("get_persona");
                out.insert("set_persona");
            }
            "rooms" => {
                out.extend([
                    "rooms_list",
                    "rooms_join",
                    "rooms_members",
                    "rooms_read",
                    "rooms_send",
                ]);
            }
            "beatless" => {}
            verb => {
                if let Some(v) = VERBS.iter().find(|v| **v == verb) {
                    out.insert(*v);
                }
            }
        }
    }
    out
}

/// Whether the card marks an app that wakes on incoming mail.
pub fn is_beatless(primitives: &[String]) -> bool {
    primitives.iter().any(|p| p == "beatless")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_expand_and_nothing_else_is_granted() {
        let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let g = granted_methods(&p(&["send_message", "persona", "rooms", "beatless"]));
        let expected: BTreeSet<&str> = [
            "send_message",
            "get_persona",
            "set_persona",
            "rooms_list",
            "rooms_join",
            "rooms_members",
            "rooms_read",
            "rooms_send",
        ]
        .into_iter()
        .collect();
        assert_eq!(g, expected);
        assert!(!g.contains("rooms_create"));
        assert!(granted_methods(&p(&["beatless"])).is_empty());
        assert!(is_beatless(&p(&["beatless"])));
        assert!(!is_allowed("rooms_create"));
        assert!(!is_allowed("shell"));
    }
}
