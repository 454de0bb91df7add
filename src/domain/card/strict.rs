//! `app.json` is parsed with the hub's strict JSON parser, shared with every
//! frame and REST body (`domain::strict_json`): a duplicate key could let a
//! signed card hide a second value (serde_json keeps the last one silently).

use serde_json::Value;

use super::CardError;
use crate::domain::strict_json::{self, StrictError};

pub fn parse(bytes: &[u8]) -> Result<Value, CardError> {
    strict_json::parse(bytes).map_err(|e| match e {
        StrictError::Duplicate(d) => CardError::DuplicateKey(d.pointer),
        StrictError::Syntax(e) => CardError::InvalidJson(e.to_string()),
    })
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
