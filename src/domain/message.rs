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
        /// Not empty; its UTF-8 bytes count against `messages.max_bytes`.
        #[schemars(length(min = 1))]
        text: String,
    },
    /// Structured data for programs; any JSON except `null`.
    Data {
        /// Any JSON with no `null` at any depth, nested at most
        /// `messages.max_data_depth` arrays and objects (default 120; the
        /// schema does not carry the depth); its compact JSON bytes count
        /// against `messages.max_bytes`.
        #[schemars(with = "NonNullJson")]
        data: Value,
        /// 1 to 255 characters.
        #[serde(default, rename = "mimeType", skip_serializing_if = "Option::is_none")]
        #[schemars(length(min = 1, max = MIME_TYPE_MAX))]
        mime_type: Option<String>,
    },
}

/// A data part's longest `mimeType`, in characters.
const MIME_TYPE_MAX: usize = 255;

/// The default of `messages.max_parts`; the exported schema carries it.
pub const DEFAULT_MAX_PARTS: usize = 16;

/// The schema of a data part's `data`: JSON without `null` anywhere, which
/// the hub refuses (a `null` member means absent, so a stored `null` would
/// read back as a different document).
pub struct NonNullJson;

impl JsonSchema for NonNullJson {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NonNullJson".into()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let inner = g.subschema_for::<Self>();
        schemars::json_schema!({
            "description": "Any JSON value but null, at every depth.",
            // `integer` beside `number` (which holds it) so that generated
            // types keep integers integers.
            "type": ["boolean", "integer", "number", "string", "array", "object"],
            "items": inner,
            "additionalProperties": inner,
        })
    }
}

/// Who authored a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    Agent,
    App,
    /// A person's message (ADR 0020 §1): direct, group and channel
    /// conversations; never a task's (people take no part in tasks).
    Person,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Agent => "agent",
            Origin::App => "app",
            Origin::Person => "person",
        }
    }

    pub fn parse(s: &str) -> Option<Origin> {
        match s {
            "agent" => Some(Origin::Agent),
            "app" => Some(Origin::App),
            "person" => Some(Origin::Person),
            _ => None,
        }
    }
}

/// How deeply a JSON document may nest arrays and objects and still parse:
/// serde_json's recursion limit is 128, so the 128th nested container fails.
/// The hub and every SDK reader parse with it.
pub const JSON_MAX_NESTING: usize = 127;

/// Containers around a data part's `data` on each way a message leaves the
/// hub, from the outermost brace down to the part object itself.
pub mod envelope_depth {
    /// A live or replayed event frame: frame, `params` (the envelope),
    /// `payload`, `message`, `parts`, the part.
    pub const EVENT_FRAME: usize = 6;
    /// A REST catch-up page: page, `events`, the envelope, `payload`,
    /// `message`, `parts`, the part.
    pub const CATCH_UP_PAGE: usize = 7;
    /// `agent/message/list`: frame, `result`, `messages`, the message,
    /// `parts`, the part.
    pub const MESSAGE_LIST: usize = 6;
    /// `app/message/authorize` and `app/dispatch/authorize` calls to apps:
    /// frame, `params`, `message`, `parts`, the part.
    pub const HOOK_CALL: usize = 5;
    /// The send's own answer: frame, `result`, `message`, `parts`, the part.
    pub const SEND_RESULT: usize = 5;
    /// The deepest of them all.
    pub const DEEPEST: usize = {
        let all = [
            EVENT_FRAME,
            CATCH_UP_PAGE,
            MESSAGE_LIST,
            HOOK_CALL,
            SEND_RESULT,
        ];
        let mut deepest = 0;
        let mut i = 0;
        while i < all.len() {
            if all[i] > deepest {
                deepest = all[i];
            }
            i += 1;
        }
        deepest
    };
}

/// The deepest `data` the hub can accept and still deliver on every way
/// out: anything deeper would be stored, then dropped by the recipients'
/// parsers. The default and the ceiling of `messages.max_data_depth`.
pub const MAX_DATA_DEPTH: usize = JSON_MAX_NESTING - envelope_depth::DEEPEST;

#[derive(Clone, Copy, Debug)]
pub struct PartLimits {
    pub max_parts: usize,
    pub max_bytes: usize,
    /// Most nested arrays and objects in one part's `data`.
    pub max_data_depth: usize,
}

/// Nested arrays and objects in `value`: 0 for a scalar, 1 for `[1]`.
/// Iterative, so a deep value built in-process cannot overflow the stack.
pub fn nesting(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(a) => Box::new(a.iter()),
            Value::Object(o) => Box::new(o.values()),
            _ => continue,
        };
        deepest = deepest.max(depth + 1);
        stack.extend(children.map(|c| (c, depth + 1)));
    }
    deepest
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
        total = total.saturating_add(validate_part(i, part, limits)?);
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
fn validate_part(i: usize, part: &Part, limits: &PartLimits) -> Result<usize, PartError> {
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
            let depth = nesting(data);
            if depth > limits.max_data_depth {
                return Err(PartError::at(
                    format!("parts[{i}].data"),
                    format_args!(
                        "is nested {depth} levels deep, more than messages.max_data_depth ({})",
                        limits.max_data_depth
                    ),
                ));
            }
            if let Some(m) = mime_type {
                if m.is_empty() || m.chars().count() > MIME_TYPE_MAX {
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
    /// A channel message's thread: the root it answers (ADR 0020 §2).
    /// Absent for the main thread and outside channels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<Uuid>,
    /// RFC 3339.
    pub created_at: String,
    /// The interaction a reply of its app answers (ADR 0027 §6): no agent
    /// takes a lease on such a message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to_interaction: Option<Uuid>,
    /// The card an app posted with the message (ADR 0027 §5), as it is now;
    /// absent on other messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card: Option<crate::domain::component::Card>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const L: PartLimits = PartLimits {
        max_parts: 2,
        max_bytes: 10,
        max_data_depth: 3,
    };

    #[test]
    fn data_deeper_than_the_limit_is_refused_naming_the_part() {
        assert_eq!(nesting(&json!(1)), 0);
        assert_eq!(nesting(&json!([1, {"a": [2]}])), 3);
        assert_eq!(MAX_DATA_DEPTH, 120);
        let part = |data| Part::Data {
            data,
            mime_type: None,
        };
        assert!(validate_parts(&[part(json!([[[1]]]))], &L).is_ok());
        let err = validate_parts(&[part(json!(1)), part(json!([[[[]]]]))], &L).unwrap_err();
        assert_eq!(err.field, "parts[1].data");
        assert_eq!(
            err.message,
            "parts[1].data is nested 4 levels deep, more than messages.max_data_depth (3)"
        );
    }

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
