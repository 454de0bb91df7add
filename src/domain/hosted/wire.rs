//! The capability broker's wire (seed 003, ADR 0031 §5): one JSON object a
//! line. A request is `{"token", "id", "method", "params"}`; the answer is
//! `{"id", "ok": true, "text"}` or `{"id", "ok": false, "error", "message"}`
//! with `error` from the seed's vocabulary.

use serde_json::{json, Map, Value};
use subtle::ConstantTimeEq;

use super::primitives::Primitive;

/// The seed's error vocabulary, and nothing else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    BadToken,
    CapabilityDenied,
    UnknownPrimitive,
    TooLarge,
    BadRequest,
    Error,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadToken => "bad_token",
            ErrorCode::CapabilityDenied => "capability_denied",
            ErrorCode::UnknownPrimitive => "unknown_primitive",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::Error => "error",
        }
    }
}

/// A refused line or call: what goes back, with the request's `id` when
/// it could be read.
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    pub id: Value,
    pub code: ErrorCode,
    pub message: String,
}

impl Failure {
    pub fn new(id: Value, code: ErrorCode, message: impl Into<String>) -> Failure {
        Failure {
            id,
            code,
            message: message.into(),
        }
    }

    /// The answer line, newline included.
    pub fn line(&self) -> Vec<u8> {
        line(&json!({
            "id": self.id,
            "ok": false,
            "error": self.code.as_str(),
            "message": self.message,
        }))
    }
}

/// A success line, newline included.
pub fn ok_line(id: &Value, text: &str) -> Vec<u8> {
    line(&json!({"id": id, "ok": true, "text": text}))
}

fn line(v: &Value) -> Vec<u8> {
    let mut out = serde_json::to_vec(v).expect("a JSON value serializes");
    out.push(b'\n');
    out
}

/// A request that passed every check the broker makes before the call.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    pub id: Value,
    pub primitive: Primitive,
    pub params: Map<String, Value>,
}

/// What the broker knows of its run when it reads a line.
pub struct Grant<'a> {
    /// The run's token: 32 bytes, shown to the child as 64 hex digits.
    pub token: &'a [u8; 32],
    /// `granted_methods(card)`.
    pub methods: &'a std::collections::BTreeSet<&'static str>,
}

/// A line's checks, in the ADR's order: the JSON and its members, the
/// token, the method's existence, then its grant. Params are the
/// primitive's to check (`primitives::decode`).
pub fn read_request(line: &[u8], grant: &Grant<'_>) -> Result<Call, Failure> {
    let bad = |id: &Value, m: &str| Failure::new(id.clone(), ErrorCode::BadRequest, m);
    let value = crate::domain::strict_json::parse(line)
        .map_err(|e| bad(&Value::Null, &format!("not a JSON object: {e}")))?;
    let Value::Object(mut request) = value else {
        return Err(bad(&Value::Null, "a request is a JSON object"));
    };
    let id = match request.remove("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id,
        Some(_) => return Err(bad(&Value::Null, "id must be a string or a number")),
        None => return Err(bad(&Value::Null, "id is required")),
    };
    if let Some(unknown) = request
        .keys()
        .find(|k| !["token", "method", "params"].contains(&k.as_str()))
    {
        return Err(bad(&id, &format!("unknown member {unknown:?}")));
    }
    let Some(Value::String(token)) = request.remove("token") else {
        return Err(bad(&id, "token must be a string"));
    };
    let Some(Value::String(method)) = request.remove("method") else {
        return Err(bad(&id, "method must be a string"));
    };
    let params = match request.remove("params") {
        None => Map::new(),
        Some(Value::Object(p)) => p,
        Some(_) => return Err(bad(&id, "params must be an object")),
    };
    if !token_matches(&token, grant.token) {
        return Err(Failure::new(
            id,
            ErrorCode::BadToken,
            "the token is not this run's",
        ));
    }
    let Some(primitive) = Primitive::parse(&method) else {
        return Err(Failure::new(
            id,
            ErrorCode::UnknownPrimitive,
            format!("{method:?} is not a primitive"),
        ));
    };
    if !grant.methods.contains(primitive.name()) {
        return Err(Failure::new(
            id,
            ErrorCode::CapabilityDenied,
            format!("{method} is not granted to this app"),
        ));
    }
    Ok(Call {
        id,
        primitive,
        params,
    })
}

