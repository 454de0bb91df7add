//! The JSON-RPC error object as switchboard puts it on the wire.
//!
//! The standard codes come from `jsonrpsee-types` so they cannot drift from the
//! specification; the application range (-32000 to -32099, reserved by JSON-RPC
//! for implementation-defined server errors) is ours. Every error also carries a
//! `_tag` naming its kind, as the MoltZap frames do, so clients can match on a
//! stable string instead of a number.

use jsonrpsee_types::ErrorCode;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Every kind of error the hub answers with. The catalogue lists, per method,
/// which of these a caller can expect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ErrorKind {
    ParseError,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    Internal,
    Unauthorized,
    Forbidden,
    NotFound,
    Conflict,
    RateLimited,
    Timeout,
    Unavailable,
    UnsupportedVersion,
    ShuttingDown,
    ResyncRequired,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 15] = [
        ErrorKind::ParseError,
        ErrorKind::InvalidRequest,
        ErrorKind::MethodNotFound,
        ErrorKind::InvalidParams,
        ErrorKind::Internal,
        ErrorKind::Unauthorized,
        ErrorKind::Forbidden,
        ErrorKind::NotFound,
        ErrorKind::Conflict,
        ErrorKind::RateLimited,
        ErrorKind::Timeout,
        ErrorKind::Unavailable,
        ErrorKind::UnsupportedVersion,
        ErrorKind::ShuttingDown,
        ErrorKind::ResyncRequired,
    ];

    pub fn code(self) -> i32 {
        match self {
            ErrorKind::ParseError => ErrorCode::ParseError.code(),
            ErrorKind::InvalidRequest => ErrorCode::InvalidRequest.code(),
            ErrorKind::MethodNotFound => ErrorCode::MethodNotFound.code(),
            ErrorKind::InvalidParams => ErrorCode::InvalidParams.code(),
            ErrorKind::Internal => ErrorCode::InternalError.code(),
            ErrorKind::Unauthorized => -32001,
            ErrorKind::Forbidden => -32003,
            ErrorKind::NotFound => -32004,
            ErrorKind::Conflict => -32009,
            ErrorKind::RateLimited => -32029,
            ErrorKind::Timeout => -32008,
            ErrorKind::Unavailable => -32010,
            ErrorKind::UnsupportedVersion => -32011,
            ErrorKind::ShuttingDown => -32012,
            ErrorKind::ResyncRequired => -32013,
        }
    }

    /// The `_tag` on the wire.
    pub fn tag(self) -> &'static str {
        match self {
            ErrorKind::ParseError => "ParseError",
            ErrorKind::InvalidRequest => "InvalidRequestError",
            ErrorKind::MethodNotFound => "MethodNotFoundError",
            ErrorKind::InvalidParams => "InvalidParamsError",
            ErrorKind::Internal => "InternalError",
            ErrorKind::Unauthorized => "UnauthorizedError",
            ErrorKind::Forbidden => "ForbiddenError",
            ErrorKind::NotFound => "NotFoundError",
            ErrorKind::Conflict => "ConflictError",
            ErrorKind::RateLimited => "RateLimitedError",
            ErrorKind::Timeout => "TimeoutError",
            ErrorKind::Unavailable => "UnavailableError",
            ErrorKind::UnsupportedVersion => "UnsupportedVersionError",
            ErrorKind::ShuttingDown => "ShuttingDownError",
            ErrorKind::ResyncRequired => "ResyncRequiredError",
        }
    }

    pub fn from_tag(tag: &str) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.tag() == tag)
    }

    pub fn from_code(code: i32) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.code() == code)
    }

    /// What the kind means, for the protocol documentation.
    pub fn meaning(self) -> &'static str {
        match self {
            ErrorKind::ParseError => "the frame is not valid JSON",
            ErrorKind::InvalidRequest => {
                "the frame is not a valid JSON-RPC 2.0 request (also: batches, oversized frames)"
            }
            ErrorKind::MethodNotFound => "no such method in the catalogue",
            ErrorKind::InvalidParams => "params do not match the method's schema; the message names the field",
            ErrorKind::Internal => "the hub failed; the request may be retried",
            ErrorKind::Unauthorized => "the socket is not connected yet, or the key is wrong or revoked",
            ErrorKind::Forbidden => "the caller's kind or role may not call this method",
            ErrorKind::NotFound => "the resource does not exist or is hidden from the caller",
            ErrorKind::Conflict => "the request conflicts with current state",
            ErrorKind::RateLimited => "the per-principal rate or the in-flight limit is exceeded; data.retryAfterMs says when to retry",
            ErrorKind::Timeout => "a deadline passed (for example an app hook)",
            ErrorKind::Unavailable => "a peer the request needs is not connected",
            ErrorKind::UnsupportedVersion => "no protocol version in the requested range is supported",
            ErrorKind::ShuttingDown => "the hub is shutting down and accepts no new requests",
            ErrorKind::ResyncRequired => {
                "the event log cannot serve this cursor (sync epoch changed or retention passed it); data says where the log stands"
            }
        }
    }
}

