//! The gateway's rules for what a peer sends, as pure functions the reader
//! applies: how large a frame or an id may be, which transport errors are
//! the peer's fault, which key a connect presents, and how a panicking
//! handler is still answered.

use axum::extract::ws::Message;
use serde_json::Value;
use tracing::error;
use uuid::Uuid;

use crate::rpc::{close_code, RpcError};
use crate::telemetry::names;

/// The longest string request id, in bytes: ids are copied into the
/// socket's in-flight set and echoed in the answer, so they stay small.
pub const MAX_ID_BYTES: usize = 256;

/// Runs a handler's future; if it panics, the caller is still answered
/// (-32603 Internal error) instead of waiting forever for an id whose
/// slot was freed. Counted and logged by method, never with params.
pub(super) async fn answer_even_if_it_panics(
    name: &'static str,
    connection: Uuid,
    future: impl std::future::Future<Output = Result<Value, RpcError>>,
) -> Result<Value, RpcError> {
    use futures_util::FutureExt;
    match std::panic::AssertUnwindSafe(future).catch_unwind().await {
        Ok(result) => result,
        Err(_) => {
            metrics::counter!(names::RPC_PANICS, "method" => name).increment(1);
            error!(%connection, method = name, "RPC handler panicked; answered Internal error");
            Err(RpcError::internal())
        }
    }
}

/// A read error the peer caused by breaking the transport's rules: the
/// socket cannot be read further, but the close frame can still say why
/// (code, reason, metric label). `None` for a socket that just ended.
pub(super) fn transport_violation(e: axum::Error) -> Option<(u16, &'static str, &'static str)> {
    use tokio_tungstenite::tungstenite::error::ProtocolError;
    use tokio_tungstenite::tungstenite::Error;
    match e.into_inner().downcast_ref::<Error>()? {
        Error::Capacity(_) => Some((
            close_code::MESSAGE_TOO_BIG,
            "frame exceeds gateway.transport_max_frame_bytes",
            "transport_too_large",
        )),
        Error::Utf8(_) => Some((
            close_code::INVALID_PAYLOAD,
            "text frame is not valid UTF-8",
            "invalid_utf8",
        )),
        Error::Protocol(
            ProtocolError::ResetWithoutClosingHandshake | ProtocolError::ReceivedAfterClosing,
        ) => None,
        Error::Protocol(_) => Some((
            close_code::PROTOCOL_ERROR,
            "WebSocket protocol violation",
            "protocol_violation",
        )),
        _ => None,
    }
}

/// A data frame's payload size (control frames count as empty).
pub(super) fn frame_len(msg: &Message) -> usize {
    match msg {
        Message::Text(t) => t.len(),
        Message::Binary(b) => b.len(),
        _ => 0,
    }
}

/// The key id of the key a connect presents, if it has one: known key ids
/// are still looked up while the address's budget is spent.
pub(super) fn presented_key_id(params: Option<&Value>) -> Option<String> {
    let params = params?;
    let key = params
        .get("agentKey")
        .or_else(|| params.get("appKey"))
        .or_else(|| params.get("personKey"))?
        .as_str()?;
    crate::domain::keys::parse(key).map(|k| k.key_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::ErrorKind;
    use serde_json::json;
    #[tokio::test]
    async fn a_panicking_handler_is_answered_with_internal_error() {
        let panicking = async {
            if Uuid::nil().is_nil() {
                panic!("handler bug");
            }
            Ok(Value::Null)
        };
        let answer = answer_even_if_it_panics("test/panics", Uuid::nil(), panicking).await;
        let error = answer.unwrap_err();
        assert_eq!(error.code, ErrorKind::Internal.code());
        assert_eq!(error.message, "Internal error");

        let fine = async { Ok(json!({"ok": true})) };
        let answer = answer_even_if_it_panics("test/fine", Uuid::nil(), fine).await;
        assert_eq!(answer.unwrap(), json!({"ok": true}));
    }
}
