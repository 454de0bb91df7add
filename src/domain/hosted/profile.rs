//! `set_persona` and `set_profile` (ADR 0031 §6): what an app says of
//! itself. The persona is free text for the app's own use (a prompt, a
//! character sheet), read back by `get_persona`; the profile is what other
//! principals see of it: `whoami` and every `rooms_members` answer naming
//! it carry it.

use serde::{Deserialize, Serialize};

use super::primitives::{ParamBounds, Params};

/// The profile an app sets: each member replaces the card's own (`name`
/// the card's name, `description` its tagline) when present.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// Longest profile name, in characters (a display name, as agents' are).
pub const NAME_MAX_CHARS: usize = 80;

/// `set_persona {persona: string or null}`: `null` goes back to the card's
/// persona file. Required, `null` included, so a forgotten member never
/// silently clears the persona.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SetPersona {
    #[serde(deserialize_with = "present")]
    persona: Option<String>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Option::<String>::deserialize(d)
}

pub(super) fn set_persona(p: SetPersona, b: &ParamBounds) -> Result<Params, String> {
    if let Some(text) = &p.persona {
        if text.len() > b.persona_max_bytes {
            return Err(format!(
                "params.persona must be at most {} bytes (hosted.persona_max_bytes)",
                b.persona_max_bytes
            ));
        }
    }
    Ok(Params::SetPersona { persona: p.persona })
}

/// `set_profile {name?, description?}`: the whole profile, replacing the
/// one set before; its JSON is at most `hosted.profile_max_bytes`.
pub(super) fn set_profile(p: Profile, b: &ParamBounds) -> Result<Params, String> {
    if let Some(name) = &p.name {
        let n = name.chars().count();
        if n == 0 || n > NAME_MAX_CHARS || name.trim().is_empty() {
            return Err(format!(
                "params.name must be 1 to {NAME_MAX_CHARS} characters, not blank"
            ));
        }
        if name.chars().any(char::is_control) {
            return Err("params.name must not hold control characters".into());
        }
        if let Some(c) = name.chars().find(|c| is_format(*c)) {
            return Err(format!(
                "params.name must not hold Unicode format characters (Cf), such as U+{:04X}",
                u32::from(c)
            ));
        }
    }
    let size = serde_json::to_string(&p).map_or(usize::MAX, |s| s.len());
    if size > b.profile_max_bytes {
        return Err(format!(
            "params: the profile's JSON must be at most {} bytes (hosted.profile_max_bytes)",
            b.profile_max_bytes
        ));
    }
    Ok(Params::SetProfile { profile: p })
}

/// Unicode's format characters (general category Cf, Unicode 15.1):
/// invisible, and some (the bidirectional overrides, zero-width joiners)
/// make a name read as another, so a profile name refuses them.
const FORMAT: &[(u32, u32)] = &[
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
];

fn is_format(c: char) -> bool {
    let c = u32::from(c);
    FORMAT.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c))
}

/// What others see: the profile set, each absent member the card's own.
pub fn shown(set: Option<&Profile>, card_name: &str, card_tagline: &str) -> Profile {
    let set = set.cloned().unwrap_or_default();
    Profile {
        name: Some(set.name.unwrap_or_else(|| card_name.to_string())),
        description: Some(set.description.unwrap_or_else(|| card_tagline.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b() -> ParamBounds {
        ParamBounds {
            persona_max_bytes: 5,
            profile_max_bytes: 40,
            ..ParamBounds::for_tests()
        }
    }

    #[test]
    fn persona_is_bounded_and_null_resets() {
        let p = |v: Option<&str>| SetPersona {
            persona: v.map(str::to_string),
        };
        assert_eq!(
            set_persona(p(Some("12345")), &b()),
            Ok(Params::SetPersona {
                persona: Some("12345".into())
            })
        );
        assert!(set_persona(p(Some("123456")), &b())
            .unwrap_err()
            .contains("hosted.persona_max_bytes"));
        assert_eq!(
            set_persona(p(None), &b()),
            Ok(Params::SetPersona { persona: None })
        );
    }

    #[test]
    fn profile_names_are_display_names_and_the_json_is_bounded() {
        let p = |name: &str, d: Option<&str>| Profile {
            name: Some(name.into()),
            description: d.map(str::to_string),
        };
        assert!(set_profile(p("Dealer", None), &b()).is_ok());
        assert!(set_profile(p("", None), &b())
            .unwrap_err()
            .contains("params.name"));
        assert!(set_profile(p("  ", None), &b()).is_err());
        assert!(set_profile(p("a\nb", None), &b())
            .unwrap_err()
            .contains("control"));
        assert!(set_profile(p(&"x".repeat(81), None), &b()).is_err());
        for hidden in [
            "Deal\u{202E}er",
            "Dea\u{200B}ler",
            "\u{FEFF}Dealer",
            "D\u{E0041}",
        ] {
            assert!(
                set_profile(p(hidden, None), &b())
                    .unwrap_err()
                    .contains("format characters (Cf)"),
                "{hidden:?}"
            );
        }
        assert!(set_profile(p("Dealer é 🎲", None), &b()).is_ok());
        assert!(set_profile(p("Dealer", Some(&"d".repeat(30))), &b())
            .unwrap_err()
            .contains("hosted.profile_max_bytes"));
        assert!(set_profile(Profile::default(), &b()).is_ok());
    }

    #[test]
    fn the_shown_profile_falls_back_to_the_cards_own() {
        let set = Profile {
            name: Some("Dealer".into()),
            description: None,
        };
        assert_eq!(
            shown(Some(&set), "Cards", "a game"),
            Profile {
                name: Some("Dealer".into()),
                description: Some("a game".into())
            }
        );
        assert_eq!(
            shown(None, "Cards", "a game").name.as_deref(),
            Some("Cards")
        );
    }
}