/// The token as the child sees it.
pub fn token_text(token: &[u8; 32]) -> String {
    token.iter().map(|b| format!("{b:02x}")).collect()
}

/// Constant time over the 64 digits (the length is public); anything not
/// 64 lowercase hex digits fails the same comparison.
pub fn token_matches(presented: &str, token: &[u8; 32]) -> bool {
    let expected = token_text(token);
    let presented = presented.as_bytes();
    if presented.len() != expected.len() {
        // Compare against itself so a wrong length costs what a wrong
        // token of the right length costs.
        let _ = expected.as_bytes().ct_eq(expected.as_bytes());
        return false;
    }
    presented.ct_eq(expected.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn grant_of<'a>(token: &'a [u8; 32], methods: &'a BTreeSet<&'static str>) -> Grant<'a> {
        Grant { token, methods }
    }

    #[test]
    fn each_check_has_its_code_in_order() {
        let token = [7u8; 32];
        let methods: BTreeSet<&'static str> = ["whoami"].into_iter().collect();
        let g = grant_of(&token, &methods);
        let t = token_text(&token);
        let code = |line: String| read_request(line.as_bytes(), &g).map(|c| c.primitive);
        let req = |tok: &str, m: &str| {
            format!(r#"{{"token":"{tok}","id":1,"method":"{m}","params":{{}}}}"#)
        };
        assert_eq!(code(req(&t, "whoami")), Ok(Primitive::Whoami));
        let err = |line: String| read_request(line.as_bytes(), &g).unwrap_err();
        assert_eq!(err("{nope".into()).code, ErrorCode::BadRequest);
        assert_eq!(err("{nope".into()).id, Value::Null);
        assert_eq!(err(r#"{"id":1,"id":2}"#.into()).code, ErrorCode::BadRequest);
        assert_eq!(err(req("00", "whoami")).code, ErrorCode::BadToken);
        assert_eq!(err(req(&t, "shell")).code, ErrorCode::UnknownPrimitive);
        assert_eq!(
            err(req(&t, "send_message")).code,
            ErrorCode::CapabilityDenied
        );
        assert_eq!(
            err(req(&t, "rooms_create")).code,
            ErrorCode::UnknownPrimitive
        );
        let f = err(req("00", "shell"));
        assert_eq!((f.code, f.id), (ErrorCode::BadToken, json!(1)));
        assert_eq!(
            err(format!(
                r#"{{"token":"{t}","id":1,"method":"whoami","extra":1}}"#
            ))
            .code,
            ErrorCode::BadRequest
        );
    }

    #[test]
    fn answers_are_one_line_each() {
        let ok = ok_line(&json!("a"), "{\"x\":1}\n");
        assert_eq!(ok.iter().filter(|b| **b == b'\n').count(), 1);
        let f = Failure::new(json!(2), ErrorCode::TooLarge, "x").line();
        let v: Value = serde_json::from_slice(&f).unwrap();
        assert_eq!(
            v,
            json!({"id": 2, "ok": false, "error": "too_large", "message": "x"})
        );
    }

    #[test]
    fn tokens_compare_whole() {
        let token = [0xabu8; 32];
        let t = token_text(&token);
        assert!(token_matches(&t, &token));
        assert!(!token_matches(&t[..63], &token));
        assert!(!token_matches(&t.to_uppercase(), &token));
        assert!(!token_matches(&token_text(&[0xac; 32]), &token));
        assert!(!token_matches(&format!("{t}0"), &token));
    }
}
