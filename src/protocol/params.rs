//! Decoding params so that an error names the field at fault:
//! `Invalid params: conversationId is required`.

use serde::de::{DeserializeOwned, Deserializer, Error as _};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::rpc::RpcError;

/// The largest seq or cursor a client may send. The log stores sequence
/// numbers as signed 64-bit integers; a larger u64 would wrap to a negative
/// number when bound (u64::MAX becomes -1, "from the start").
pub const MAX_CURSOR: u64 = i64::MAX as u64;

/// The default of `messages.page_max`, the largest `limit` of a page; the
/// exported schemas carry it.
pub const DEFAULT_PAGE_MAX: u32 = 200;

/// `deserialize_with` for a seq or cursor: refuses values above
/// [`MAX_CURSOR`] while decoding, so the error names the field.
pub fn cursor<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let value = u64::deserialize(d)?;
    if value > MAX_CURSOR {
        return Err(D::Error::custom(format!(
            "must be at most {MAX_CURSOR} (seq values are signed 64-bit integers)"
        )));
    }
    Ok(value)
}

/// [`cursor`] for an optional member (use with `#[serde(default)]`):
/// `null` means absent, as the schema says.
pub fn optional_cursor<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match Option::<u64>::deserialize(d)? {
        Some(value) if value > MAX_CURSOR => Err(D::Error::custom(format!(
            "must be at most {MAX_CURSOR} (seq values are signed 64-bit integers)"
        ))),
        other => Ok(other),
    }
}

pub fn decode<T: DeserializeOwned>(params: Option<Value>) -> Result<T, RpcError> {
    let value = match params {
        None => Value::Object(Default::default()),
        Some(v @ Value::Object(_)) => v,
        Some(_) => {
            return Err(
                RpcError::invalid_params("params must be an object (by-name params)")
                    .with_data(json!({ "field": "params" })),
            )
        }
    };
    serde_path_to_error::deserialize::<_, T>(value).map_err(describe)
}

fn describe(err: serde_path_to_error::Error<serde_json::Error>) -> RpcError {
    let path = err.path().to_string();
    let parent = if path == "." { String::new() } else { path };
    let inner = err.inner().to_string();
    let join = |field: &str| {
        if parent.is_empty() {
            field.to_string()
        } else {
            format!("{parent}.{field}")
        }
    };
    let (field, detail) = if let Some(field) = backticked(&inner, "missing field `") {
        let f = join(field);
        (f.clone(), format!("{f} is required"))
    } else if let Some(field) = backticked(&inner, "unknown field `") {
        // A derived struct fails while reading the key, so the path already
        // ends with it; a hand-written visitor (message parts) fails after
        // reading the whole object, at the object's own path.
        let f = if ends_with_member(&parent, field) {
            parent.clone()
        } else {
            join(field)
        };
        (f.clone(), format!("{f} is not a known member"))
    } else if let Some(field) = backticked(&inner, "duplicate field `") {
        let f = join(field);
        (f.clone(), format!("{f} appears more than once"))
    } else if parent.is_empty() {
        ("params".to_string(), strip_position(&inner))
    } else {
        (
            parent.clone(),
            format!("{parent}: {}", strip_position(&inner)),
        )
    };
    RpcError::invalid_params(detail).with_data(json!({ "field": field }))
}

fn ends_with_member(path: &str, member: &str) -> bool {
    path == member || path.ends_with(&format!(".{member}"))
}

fn backticked<'a>(message: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = message.strip_prefix(prefix)?;
    rest.split('`').next()
}

/// serde_json appends " at line 1 column 7" to some messages; on a decoded
/// value that position means nothing to the caller.
fn strip_position(message: &str) -> String {
    match message.find(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, Debug)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[allow(dead_code)]
    struct P {
        conversation_id: String,
        inner: Option<Inner>,
    }
    #[derive(Deserialize, Debug)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        count: u32,
    }

    fn msg(v: Value) -> String {
        decode::<P>(Some(v)).unwrap_err().message
    }

    #[derive(Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Cursors {
        #[serde(deserialize_with = "cursor")]
        seq: u64,
        #[serde(default, deserialize_with = "optional_cursor")]
        after: Option<u64>,
    }

    #[test]
    fn cursors_stop_at_i64_max_naming_the_field() {
        let decode_cursors = |v: Value| decode::<Cursors>(Some(v));
        assert!(decode_cursors(json!({"seq": i64::MAX, "after": i64::MAX})).is_ok());
        assert!(decode_cursors(json!({"seq": 0})).unwrap().after.is_none());
        // `null` means absent, as the schema's `["integer", "null"]` says.
        assert!(decode_cursors(json!({"seq": 0, "after": null}))
            .unwrap()
            .after
            .is_none());
        for (v, field) in [
            (json!({"seq": u64::MAX}), "seq"),
            (json!({"seq": 1, "after": (i64::MAX as u64) + 1}), "after"),
        ] {
            let e = decode_cursors(v).unwrap_err();
            assert_eq!(e.data.as_deref().unwrap()["field"], json!(field));
            assert_eq!(
                e.message,
                format!("Invalid params: {field}: must be at most 9223372036854775807 (seq values are signed 64-bit integers)")
            );
        }
    }

    #[test]
    fn messages_name_the_field() {
        assert_eq!(msg(json!({})), "Invalid params: conversationId is required");
        assert_eq!(
            msg(json!({"conversationId": "c", "extra": 1})),
            "Invalid params: extra is not a known member"
        );
        assert_eq!(
            msg(json!({"conversationId": 5})),
            "Invalid params: conversationId: invalid type: integer `5`, expected a string"
        );
        assert_eq!(
            msg(json!({"conversationId": "c", "inner": {}})),
            "Invalid params: inner.count is required"
        );
        assert_eq!(
            msg(json!({"conversationId": "c", "inner": {"count": 1, "x": 2}})),
            "Invalid params: inner.x is not a known member"
        );
        assert_eq!(
            msg(json!({"conversationId": "c", "inner": {"count": "many"}})),
            "Invalid params: inner.count: invalid type: string \"many\", expected u32"
        );
        assert_eq!(
            decode::<P>(Some(json!([1]))).unwrap_err().message,
            "Invalid params: params must be an object (by-name params)"
        );
        assert_eq!(
            decode::<P>(None).unwrap_err().message,
            "Invalid params: conversationId is required"
        );
    }
}
