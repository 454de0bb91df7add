//! Messages: parts, limits, and the record every reader sees.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::event::contains_null;

// Decoded by hand (see `part_decode`), not derived: serde buffers an
// internally tagged enum before picking the variant, which hides the member
// at fault from error paths (`parts[0]` instead of `parts[0].text`).
#[derive(Clone, Debug, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum Part {
    Text {
        text: String,
    },
    /// Structured data for programs; any JSON except `null`.
    Data {
        data: Value,
        #[serde(default, rename = "mimeType", skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
}

/// Who authored a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    Agent,
    App,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Agent => "agent",
            Origin::App => "app",
        }
    }

    pub fn parse(s: &str) -> Option<Origin> {
        match s {
            "agent" => Some(Origin::Agent),
            "app" => Some(Origin::App),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct PartLimits {
    pub max_parts: usize,
    pub max_bytes: usize,
}

/// A part that breaks a rule: `field` is the exact path (`parts[1].text`,
/// or `parts` for the list as a whole) and `message` starts with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartError {
    pub field: String,
    pub message: String,
}

impl PartError {
    fn at(field: String, rule: impl std::fmt::Display) -> PartError {
        PartError {
            message: format!("{field} {rule}"),
            field,
        }
    }
}

/// Checks parts against the configured limits. The error names the part.
pub fn validate_parts(parts: &[Part], limits: &PartLimits) -> Result<(), PartError> {
    let whole = || "parts".to_string();
    if parts.is_empty() {
        return Err(PartError::at(whole(), "must not be empty"));
    }
    if parts.len() > limits.max_parts {
        return Err(PartError::at(
            whole(),
            format_args!(
                "must have at most {} entries (messages.max_parts)",
                limits.max_parts
            ),
        ));
    }
    let mut total = 0usize;
    for (i, part) in parts.iter().enumerate() {
        total = total.saturating_add(validate_part(i, part)?);
    }
    if total > limits.max_bytes {
        return Err(PartError::at(
            whole(),
            format_args!(
                "hold {total} bytes, more than messages.max_bytes ({})",
                limits.max_bytes
            ),
        ));
    }
    Ok(())
}

/// One part's own rules; returns the bytes it counts against the limit.
fn validate_part(i: usize, part: &Part) -> Result<usize, PartError> {
    match part {
        Part::Text { text } => {
            if text.is_empty() {
                return Err(PartError::at(
                    format!("parts[{i}].text"),
                    "must not be empty",
                ));
            }
            Ok(text.len())
        }
        Part::Data { data, mime_type } => {
            if contains_null(data) {
                return Err(PartError::at(
                    format!("parts[{i}].data"),
                    "must not contain null; omit absent members",
                ));
            }
            if let Some(m) = mime_type {
                if m.is_empty() || m.len() > 255 {
                    return Err(PartError::at(
                        format!("parts[{i}].mimeType"),
                        "must be 1 to 255 characters",
                    ));
                }
            }
            Ok(serde_json::to_string(data)
                .map(|s| s.len())
                .unwrap_or(usize::MAX))
        }
    }
}

/// A stored message as participants see it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub id: Uuid,
    pub conversation_id: Uuid,
    /// Position in the conversation, from 1.
    pub seq: u64,
    pub sender_id: Uuid,
    pub origin: Origin,
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<Uuid>,
    /// RFC 3339.
    pub created_at: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const L: PartLimits = PartLimits {
        max_parts: 2,
        max_bytes: 10,
    };

    #[test]
    fn limits_are_enforced_with_the_part_named() {
        assert!(validate_parts(&[Part::Text { text: "hi".into() }], &L).is_ok());
        assert!(validate_parts(&[], &L)
            .unwrap_err()
            .message
            .contains("empty"));
        let three = vec![Part::Text { text: "a".into() }; 3];
        assert!(validate_parts(&three, &L)
            .unwrap_err()
            .message
            .contains("max_parts"));
        assert!(validate_parts(
            &[Part::Text {
                text: "x".repeat(11)
            }],
            &L
        )
        .unwrap_err()
        .message
        .contains("max_bytes"));
        let null = Part::Data {
            data: json!({"a": null}),
            mime_type: None,
        };
        assert_eq!(
            validate_parts(&[null], &L).unwrap_err().field,
            "parts[0].data"
        );
        assert!(
            validate_parts(
                &[Part::Text {
                    text: String::new()
                }],
                &L
            )
            .unwrap_err()
            .field
                == "parts[0].text"
        );
    }
}
