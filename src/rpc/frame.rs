//! Parsing and writing JSON-RPC 2.0 frames.
//!
//! Frames are plain JSON-RPC 2.0 objects: request, response or notification,
//! told apart by their members alone (no `type` or `direction` field). The
//! parser is strict on purpose: a frame with members JSON-RPC does not define is
//! refused, so nobody grows a private dialect on top of the protocol, and so
//! is a frame that repeats a member name anywhere (serde_json would keep the
//! last value silently; see `domain::strict_json`).

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::error::{ErrorKind, RpcError};
use crate::domain::strict_json::{self, DuplicateKey, StrictError};

/// A request id as the peer sent it: a string, or an integer that fits in 64
/// bits (fractions and exponents are refused, since they could not be echoed
/// exactly). Echoed as received.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Id {
    Number(serde_json::Number),
    Str(String),
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Id::Number(n) => write!(f, "{n}"),
            Id::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// One inbound frame, classified.
#[derive(Debug)]
pub enum Incoming {
    Request {
        id: Id,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// An answer to a call this side made.
    Response {
        id: Id,
        outcome: Result<Value, RpcError>,
    },
    /// A response frame whose shape is wrong. When its id names a pending call,
    /// that call ends as a bad result; otherwise the frame is only counted.
    MalformedResponse { id: Option<Id>, reason: String },
    /// Not a valid frame: answer with `error` (and `id` when it could be read).
    Invalid { id: Option<Id>, error: RpcError },
}

const REQUEST_MEMBERS: [&str; 4] = ["jsonrpc", "id", "method", "params"];
const RESPONSE_MEMBERS: [&str; 4] = ["jsonrpc", "id", "result", "error"];

pub fn parse(text: &str) -> Incoming {
    let value: Value = match strict_json::parse(text.as_bytes()) {
        Ok(v) => v,
        Err(StrictError::Duplicate(d)) => return duplicate_member(text, d),
        Err(StrictError::Syntax(e)) => {
            return Incoming::Invalid {
                id: None,
                error: RpcError::new(ErrorKind::ParseError, format!("Parse error: {e}")),
            }
        }
    };
    let mut obj = match value {
        Value::Object(obj) => obj,
        Value::Array(_) => {
            return Incoming::Invalid {
                id: None,
                error: RpcError::invalid_request(
                    "batch requests are not supported; send one JSON-RPC object per frame",
                ),
            }
        }
        _ => {
            return Incoming::Invalid {
                id: None,
                error: RpcError::invalid_request("a frame must be a JSON object"),
            }
        }
    };

    let is_response =
        !obj.contains_key("method") && (obj.contains_key("result") || obj.contains_key("error"));
    if is_response {
        return parse_response(obj);
    }

    let id = match obj.remove("id") {
        None => None,
        Some(Value::String(s)) => Some(Id::Str(s)),
        // Only integers survive a JSON round trip unchanged (1e2 would come
        // back as 100.0), so only integers can be echoed as received.
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Some(Id::Number(n)),
        Some(other) => {
            return Incoming::Invalid {
                id: None,
                error: RpcError::invalid_request(id_problem(&other)),
            }
        }
    };
    let invalid = |id: Option<Id>, msg: String| Incoming::Invalid {
        id,
        error: RpcError::invalid_request(msg),
    };
    if obj.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return invalid(id, "jsonrpc must be \"2.0\"".into());
    }
    if let Some(unknown) = obj.keys().find(|k| !REQUEST_MEMBERS.contains(&k.as_str())) {
        return invalid(id, format!("unknown member `{unknown}` in request frame"));
    }
    let method = match obj.remove("method") {
        Some(Value::String(m)) if !m.is_empty() => m,
        Some(_) => return invalid(id, "method must be a non-empty string".into()),
        None => return invalid(id, "method is required".into()),
    };
    let params = obj.remove("params");
    match id {
        Some(id) => Incoming::Request { id, method, params },
        None => Incoming::Notification { method, params },
    }
}

/// A frame that repeats a member is refused whole (-32600, `data.pointer`).
/// It is read again leniently, on this error path only, to address the
/// answer: the id is echoed unless it is the repeated member, and a response
/// ends its pending call as a bad result instead of being answered.
fn duplicate_member(text: &str, duplicate: DuplicateKey) -> Incoming {
    // The strict parse stops at the first duplicate: text that breaks off
    // after it is not JSON at all.
    let lenient = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(obj)) => obj,
        Ok(_) => Map::new(),
        Err(e) => {
            return Incoming::Invalid {
                id: None,
                error: RpcError::new(ErrorKind::ParseError, format!("Parse error: {e}")),
            }
        }
    };
    let id = match lenient.get("id") {
        // Which of two ids is meant cannot be known: echo neither.
        _ if top_level_count(text, "id") != 1 => None,
        Some(Value::String(s)) => Some(Id::Str(s.clone())),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Some(Id::Number(n.clone())),
        _ => None,
    };
    let is_response = !lenient.contains_key("method")
        && (lenient.contains_key("result") || lenient.contains_key("error"));
    if is_response {
        return Incoming::MalformedResponse {
            id,
            reason: duplicate.to_string(),
        };
    }
    Incoming::Invalid {
        id,
        error: RpcError::invalid_request(format_args!(
            "{duplicate}: a member name must appear once per object"
        ))
        .with_data(json!({ "pointer": duplicate.pointer })),
    }
}

