//! JSON parsing that refuses duplicate object keys (serde_json keeps the
//! last one silently, so a signed card could hide a second value). The
//! check itself is shared with every REST body: `domain::strict_json`.

use serde_json::Value;

use super::CardError;
use crate::domain::strict_json::reject_duplicate_keys;

pub fn parse(bytes: &[u8]) -> Result<Value, CardError> {
    reject_duplicate_keys(bytes).map_err(|d| CardError::DuplicateKey(d.pointer))?;
    serde_json::from_slice(bytes).map_err(|e| CardError::InvalidJson(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_refused_at_any_depth() {
        assert!(parse(br#"{"a": 1, "b": {"c": [1, {"d": 2}]}}"#).is_ok());
        assert_eq!(
            parse(br#"{"a": 1, "a": 2}"#),
            Err(CardError::DuplicateKey("/a".into()))
        );
        assert_eq!(
            parse(br#"{"x": [{"k": 1, "k": 1}]}"#),
            Err(CardError::DuplicateKey("/x/0/k".into()))
        );
        assert!(matches!(parse(b"{"), Err(CardError::InvalidJson(_))));
        assert!(matches!(parse(b"{} {}"), Err(CardError::InvalidJson(_))));
    }
}
