//! Collecting every problem of a JSON document at once, each with a JSON
//! pointer (RFC 6901), so a caller can fix a whole manifest in one round.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};

/// The JSON Schema `pattern` of a string without control characters
/// (Unicode general category Cc, what [`char::is_control`] tests), as
/// [`Problems::string`] checks it.
pub const NO_CONTROL: &str = r"^[^\u0000-\u001F\u007F-\u009F]*$";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct FieldProblem {
    /// JSON pointer to the offending member.
    pub pointer: String,
    pub message: String,
}

#[derive(Debug, Default)]
pub struct Problems {
    list: Vec<FieldProblem>,
}

pub fn pointer_escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

impl Problems {
    pub fn push(&mut self, pointer: impl Into<String>, message: impl Into<String>) {
        self.list.push(FieldProblem {
            pointer: pointer.into(),
            message: message.into(),
        });
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn into_vec(self) -> Vec<FieldProblem> {
        self.list
    }

    /// The object at `at`, with every member outside `known` reported.
    pub fn object<'v>(
        &mut self,
        at: &str,
        value: Option<&'v Value>,
        known: &[&str],
        required: bool,
    ) -> Option<&'v Map<String, Value>> {
        match value {
            None if required => {
                self.push(at, "is required");
                None
            }
            None => None,
            Some(Value::Object(map)) => {
                for key in map.keys() {
                    if !known.contains(&key.as_str()) {
                        self.push(format!("{at}/{}", pointer_escape(key)), "unknown member");
                    }
                }
                Some(map)
            }
            Some(_) => {
                self.push(at, "must be an object");
                None
            }
        }
    }

    /// A required string of `min..=max` characters without control characters.
    pub fn string<'v>(
        &mut self,
        at: &str,
        value: Option<&'v Value>,
        min: usize,
        max: usize,
    ) -> Option<&'v str> {
        match value {
            None => {
                self.push(at, "is required");
                None
            }
            Some(Value::String(s)) => {
                let len = s.chars().count();
                if len < min || len > max {
                    self.push(at, format!("must be {min} to {max} characters long"));
                    None
                } else if s.chars().any(char::is_control) {
                    self.push(at, "must not contain control characters");
                    None
                } else {
                    Some(s)
                }
            }
            Some(_) => {
                self.push(at, "must be a string");
                None
            }
        }
    }

    /// A required integer within `min..=max`.
    pub fn integer(&mut self, at: &str, value: Option<&Value>, min: u64, max: u64) -> Option<u64> {
        match value {
            None => {
                self.push(at, "is required");
                None
            }
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) if (min..=max).contains(&v) => Some(v),
                _ => {
                    self.push(at, format!("must be an integer from {min} to {max}"));
                    None
                }
            },
            Some(_) => {
                self.push(at, "must be an integer");
                None
            }
        }
    }
}
