//! `[component]`: the bounds of the cards apps post (ADR 0027 §5, §11).

use serde::{Deserialize, Serialize};

use super::require_positive;
use crate::domain::component;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ComponentConfig {
    /// Most components on one message.
    pub max_per_message: usize,
    /// A component's lifetime when its app names none, and the longest
    /// one it may name.
    pub default_ttl_seconds: u64,
    /// Longest button label, in characters.
    pub label_max_chars: usize,
    /// Longest custom id, placeholder, title, option label or value and
    /// field label, in characters.
    pub text_max_chars: usize,
    /// Most options of one select.
    pub select_max_options: usize,
    /// Most fields of one form.
    pub form_max_fields: usize,
    /// Longest `maxLength` of a string field, and its default.
    pub field_max_length: u32,
    /// Longest field name, in characters.
    pub field_name_max_chars: usize,
}

impl Default for ComponentConfig {
    fn default() -> Self {
        ComponentConfig {
            max_per_message: component::DEFAULT_MAX_PER_MESSAGE,
            default_ttl_seconds: component::DEFAULT_TTL_SECONDS,
            label_max_chars: component::DEFAULT_LABEL_MAX_CHARS,
            text_max_chars: component::DEFAULT_TEXT_MAX_CHARS,
            select_max_options: component::DEFAULT_SELECT_MAX_OPTIONS,
            form_max_fields: component::DEFAULT_FORM_MAX_FIELDS,
            field_max_length: component::DEFAULT_FIELD_MAX_LENGTH,
            field_name_max_chars: component::DEFAULT_FIELD_NAME_MAX_CHARS,
        }
    }
}

/// The ceiling of each bound: a card is one message's worth of controls,
/// a component lives at most a year, and every text and value it holds is
/// stored with the message (a form's values in the app's durable event).
const CEILINGS: [(&str, u64); 8] = [
    ("component.max_per_message", 100),
    ("component.default_ttl_seconds", 366 * 86_400),
    ("component.label_max_chars", 200),
    ("component.text_max_chars", 500),
    ("component.select_max_options", 100),
    ("component.form_max_fields", 50),
    ("component.field_max_length", 16_000),
    ("component.field_name_max_chars", 128),
];

impl ComponentConfig {
    fn bounds(&self) -> [(&'static str, u64); 8] {
        [
            ("component.max_per_message", self.max_per_message as u64),
            ("component.default_ttl_seconds", self.default_ttl_seconds),
            ("component.label_max_chars", self.label_max_chars as u64),
            ("component.text_max_chars", self.text_max_chars as u64),
            (
                "component.select_max_options",
                self.select_max_options as u64,
            ),
            ("component.form_max_fields", self.form_max_fields as u64),
            (
                "component.field_max_length",
                u64::from(self.field_max_length),
            ),
            (
                "component.field_name_max_chars",
                self.field_name_max_chars as u64,
            ),
        ]
    }

    pub(super) fn validate(&self) -> anyhow::Result<()> {
        let bounds = self.bounds();
        require_positive(&bounds)?;
        for ((key, value), (_, ceiling)) in bounds.iter().zip(CEILINGS) {
            if *value > ceiling {
                anyhow::bail!("{key} must be at most {ceiling}");
            }
        }
        Ok(())
    }

    /// The bounds a card and an interaction's values are checked against.
    pub fn limits(&self) -> component::ComponentLimits {
        component::ComponentLimits {
            max_per_message: self.max_per_message,
            ttl_seconds: self.default_ttl_seconds,
            label_max_chars: self.label_max_chars,
            text_max_chars: self.text_max_chars,
            select_max_options: self.select_max_options,
            form_max_fields: self.form_max_fields,
            field_max_length: self.field_max_length,
            field_name_max_chars: self.field_name_max_chars,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_checked_naming_their_keys() {
        let ok = ComponentConfig::default();
        assert!(ok.validate().is_ok());
        let err = |c: ComponentConfig| c.validate().unwrap_err().to_string();
        assert!(err(ComponentConfig {
            max_per_message: 0,
            ..ComponentConfig::default()
        })
        .contains("component.max_per_message must be greater than 0"));
        assert!(err(ComponentConfig {
            max_per_message: 101,
            ..ComponentConfig::default()
        })
        .contains("component.max_per_message must be at most"));
        assert!(err(ComponentConfig {
            default_ttl_seconds: 0,
            ..ComponentConfig::default()
        })
        .contains("component.default_ttl_seconds must be greater than 0"));
        assert!(err(ComponentConfig {
            default_ttl_seconds: 366 * 86_400 + 1,
            ..ComponentConfig::default()
        })
        .contains("component.default_ttl_seconds must be at most"));
        assert!(err(ComponentConfig {
            field_max_length: 0,
            ..ComponentConfig::default()
        })
        .contains("component.field_max_length must be greater than 0"));
        assert!(err(ComponentConfig {
            select_max_options: 101,
            ..ComponentConfig::default()
        })
        .contains("component.select_max_options must be at most 100"));
        assert!(err(ComponentConfig {
            label_max_chars: 201,
            ..ComponentConfig::default()
        })
        .contains("component.label_max_chars must be at most 200"));
    }

    #[test]
    fn every_bound_has_its_ceiling_under_its_key() {
        let keys: Vec<&str> = ComponentConfig::default()
            .bounds()
            .iter()
            .map(|(k, _)| *k)
            .collect();
        let ceilings: Vec<&str> = CEILINGS.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, ceilings);
        assert!(ComponentConfig::default()
            .bounds()
            .iter()
            .zip(CEILINGS)
            .all(|((_, v), (_, c))| v <= &c));
    }
}