/// A JSON-RPC error object: `{code, message, _tag, data?}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RpcError {
    pub code: i32,
    pub message: String,
    #[serde(rename = "_tag", default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// Boxed: errors travel in every `Result`, and most carry no data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Box<Value>>,
}

impl RpcError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        RpcError {
            code: kind.code(),
            message: message.into(),
            tag: Some(kind.tag().to_string()),
            data: None,
        }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(Box::new(data));
        self
    }

    /// The kind, when the error came from a peer that speaks our vocabulary.
    pub fn kind(&self) -> Option<ErrorKind> {
        self.tag
            .as_deref()
            .and_then(ErrorKind::from_tag)
            .or_else(|| ErrorKind::from_code(self.code))
    }

    pub fn invalid_params(detail: impl std::fmt::Display) -> Self {
        RpcError::new(
            ErrorKind::InvalidParams,
            format!("Invalid params: {detail}"),
        )
    }

    pub fn invalid_request(detail: impl std::fmt::Display) -> Self {
        RpcError::new(
            ErrorKind::InvalidRequest,
            format!("Invalid request: {detail}"),
        )
    }

    pub fn internal() -> Self {
        RpcError::new(ErrorKind::Internal, "Internal error")
    }

    pub fn unauthorized(detail: impl Into<String>) -> Self {
        RpcError::new(ErrorKind::Unauthorized, detail)
    }

    pub fn forbidden(detail: impl Into<String>) -> Self {
        RpcError::new(ErrorKind::Forbidden, detail)
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        RpcError::new(ErrorKind::NotFound, detail)
    }

    pub fn conflict(detail: impl Into<String>) -> Self {
        RpcError::new(ErrorKind::Conflict, detail)
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.tag {
            Some(tag) => write!(f, "{tag} ({}): {}", self.code, self.message),
            None => write!(f, "({}): {}", self.code, self.message),
        }
    }
}

impl std::error::Error for RpcError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_tags_are_unique() {
        let mut codes: Vec<i32> = ErrorKind::ALL.iter().map(|k| k.code()).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), ErrorKind::ALL.len());
        for kind in ErrorKind::ALL {
            assert_eq!(ErrorKind::from_tag(kind.tag()), Some(kind));
            assert_eq!(ErrorKind::from_code(kind.code()), Some(kind));
        }
    }

    #[test]
    fn standard_codes_match_the_specification() {
        assert_eq!(ErrorKind::ParseError.code(), -32700);
        assert_eq!(ErrorKind::InvalidRequest.code(), -32600);
        assert_eq!(ErrorKind::MethodNotFound.code(), -32601);
        assert_eq!(ErrorKind::InvalidParams.code(), -32602);
        assert_eq!(ErrorKind::Internal.code(), -32603);
    }
}
