//! Duplicate object keys, refused. serde_json keeps the last of two equal
//! keys silently, so a reader and a signer (or a validator and a handler)
//! could see different values in the same bytes. Every body the hub reads
//! from a peer goes through this check first.

use std::cell::RefCell;
use std::fmt;

use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::Deserializer;

/// The first duplicate key found, by the JSON pointer of its second
/// occurrence (`/manifest/name`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DuplicateKey {
    pub pointer: String,
}

impl fmt::Display for DuplicateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "duplicate key at {}", self.pointer)
    }
}

impl std::error::Error for DuplicateKey {}

/// `Err` for the first duplicate key in `bytes`. Bytes that are not JSON
/// pass: the caller's own parse reports them, with its own message.
pub fn reject_duplicate_keys(bytes: &[u8]) -> Result<(), DuplicateKey> {
    let found = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let _ = Checked {
        pointer: String::new(),
        found: &found,
    }
    .deserialize(&mut de);
    match found.into_inner() {
        Some(pointer) => Err(DuplicateKey { pointer }),
        None => Ok(()),
    }
}

/// One value at `pointer`; a duplicate is written to `found` and stops the
/// walk.
struct Checked<'a> {
    pointer: String,
    found: &'a RefCell<Option<String>>,
}

fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

impl<'de> DeserializeSeed<'de> for Checked<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Checked<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0usize;
        while seq
            .next_element_seed(Checked {
                pointer: format!("{}/{index}", self.pointer),
                found: self.found,
            })?
            .is_some()
        {
            index += 1;
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let pointer = format!("{}/{}", self.pointer, escape(&key));
            if !seen.insert(key) {
                *self.found.borrow_mut() = Some(pointer);
                return Err(serde::de::Error::custom("duplicate key"));
            }
            map.next_value_seed(Checked {
                pointer,
                found: self.found,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dup(json: &str) -> Option<String> {
        reject_duplicate_keys(json.as_bytes())
            .err()
            .map(|d| d.pointer)
    }

    #[test]
    fn duplicates_are_found_at_any_depth_with_their_pointer() {
        assert_eq!(dup(r#"{"a": 1, "b": {"c": [1, {"d": 2}]}}"#), None);
        assert_eq!(dup(r#"{"a": 1, "a": 2}"#), Some("/a".into()));
        assert_eq!(
            dup(r#"{"x": [0, {"k": 1, "k": 1}]}"#),
            Some("/x/1/k".into())
        );
        assert_eq!(
            dup(r#"{"a/b~": {"q": 1, "q": 2}}"#),
            Some("/a~1b~0/q".into())
        );
        assert_eq!(
            dup(r#"{"\u0061": 1, "a": 2}"#),
            Some("/a".into()),
            "escapes are decoded first"
        );
        assert_eq!(
            dup(r#"[{"a": 1}, {"a": 1}]"#),
            None,
            "siblings may share keys"
        );
        assert_eq!(dup("{"), None, "not JSON: left to the caller's parse");
    }
}
