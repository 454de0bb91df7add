//! The primitive table (ADR 0031 §6): every method a card can be granted,
//! which of them this hub serves, and each served one's params, decoded
//! with `deny_unknown_fields` and checked against the hub's bounds.

use serde::Deserialize;
use serde_json::{Map, Value};
use uuid::Uuid;

/// Every method `granted_methods` can hand out (seed 003's verbs and what
/// its features expand into). There is no `rooms_create`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Primitive {
    SendMessage,
    ReadInbox,
    WaitForMessage,
    Whoami,
    ListConnections,
    Recall,
    Remember,
    GetPersona,
    SetPersona,
    SetProfile,
    Coord,
    InviteCreate,
    InviteAccept,
    RoomsList,
    RoomsJoin,
    RoomsMembers,
    RoomsRead,
    RoomsSend,
}

impl Primitive {
    pub const ALL: [Primitive; 18] = [
        Primitive::SendMessage,
        Primitive::ReadInbox,
        Primitive::WaitForMessage,
        Primitive::Whoami,
        Primitive::ListConnections,
        Primitive::Recall,
        Primitive::Remember,
        Primitive::GetPersona,
        Primitive::SetPersona,
        Primitive::SetProfile,
        Primitive::Coord,
        Primitive::InviteCreate,
        Primitive::InviteAccept,
        Primitive::RoomsList,
        Primitive::RoomsJoin,
        Primitive::RoomsMembers,
        Primitive::RoomsRead,
        Primitive::RoomsSend,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Primitive::SendMessage => "send_message",
            Primitive::ReadInbox => "read_inbox",
            Primitive::WaitForMessage => "wait_for_message",
            Primitive::Whoami => "whoami",
            Primitive::ListConnections => "list_connections",
            Primitive::Recall => "recall",
            Primitive::Remember => "remember",
            Primitive::GetPersona => "get_persona",
            Primitive::SetPersona => "set_persona",
            Primitive::SetProfile => "set_profile",
            Primitive::Coord => "coord",
            Primitive::InviteCreate => "invite_create",
            Primitive::InviteAccept => "invite_accept",
            Primitive::RoomsList => "rooms_list",
            Primitive::RoomsJoin => "rooms_join",
            Primitive::RoomsMembers => "rooms_members",
            Primitive::RoomsRead => "rooms_read",
            Primitive::RoomsSend => "rooms_send",
        }
    }

    pub fn parse(name: &str) -> Option<Primitive> {
        Primitive::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// The hub's bounds the params are checked against (from the config).
#[derive(Clone, Debug)]
pub struct ParamBounds {
    pub key_max_bytes: usize,
    pub value_max_bytes: usize,
    pub page_max: u32,
    pub max_wait_seconds: u64,
    pub persona_max_bytes: usize,
    pub profile_max_bytes: usize,
    pub invite_max_uses: u64,
    pub invite_max_ttl_seconds: u64,
    pub invite_default_uses: u64,
    pub invite_default_ttl_seconds: u64,
}

#[cfg(test)]
impl ParamBounds {
    pub(super) fn for_tests() -> ParamBounds {
        ParamBounds {
            key_max_bytes: 4,
            value_max_bytes: 3,
            page_max: 10,
            max_wait_seconds: 30,
            persona_max_bytes: 16,
            profile_max_bytes: 64,
            invite_max_uses: 5,
            invite_max_ttl_seconds: 60,
            invite_default_uses: 1,
            invite_default_ttl_seconds: 30,
        }
    }
}

/// A served primitive's params, decoded.
#[derive(Clone, Debug, PartialEq)]
pub enum Params {
    Whoami,
    SendMessage {
        to: Uuid,
        text: String,
    },
    ReadInbox {
        after_id: Option<u64>,
        limit: Option<u32>,
        ack: Option<u64>,
    },
    WaitForMessage {
        timeout: u64,
        after_id: Option<u64>,
        ack: Option<u64>,
    },
    Remember {
        key: String,
        value: String,
    },
    Recall {
        key: String,
    },
    Coord {
        key: String,
        expect: Option<String>,
        value: Option<String>,
    },
    ListConnections {
        after: Option<Uuid>,
        limit: Option<u32>,
    },
    RoomsList {
        after: Option<Uuid>,
        limit: Option<u32>,
    },
    RoomsMembers {
        room: Uuid,
    },
    RoomsRead {
        room: Uuid,
        after_id: Option<u64>,
        limit: Option<u32>,
    },
    RoomsSend {
        room: Uuid,
        text: String,
    },
    GetPersona,
    SetPersona {
        persona: Option<String>,
    },
    SetProfile {
        profile: super::profile::Profile,
    },
    InviteCreate {
        room: Uuid,
        max_uses: u64,
        ttl_seconds: u64,
    },
    /// `invite_accept` and `rooms_join` alike.
    InviteAccept {
        link: String,
    },
}

/// `list_connections` and `rooms_list`: a page by id.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ById {
    #[serde(default)]
    after: Option<Uuid>,
    #[serde(default)]
    limit: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Room {
    room: Uuid,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RoomsRead {
    room: Uuid,
    #[serde(default)]
    after_id: Option<u64>,
    #[serde(default)]
    limit: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RoomsSend {
    room: Uuid,
    text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoParams {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SendMessage {
    to: Uuid,
    text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadInbox {
    #[serde(default)]
    after_id: Option<u64>,
    #[serde(default)]
    limit: Option<u32>,
    /// Acknowledges the app's stream up to this seq before reading.
    #[serde(default)]
    ack: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WaitForMessage {
    timeout: u64,
    #[serde(default)]
    after_id: Option<u64>,
    #[serde(default)]
    ack: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Remember {
    key: String,
    value: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Recall {
    key: String,
}

/// `expect` and `value` are required, `null` included: a CAS whose caller
/// forgot `expect` must not silently mean "absent".
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Coord {
    key: String,
    #[serde(deserialize_with = "present")]
    expect: Option<String>,
    #[serde(deserialize_with = "present")]
    value: Option<String>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Option::<String>::deserialize(d)
}

pub(super) fn typed<T: serde::de::DeserializeOwned>(
    params: Map<String, Value>,
) -> Result<T, String> {
    serde_json::from_value(Value::Object(params)).map_err(|e| format!("params: {e}"))
}

fn limit(limit: Option<u32>, b: &ParamBounds) -> Result<Option<u32>, String> {
    match limit {
        Some(l) if l == 0 || l > b.page_max => Err(format!(
            "params.limit must be from 1 to {} (events.page_max)",
            b.page_max
        )),
        l => Ok(l),
    }
}

fn text(text: String) -> Result<String, String> {
    if text.is_empty() {
        return Err("params.text must not be empty".into());
    }
    Ok(text)
}

fn key(key: String, b: &ParamBounds) -> Result<String, String> {
    if key.is_empty() || key.len() > b.key_max_bytes {
        return Err(format!(
            "params.key must be 1 to {} bytes (hosted.memory_key_max_bytes)",
            b.key_max_bytes
        ));
    }
    Ok(key)
}

fn value(field: &str, value: String, b: &ParamBounds) -> Result<String, String> {
    if value.len() > b.value_max_bytes {
        return Err(format!(
            "params.{field} must be at most {} bytes (hosted.memory_value_max_bytes)",
            b.value_max_bytes
        ));
    }
    Ok(value)
}

/// Decodes and bounds a served primitive's params; the message names the
/// field (`bad_request`).
pub fn decode(p: Primitive, params: Map<String, Value>, b: &ParamBounds) -> Result<Params, String> {
    Ok(match p {
        Primitive::Whoami => {
            typed::<NoParams>(params)?;
            Params::Whoami
        }
        Primitive::SendMessage => {
            let s: SendMessage = typed(params)?;
            Params::SendMessage {
                to: s.to,
                text: text(s.text)?,
            }
        }
        Primitive::ReadInbox => {
            let r: ReadInbox = typed(params)?;
            Params::ReadInbox {
                after_id: r.after_id,
                limit: limit(r.limit, b)?,
                ack: r.ack,
            }
        }
        Primitive::WaitForMessage => {
            let w: WaitForMessage = typed(params)?;
            if w.timeout > b.max_wait_seconds {
                return Err(format!(
                    "params.timeout must be at most {} seconds (events.max_wait_seconds)",
                    b.max_wait_seconds
                ));
            }
            Params::WaitForMessage {
                timeout: w.timeout,
                after_id: w.after_id,
                ack: w.ack,
            }
        }
        Primitive::Remember => {
            let r: Remember = typed(params)?;
            Params::Remember {
                key: key(r.key, b)?,
                value: value("value", r.value, b)?,
            }
        }
        Primitive::Recall => {
            let r: Recall = typed(params)?;
            Params::Recall {
                key: key(r.key, b)?,
            }
        }
        Primitive::Coord => {
            let c: Coord = typed(params)?;
            Params::Coord {
                key: key(c.key, b)?,
                expect: c.expect.map(|v| value("expect", v, b)).transpose()?,
                value: c.value.map(|v| value("value", v, b)).transpose()?,
            }
        }
        Primitive::ListConnections => {
            let p: ById = typed(params)?;
            Params::ListConnections {
                after: p.after,
                limit: limit(p.limit, b)?,
            }
        }
        Primitive::RoomsList => {
            let p: ById = typed(params)?;
            Params::RoomsList {
                after: p.after,
                limit: limit(p.limit, b)?,
            }
        }
        Primitive::RoomsMembers => {
            let p: Room = typed(params)?;
            Params::RoomsMembers { room: p.room }
        }
        Primitive::RoomsRead => {
            let p: RoomsRead = typed(params)?;
            Params::RoomsRead {
                room: p.room,
                after_id: p.after_id,
                limit: limit(p.limit, b)?,
            }
        }
        Primitive::RoomsSend => {
            let p: RoomsSend = typed(params)?;
            Params::RoomsSend {
                room: p.room,
                text: text(p.text)?,
            }
        }
        Primitive::GetPersona => {
            typed::<NoParams>(params)?;
            Params::GetPersona
        }
        Primitive::SetPersona => super::profile::set_persona(typed(params)?, b)?,
        Primitive::SetProfile => super::profile::set_profile(typed(params)?, b)?,
        Primitive::InviteCreate => super::invite::create(typed(params)?, b)?,
        Primitive::InviteAccept | Primitive::RoomsJoin => super::invite::accept(typed(params)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn b() -> ParamBounds {
        ParamBounds::for_tests()
    }

    fn d(p: Primitive, v: Value) -> Result<Params, String> {
        let Value::Object(m) = v else { panic!() };
        decode(p, m, &b())
    }

    #[test]
    fn every_name_in_granted_methods_is_a_primitive() {
        let all: Vec<String> = crate::domain::card::primitives::VERBS
            .iter()
            .chain(crate::domain::card::primitives::FEATURES.iter())
            .map(|s| s.to_string())
            .collect();
        for m in crate::domain::card::primitives::granted_methods(&all) {
            assert!(Primitive::parse(m).is_some(), "{m}");
        }
        assert_eq!(Primitive::parse("rooms_create"), None);
    }

    #[test]
    fn params_are_checked_naming_the_field() {
        assert_eq!(d(Primitive::Whoami, json!({})), Ok(Params::Whoami));
        assert!(d(Primitive::Whoami, json!({"x": 1}))
            .unwrap_err()
            .contains("x"));
        assert!(d(Primitive::SendMessage, json!({"to": "nope", "text": "a"})).is_err());
        assert!(d(
            Primitive::SendMessage,
            json!({"to": Uuid::nil(), "text": ""})
        )
        .unwrap_err()
        .contains("params.text"));
        assert!(
            d(Primitive::Remember, json!({"key": "toolong", "value": "a"}))
                .unwrap_err()
                .contains("params.key")
        );
        assert!(d(Primitive::Remember, json!({"key": "k", "value": "abcd"}))
            .unwrap_err()
            .contains("params.value"));
        assert!(d(Primitive::Coord, json!({"key": "k", "value": "a"}))
            .unwrap_err()
            .contains("expect"));
        assert_eq!(
            d(
                Primitive::Coord,
                json!({"key": "k", "expect": null, "value": "a"})
            ),
            Ok(Params::Coord {
                key: "k".into(),
                expect: None,
                value: Some("a".into())
            })
        );
        assert!(d(Primitive::ReadInbox, json!({"limit": 11}))
            .unwrap_err()
            .contains("limit"));
        assert!(d(Primitive::WaitForMessage, json!({"timeout": 31}))
            .unwrap_err()
            .contains("timeout"));
    }

    #[test]
    fn the_room_primitives_params() {
        let room = Uuid::now_v7();
        assert_eq!(
            d(Primitive::RoomsList, json!({})),
            Ok(Params::RoomsList {
                after: None,
                limit: None
            })
        );
        assert!(d(Primitive::RoomsList, json!({"limit": 0}))
            .unwrap_err()
            .contains("params.limit"));
        assert!(d(Primitive::ListConnections, json!({"after": "x"})).is_err());
        assert!(d(Primitive::ListConnections, json!({"room": room})).is_err());
        assert_eq!(
            d(Primitive::RoomsMembers, json!({"room": room})),
            Ok(Params::RoomsMembers { room })
        );
        assert!(d(Primitive::RoomsMembers, json!({}))
            .unwrap_err()
            .contains("room"));
        assert_eq!(
            d(Primitive::RoomsRead, json!({"room": room, "after_id": 3})),
            Ok(Params::RoomsRead {
                room,
                after_id: Some(3),
                limit: None
            })
        );
        assert!(d(Primitive::RoomsRead, json!({"room": room, "after_id": -1})).is_err());
        assert!(d(Primitive::RoomsSend, json!({"room": room, "text": ""}))
            .unwrap_err()
            .contains("params.text"));
        assert!(d(
            Primitive::RoomsSend,
            json!({"room": room, "text": "a", "to": room})
        )
        .is_err());
    }
}
