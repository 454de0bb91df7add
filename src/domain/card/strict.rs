//! JSON parsing that refuses duplicate object keys (serde_json keeps the
//! last one silently, so a signed card could hide a second value).

use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::Deserializer;
use serde_json::{Map, Value};

use super::CardError;

pub fn parse(bytes: &[u8]) -> Result<Value, CardError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = StrictValue.deserialize(&mut de).map_err(|e| {
        let msg = e.to_string();
        match msg.strip_prefix("duplicate key ") {
            Some(rest) => CardError::DuplicateKey(
                rest.split(" at line")
                    .next()
                    .unwrap_or(rest)
                    .trim_matches('`')
                    .to_string(),
            ),
            None => CardError::InvalidJson(msg),
        }
    })?;
    de.end()
        .map_err(|e| CardError::InvalidJson(e.to_string()))?;
    Ok(value)
}

struct StrictValue;

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue {
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
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(StrictValue)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(serde::de::Error::custom(format!("duplicate key `{key}`")));
            }
            let v = map.next_value_seed(StrictValue)?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_refused_at_any_depth() {
        assert!(parse(br#"{"a": 1, "b": {"c": [1, {"d": 2}]}}"#).is_ok());
        assert_eq!(
            parse(br#"{"a": 1, "a": 2}"#),
            Err(CardError::DuplicateKey("a".into()))
        );
        assert_eq!(
            parse(br#"{"x": [{"k": 1, "k": 1}]}"#),
            Err(CardError::DuplicateKey("k".into()))
        );
        assert!(matches!(parse(b"{"), Err(CardError::InvalidJson(_))));
        assert!(matches!(parse(b"{} {}"), Err(CardError::InvalidJson(_))));
    }
}
