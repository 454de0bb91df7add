//! JSON parsing that refuses duplicate object members, shared by every
//! input the hub reads: WebSocket frames, REST bodies, App Cards.
//!
//! serde_json keeps the last of two equal member names silently, so
//! `{"to": "a", "to": "b"}` means one thing to the hub and maybe another to
//! a proxy, a log reader or a signature checker. Refusing them is the only
//! reading every party agrees on.
//!
//! The parse builds the `Value` in the same single pass that checks the
//! names (one map insert per member, exactly as serde_json's own `Value`
//! does), so the strict parser costs about what the lenient one did. The
//! path of a duplicate is assembled only on the error path: the failing
//! member's name is recorded, and each enclosing object or array adds its
//! own segment while the error unwinds.

use std::cell::RefCell;

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Value};

use super::validate::pointer_escape;

/// The first member name found twice in one object.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("duplicate key at {pointer}")]
pub struct DuplicateKey {
    /// JSON pointer (RFC 6901) to the second occurrence, from the
    /// document's root: `/params/parts/0/text`.
    pub pointer: String,
}

/// Why a strict parse failed.
#[derive(Debug, thiserror::Error)]
pub enum StrictError {
    /// Not JSON at all (or trailing data, or nested too deep).
    #[error("{0}")]
    Syntax(serde_json::Error),
    #[error(transparent)]
    Duplicate(DuplicateKey),
}

/// Parses `bytes` as one JSON document, refusing duplicate member names at
/// any depth.
pub fn parse(bytes: &[u8]) -> Result<Value, StrictError> {
    let trail = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = StrictValue { trail: &trail }
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v));
    parsed.map_err(|e| match trail.into_inner() {
        Some(segments) => StrictError::Duplicate(DuplicateKey {
            pointer: pointer(segments),
        }),
        None => StrictError::Syntax(e),
    })
}

/// Only the duplicate check, for callers that parse with their own types
/// afterwards. Invalid JSON passes: reporting it is the caller's parser's
/// job, with its own error.
pub fn reject_duplicate_keys(bytes: &[u8]) -> Result<(), DuplicateKey> {
    match parse(bytes) {
        Err(StrictError::Duplicate(d)) => Err(d),
        _ => Ok(()),
    }
}

/// Segments were pushed innermost first.
fn pointer(segments: Vec<String>) -> String {
    segments
        .iter()
        .rev()
        .map(|s| format!("/{}", pointer_escape(s)))
        .collect()
}

/// The path of the duplicate being reported, innermost segment first;
/// `None` while no duplicate was found.
type Trail = RefCell<Option<Vec<String>>>;

#[derive(Clone, Copy)]
struct StrictValue<'t> {
    trail: &'t Trail,
}

impl StrictValue<'_> {
    /// Adds an enclosing segment to a duplicate's path while its error
    /// unwinds; other errors pass untouched.
    fn enclose<E>(&self, segment: impl FnOnce() -> String, err: E) -> E {
        if let Some(segments) = self.trail.borrow_mut().as_mut() {
            segments.push(segment());
        }
        err
    }
}

impl<'de> DeserializeSeed<'de> for StrictValue<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        loop {
            match seq.next_element_seed(self) {
                Ok(Some(v)) => out.push(v),
                Ok(None) => return Ok(Value::Array(out)),
                Err(e) => {
                    let index = out.len();
                    return Err(self.enclose(|| index.to_string(), e));
                }
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = match map.next_value_seed(self) {
                Ok(v) => v,
                Err(e) => return Err(self.enclose(|| key, e)),
            };
            match out.entry(key) {
                Entry::Vacant(slot) => {
                    slot.insert(value);
                }
                Entry::Occupied(taken) => {
                    *self.trail.borrow_mut() = Some(vec![taken.key().clone()]);
                    return Err(A::Error::custom("duplicate member"));
                }
            }
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn duplicate(text: &str) -> Option<String> {
        reject_duplicate_keys(text.as_bytes())
            .err()
            .map(|d| d.pointer)
    }

    #[test]
    fn duplicates_are_refused_at_any_depth_with_their_pointer() {
        assert_eq!(duplicate(r#"{"a": 1, "b": {"c": [1, {"d": 2}]}}"#), None);
        assert_eq!(duplicate(r#"{"a": 1, "a": 2}"#).as_deref(), Some("/a"));
        assert_eq!(
            duplicate(r#"{"x": [0, {"k": 1, "k": 1}]}"#).as_deref(),
            Some("/x/1/k")
        );
        assert_eq!(
            duplicate(r#"{"p": {"a/b": {"~": 1, "~": 2}}}"#).as_deref(),
            Some("/p/a~1b/~0")
        );
        assert_eq!(
            duplicate(r#"[{"a": 1}, [{"b": [], "b": []}]]"#).as_deref(),
            Some("/1/0/b")
        );
        // Equal names in different objects are fine.
        assert_eq!(duplicate(r#"{"a": {"a": 1}, "b": {"a": 2}}"#), None);
        let d = reject_duplicate_keys(br#"{"m": 1, "m": 2}"#).unwrap_err();
        assert_eq!(d.to_string(), "duplicate key at /m");
        assert_eq!(
            duplicate(r#"{"\u0061": 1, "a": 2}"#).as_deref(),
            Some("/a"),
            "escapes are decoded first"
        );
    }

    #[test]
    fn the_parse_matches_serde_json_and_reports_syntax_errors_as_such() {
        let text = r#"{"s": "é\n", "n": [-1, 18446744073709551615, 1.5e3, true, null], "o": {}}"#;
        assert_eq!(
            parse(text.as_bytes()).unwrap(),
            serde_json::from_str::<Value>(text).unwrap()
        );
        for bad in ["{", "{} {}", "[1,]", ""] {
            assert!(
                matches!(parse(bad.as_bytes()), Err(StrictError::Syntax(_))),
                "{bad}"
            );
            assert_eq!(reject_duplicate_keys(bad.as_bytes()), Ok(()), "{bad}");
        }
        // The same nesting limit as serde_json: 127 containers parse, 128 do not.
        let nest = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(parse(nest(127).as_bytes()).is_ok());
        assert!(matches!(
            parse(nest(128).as_bytes()),
            Err(StrictError::Syntax(_))
        ));
    }
}
