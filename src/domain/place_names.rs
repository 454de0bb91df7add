//! The names of places (ADR 0020 §2), checked alike by REST and the CLI.

/// A channel's name: `[a-z0-9-]{1,80}`, unique in its space, so it can be
/// typed and linked as is.
pub fn is_channel_name(name: &str) -> bool {
    (1..=80).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// A space's or group's name: 1 to 80 characters, not blank, no control
/// characters (they are shown to people as they are).
pub fn is_display_name(name: &str) -> bool {
    (1..=80).contains(&name.chars().count())
        && !name.trim().is_empty()
        && !name.chars().any(char::is_control)
}

pub const CHANNEL_NAME_RULE: &str = "1 to 80 of a-z, 0-9 and -";
pub const DISPLAY_NAME_RULE: &str = "1 to 80 characters, not blank, no control characters";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_names_are_lowercase_digits_and_dashes() {
        assert!(is_channel_name("general"));
        assert!(is_channel_name("team-2"));
        assert!(!is_channel_name(""));
        assert!(!is_channel_name("General"));
        assert!(!is_channel_name("a b"));
        assert!(!is_channel_name(&"a".repeat(81)));
        assert!(is_channel_name(&"a".repeat(80)));
    }

    #[test]
    fn display_names_refuse_blank_and_control_characters() {
        assert!(is_display_name("Support"));
        assert!(!is_display_name("  "));
        assert!(!is_display_name("a\nb"));
        assert!(!is_display_name(&"é".repeat(81)));
        assert!(is_display_name(&"é".repeat(80)));
    }
}