/// How often `member` is named at the top level of a JSON object text (0
/// when the text is not an object).
fn top_level_count(text: &str, member: &str) -> usize {
    struct Count<'m>(&'m str);
    impl<'de> serde::de::Visitor<'de> for Count<'_> {
        type Value = usize;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<usize, A::Error> {
            let mut n = 0;
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                n += usize::from(key == self.0);
                map.next_value::<serde::de::IgnoredAny>()?;
            }
            Ok(n)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    serde::Deserializer::deserialize_map(&mut de, Count(member)).unwrap_or(0)
}

/// Why an id cannot be echoed. An integer beyond 64 bits arrives as a float
/// (serde_json has no bigger integer), so it is told apart by having no
/// fraction while lying outside both 64-bit ranges (`u64::MAX as f64` is
/// 2^64 and `i64::MIN as f64` is -2^63, both exact; an integer written as
/// -2^63 - 1 rounds to -2^63 and, unlike -2^63 itself, arrives as a float).
/// `-0` arrives as a float too, and is named as such.
fn id_problem(id: &Value) -> &'static str {
    match id.as_f64() {
        Some(f) if f.fract() == 0.0 && (f >= u64::MAX as f64 || f <= i64::MIN as f64) => {
            "id is beyond 64 bits: ids are limited to 64-bit integers or strings"
        }
        // serde_json reads `-0` as the float -0.0: it has no fraction, so
        // "no fraction" would not say what is wrong with it.
        Some(f) if f == 0.0 && f.is_sign_negative() => {
            "id -0 cannot be echoed as written; send 0 or a string"
        }
        Some(_) => "id must be a string or an integer (no fraction or exponent)",
        None => "id must be a string or an integer",
    }
}

fn parse_response(mut obj: Map<String, Value>) -> Incoming {
    let id = match obj.remove("id") {
        Some(Value::String(s)) => Some(Id::Str(s)),
        Some(Value::Number(n)) => Some(Id::Number(n)),
        _ => None,
    };
    let malformed = |id: Option<Id>, reason: &str| Incoming::MalformedResponse {
        id,
        reason: reason.to_string(),
    };
    if obj.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return malformed(id, "jsonrpc must be \"2.0\"");
    }
    if obj.keys().any(|k| !RESPONSE_MEMBERS.contains(&k.as_str())) {
        return malformed(id, "unknown member in response frame");
    }
    let Some(id) = id else {
        return malformed(None, "response without a string or number id");
    };
    match (obj.remove("result"), obj.remove("error")) {
        (Some(result), None) => Incoming::Response {
            id,
            outcome: Ok(result),
        },
        (None, Some(error)) => match serde_json::from_value::<RpcError>(error) {
            Ok(err) => Incoming::Response {
                id,
                outcome: Err(err),
            },
            Err(_) => malformed(Some(id), "error member is not a JSON-RPC error object"),
        },
        _ => malformed(
            Some(id),
            "a response carries exactly one of result and error",
        ),
    }
}

#[derive(Serialize)]
struct RequestOut<'a, P: Serialize> {
    jsonrpc: &'static str,
    id: &'a Id,
    method: &'a str,
    params: &'a P,
}

#[derive(Serialize)]
struct NotificationOut<'a, P: Serialize> {
    jsonrpc: &'static str,
    method: &'a str,
    params: &'a P,
}

#[derive(Serialize)]
struct ResultOut<'a, R: Serialize> {
    jsonrpc: &'static str,
    id: &'a Id,
    result: &'a R,
}

#[derive(Serialize)]
struct ErrorOut<'a> {
    jsonrpc: &'static str,
    id: Option<&'a Id>,
    error: &'a RpcError,
}

pub fn request<P: Serialize>(id: &Id, method: &str, params: &P) -> String {
    serde_json::to_string(&RequestOut {
        jsonrpc: "2.0",
        id,
        method,
        params,
    })
    .expect("request params serialize")
}

pub fn notification<P: Serialize>(method: &str, params: &P) -> String {
    serde_json::to_string(&NotificationOut {
        jsonrpc: "2.0",
        method,
        params,
    })
    .expect("notification params serialize")
}

pub fn result<R: Serialize>(id: &Id, result: &R) -> String {
    serde_json::to_string(&ResultOut {
        jsonrpc: "2.0",
        id,
        result,
    })
    .expect("result serializes")
}

