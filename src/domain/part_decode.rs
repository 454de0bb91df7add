//! Decoding a message part member by member, so that every error carries
//! the path of the member at fault (`parts[0].text`, `parts[0].extra`).
//!
//! A derived internally tagged enum buffers the whole part before it knows
//! the variant, and errors from that buffer lose the member's name. Here the
//! visitor reads each member straight from the input, so path tracking (see
//! `protocol::params`) sees every key.

use serde::de::{Deserializer, Error, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use super::message::Part;

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum Member {
    Type,
    Text,
    Data,
    MimeType,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "camelCase")]
enum Kind {
    Text,
    Data,
}

const TEXT_MEMBERS: &[&str] = &["type", "text"];
const DATA_MEMBERS: &[&str] = &["type", "data", "mimeType"];

#[derive(Default)]
struct Members {
    kind: Option<Kind>,
    text: Option<String>,
    data: Option<Value>,
    /// `Some(None)`: the member was there, as `null`.
    mime_type: Option<Option<String>>,
}

impl<'de> Deserialize<'de> for Part {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Part, D::Error> {
        d.deserialize_map(PartVisitor)
    }
}

struct PartVisitor;

impl<'de> Visitor<'de> for PartVisitor {
    type Value = Part;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a message part object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Part, A::Error> {
        let mut m = Members::default();
        while let Some(key) = map.next_key::<Member>()? {
            match key {
                Member::Type => set(&mut m.kind, map.next_value()?, "type")?,
                Member::Text => set(&mut m.text, map.next_value()?, "text")?,
                Member::Data => set(&mut m.data, map.next_value()?, "data")?,
                // On a data part `null` means absent, as for every optional
                // member; a text part has no mimeType at all, not even null.
                Member::MimeType => set(&mut m.mime_type, map.next_value()?, "mimeType")?,
            }
        }
        assemble(m)
    }
}

fn set<T, E: Error>(slot: &mut Option<T>, value: T, name: &'static str) -> Result<(), E> {
    if slot.replace(value).is_some() {
        return Err(E::duplicate_field(name));
    }
    Ok(())
}

/// The variant from its members: each kind refuses the other's members.
fn assemble<E: Error>(m: Members) -> Result<Part, E> {
    match m.kind.ok_or_else(|| E::missing_field("type"))? {
        Kind::Text => {
            if m.data.is_some() {
                return Err(E::unknown_field("data", TEXT_MEMBERS));
            }
            if m.mime_type.is_some() {
                return Err(E::unknown_field("mimeType", TEXT_MEMBERS));
            }
            Ok(Part::Text {
                text: m.text.ok_or_else(|| E::missing_field("text"))?,
            })
        }
        Kind::Data => {
            if m.text.is_some() {
                return Err(E::unknown_field("text", DATA_MEMBERS));
            }
            Ok(Part::Data {
                data: m.data.ok_or_else(|| E::missing_field("data"))?,
                mime_type: m.mime_type.flatten(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decode(v: Value) -> Result<Part, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn parts_decode_as_the_derived_shape_did() {
        for part in [
            Part::Text { text: "hi".into() },
            Part::Data {
                data: json!({"a": [1, 2]}),
                mime_type: Some("application/json".into()),
            },
            Part::Data {
                data: json!(3),
                mime_type: None,
            },
        ] {
            let wire = serde_json::to_value(&part).unwrap();
            assert_eq!(decode(wire).unwrap(), part);
        }
        assert_eq!(
            decode(json!({"type": "data", "data": 1, "mimeType": null})).unwrap(),
            Part::Data {
                data: json!(1),
                mime_type: None
            }
        );
        assert_eq!(
            decode(json!({"text": "later", "type": "text"})).unwrap(),
            Part::Text {
                text: "later".into()
            }
        );
    }

    #[test]
    fn each_kind_refuses_the_others_members() {
        let cases = [
            (
                json!({"type": "text", "text": "a", "data": 1}),
                "unknown field `data`",
            ),
            (
                json!({"type": "text", "text": "a", "mimeType": "x"}),
                "unknown field `mimeType`",
            ),
            (
                json!({"type": "text", "text": "a", "mimeType": null}),
                "unknown field `mimeType`",
            ),
            (
                json!({"type": "data", "data": 1, "text": "a"}),
                "unknown field `text`",
            ),
            (
                json!({"type": "text", "text": "a", "x": 1}),
                "unknown field `x`",
            ),
            (json!({"type": "text"}), "missing field `text`"),
            (json!({"type": "data"}), "missing field `data`"),
            (json!({"text": "a"}), "missing field `type`"),
            (json!({"type": "image"}), "unknown variant `image`"),
            (json!("text"), "expected a message part object"),
        ];
        for (value, says) in cases {
            let err = decode(value.clone()).unwrap_err();
            assert!(err.contains(says), "{value}: {err}");
        }
    }
}
