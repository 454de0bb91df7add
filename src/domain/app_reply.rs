//! What an app answers at its `interactionsUrl` (ADR 0032 §4): the closed
//! list of reasons a request did not give a usable answer, the table from
//! status to outcome, and the strict decoders of the answers' bodies.
//! Pure: the requests themselves are `app_url`'s.

use serde::de::DeserializeOwned;
use serde::Deserialize;

use super::command::Choice;
use super::event::contains_null;
use super::message::Part;
use super::strict_json;

/// Why a request to an app's URL gave no usable answer. Closed: these are
/// the only values of logs' `reason`, metrics' `reason` and an
/// interaction's `reason` set by a delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// No answer within `app.interaction_timeout_ms`.
    Timeout,
    /// The connection or the exchange failed.
    Transport,
    /// The URL or its addresses are refused by the egress rules.
    Blocked,
    /// A 3xx, never followed.
    Redirect,
    /// Any status but 200 and 202 (other 2xx included).
    HttpStatus,
    /// The answer is longer than its cap.
    TooLarge,
    /// A 200 whose body does not decode strictly, or a reply its path
    /// refuses as invalid.
    InvalidReply,
    /// The app is not active, or the delivery's event is no longer held.
    Inactive,
    /// The actor's rights of this moment, or the app's, refuse it.
    Denied,
    /// The URL is not verified: nothing is sent to it.
    UrlUnverified,
    /// Verification: the ping's answer did not echo its nonce.
    NonceMismatch,
    /// Verification: a request with a bad signature got no 401.
    SignatureNotChecked,
    /// The hub has no signing key: it cannot sign a request.
    NoSigningKey,
    /// The delivery's request was sent, and what it gave could not be
    /// recorded (the store failed after it, or the hub crashed during its
    /// repeat): the request is not sent again (ADR 0032 §3, "One
    /// attempt").
    Unrecorded,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Timeout => "timeout",
            Reason::Transport => "transport",
            Reason::Blocked => "blocked",
            Reason::Redirect => "redirect",
            Reason::HttpStatus => "http_status",
            Reason::TooLarge => "too_large",
            Reason::InvalidReply => "invalid_reply",
            Reason::Inactive => "inactive",
            Reason::Denied => "denied",
            Reason::UrlUnverified => "url_unverified",
            Reason::NonceMismatch => "nonce_mismatch",
            Reason::SignatureNotChecked => "signature_not_checked",
            Reason::NoSigningKey => "no_signing_key",
            Reason::Unrecorded => "unrecorded",
        }
    }
}

/// What a status means before its body is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByStatus {
    /// 200: the body is the answer.
    Decode,
    /// 202: the app answers later through the API.
    Deferred,
    Failed(Reason),
}

pub fn by_status(status: u16) -> ByStatus {
    match status {
        200 => ByStatus::Decode,
        202 => ByStatus::Deferred,
        300..=399 => ByStatus::Failed(Reason::Redirect),
        _ => ByStatus::Failed(Reason::HttpStatus),
    }
}

/// A 200's reply to a command or an interaction: a message the hub writes
/// as the app.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AppReply {
    /// 1 to 128 characters, no control characters: a rerun of the job
    /// writes no second message.
    pub client_msg_id: String,
    pub parts: Vec<Part>,
}

/// The verification ping's answer.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NonceEcho {
    pub nonce: String,
}

/// A 200's answer to an autocomplete request.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChoicesAnswer {
    pub choices: Vec<Choice>,
}

/// Longest `clientMsgId`, as a send's.
pub const CLIENT_MSG_ID_MAX: usize = 128;

/// `body` as `T`, strictly: one JSON document, no duplicate member, no
/// `null` anywhere, no unknown member. Any failure is `invalid_reply`;
/// what failed is not reported (the body may hold anything).
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, Reason> {
    let value = strict_json::parse(body).map_err(|_| Reason::InvalidReply)?;
    if contains_null(&value) {
        return Err(Reason::InvalidReply);
    }
    serde_json::from_value(value).map_err(|_| Reason::InvalidReply)
}

/// A reply, its `clientMsgId` bounded as a send's.
pub fn decode_reply(body: &[u8]) -> Result<AppReply, Reason> {
    let reply: AppReply = decode(body)?;
    let id = &reply.client_msg_id;
    let count = id.chars().count();
    if count == 0 || count > CLIENT_MSG_ID_MAX || id.chars().any(char::is_control) {
        return Err(Reason::InvalidReply);
    }
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_to_outcome() {
        assert_eq!(by_status(200), ByStatus::Decode);
        assert_eq!(by_status(202), ByStatus::Deferred);
        for redirect in [301, 302, 303, 307, 308] {
            assert_eq!(by_status(redirect), ByStatus::Failed(Reason::Redirect));
        }
        for other in [201, 204, 400, 401, 404, 500, 503] {
            assert_eq!(by_status(other), ByStatus::Failed(Reason::HttpStatus));
        }
    }

    #[test]
    fn a_reply_is_decoded_strictly() {
        let ok = br#"{"clientMsgId":"r-1","parts":[{"type":"text","text":"filed"}]}"#;
        let reply = decode_reply(ok).unwrap();
        assert_eq!(reply.client_msg_id, "r-1");
        assert_eq!(reply.parts.len(), 1);
        let refused: [&[u8]; 8] = [
            br#"{"clientMsgId":"r-1","parts":[{"type":"text","text":"a"}],"extra":1}"#,
            br#"{"clientMsgId":"r-1","clientMsgId":"r-2","parts":[{"type":"text","text":"a"}]}"#,
            br#"{"clientMsgId":"r-1","parts":[{"type":"text","text":"a"}],"x":null}"#,
            br#"{"parts":[{"type":"text","text":"a"}]}"#,
            br#"{"clientMsgId":"","parts":[{"type":"text","text":"a"}]}"#,
            br#"{"clientMsgId":"a\u0007","parts":[{"type":"text","text":"a"}]}"#,
            b"not json",
            b"null",
        ];
        for body in refused {
            assert_eq!(
                decode_reply(body),
                Err(Reason::InvalidReply),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        let long = format!(
            r#"{{"clientMsgId":"{}","parts":[{{"type":"text","text":"a"}}]}}"#,
            "x".repeat(CLIENT_MSG_ID_MAX + 1)
        );
        assert_eq!(decode_reply(long.as_bytes()), Err(Reason::InvalidReply));
    }

    #[test]
    fn echoes_and_choices_are_decoded_strictly() {
        assert_eq!(
            decode::<NonceEcho>(br#"{"nonce":"ab"}"#),
            Ok(NonceEcho { nonce: "ab".into() })
        );
        assert!(decode::<NonceEcho>(br#"{"nonce":"ab","ok":true}"#).is_err());
        assert!(decode::<NonceEcho>(br#"{"nonce":"ab","nonce":"ab"}"#).is_err());
        let choices = decode::<ChoicesAnswer>(br#"{"choices":[{"name":"A","value":"a"}]}"#);
        assert_eq!(choices.unwrap().choices.len(), 1);
        assert!(decode::<ChoicesAnswer>(br#"{"choices":[{"name":"A","value":null}]}"#).is_err());
        assert!(decode::<ChoicesAnswer>(br#"{"choices":[],"deferred":true}"#).is_err());
    }
}