/// An error response. `id` is `null` on the wire when the request's id could
/// not be read, as JSON-RPC requires.
pub fn error(id: Option<&Id>, error: &RpcError) -> String {
    serde_json::to_string(&ErrorOut {
        jsonrpc: "2.0",
        id,
        error,
    })
    .expect("error serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid_code(text: &str) -> i32 {
        match parse(text) {
            Incoming::Invalid { error, .. } => error.code,
            other => panic!("expected invalid, got {other:?}"),
        }
    }

    #[test]
    fn classifies_frames() {
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","id":7,"method":"a/b","params":{}}"#),
            Incoming::Request { .. }
        ));
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","method":"a/b"}"#),
            Incoming::Notification { .. }
        ));
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","id":"hub-1","result":{}}"#),
            Incoming::Response { outcome: Ok(_), .. }
        ));
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","id":"hub-1","error":{"code":1,"message":"x"}}"#),
            Incoming::Response {
                outcome: Err(_),
                ..
            }
        ));
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","id":"hub-1","result":{},"error":{"code":1,"message":"x"}}"#),
            Incoming::MalformedResponse { .. }
        ));
    }

    #[test]
    fn refuses_bad_frames_with_the_right_code() {
        assert_eq!(invalid_code("{nope"), -32700);
        assert_eq!(invalid_code("[]"), -32600);
        assert_eq!(
            invalid_code(r#"[{"jsonrpc":"2.0","id":1,"method":"x"}]"#),
            -32600
        );
        assert_eq!(invalid_code("42"), -32600);
        assert_eq!(invalid_code(r#"{"id":1,"method":"x"}"#), -32600);
        assert_eq!(
            invalid_code(r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#),
            -32600
        );
        assert_eq!(
            invalid_code(r#"{"jsonrpc":"2.0","id":1,"method":"x","type":"req"}"#),
            -32600
        );
        assert_eq!(
            invalid_code(r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#),
            -32600
        );
        assert_eq!(
            invalid_code(r#"{"jsonrpc":"2.0","id":1,"method":3}"#),
            -32600
        );
    }

    #[test]
    fn repeated_members_refuse_the_frame_with_their_pointer() {
        let Incoming::Invalid { id, error } =
            parse(r#"{"jsonrpc":"2.0","id":9,"method":"x","params":{"a":{"b":1,"b":2}}}"#)
        else {
            panic!()
        };
        assert_eq!(id, Some(Id::Number(9.into())));
        assert_eq!(error.code, -32600);
        assert_eq!(
            error.message,
            "Invalid request: duplicate key at /params/a/b: a member name must appear once per object"
        );
        assert_eq!(
            error.data.as_deref(),
            Some(&json!({"pointer": "/params/a/b"}))
        );
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}"#),
            Incoming::Invalid { id: None, .. }
        ));
        // A repeated id behind an earlier duplicate is not echoed either.
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","id":1,"params":{"a":1,"a":2},"id":2,"method":"x"}"#),
            Incoming::Invalid { id: None, .. }
        ));
        // Text that breaks off after the duplicate is not JSON: -32700.
        let Incoming::Invalid { id, error } = parse(r#"{"id":1,"a":1,"a":2"#) else {
            panic!()
        };
        assert_eq!((id, error.code), (None, -32700));
        match parse(r#"{"jsonrpc":"2.0","id":"hub-3","result":{"n":1,"n":1}}"#) {
            Incoming::MalformedResponse { id, reason } => {
                assert_eq!(id, Some(Id::Str("hub-3".into())));
                assert!(reason.contains("/result/n"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn ids_echo_exactly() {
        let Incoming::Request { id, .. } = parse(r#"{"jsonrpc":"2.0","id":-15,"method":"x"}"#)
        else {
            panic!()
        };
        let out = result(&id, &serde_json::json!({}));
        assert!(out.contains(r#""id":-15"#), "{out}");
        let Incoming::Request { id, .. } =
            parse(r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"x"}"#)
        else {
            panic!()
        };
        assert!(result(&id, &1).contains("18446744073709551615"));
        for bad in ["1.5", "1e2", "-0.0", "12345678901234567890123"] {
            let text = format!(r#"{{"jsonrpc":"2.0","id":{bad},"method":"x"}}"#);
            assert!(
                matches!(parse(&text), Incoming::Invalid { id: None, .. }),
                "{bad}"
            );
        }
        let Incoming::Request { id, .. } = parse(r#"{"jsonrpc":"2.0","id":"abc","method":"x"}"#)
        else {
            panic!()
        };
        assert!(error(Some(&id), &RpcError::internal()).contains(r#""id":"abc""#));
        for (huge, says) in [
            ("1e30", "64-bit integers or strings"),
            (
                "123456789012345678901234567890",
                "64-bit integers or strings",
            ),
            ("18446744073709551616", "64-bit integers or strings"),
            ("-9223372036854775809", "64-bit integers or strings"),
            ("1e2", "no fraction or exponent"),
            ("2.5", "no fraction or exponent"),
            ("true", "a string or an integer"),
        ] {
            let text = format!(r#"{{"jsonrpc":"2.0","id":{huge},"method":"x"}}"#);
            match parse(&text) {
                Incoming::Invalid { id: None, error } => {
                    assert!(error.message.contains(says), "{huge}: {}", error.message)
                }
                other => panic!("{huge}: {other:?}"),
            }
        }
        assert!(error(None, &RpcError::internal()).contains(r#""id":null"#));
    }
}
