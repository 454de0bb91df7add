//! Places and levels end to end (ADR 0020 §2, §6): the world
//! (`support::world`) over a real `serve`, its REST routes and sockets.

mod audit;
mod channel_states;
mod cli;
mod effective_levels;
mod hidden_equals_missing;
mod removals;
mod rest_inputs;
mod threads;

use serde_json::{json, Value};
use uuid::Uuid;

use crate::support::world::{method_for, text, Member};
use crate::support::RawSocket;

/// `who`'s `*/message/send` into `conversation`: the whole answer frame.
pub(super) async fn send_as(
    s: &mut RawSocket,
    who: &Member,
    conversation: Uuid,
    body: &str,
    more: Value,
) -> Value {
    let mut params = json!({ "conversationId": conversation, "parts": text(body) });
    if let (Value::Object(p), Value::Object(m)) = (&mut params, more) {
        p.extend(m);
    }
    s.call(json!("send"), &method_for(who, "message/send"), params)
        .await
}

/// `*/message/list` of `who`: the whole answer frame.
pub(super) async fn list_as(s: &mut RawSocket, who: &Member, params: Value) -> Value {
    s.call(json!("list"), &method_for(who, "message/list"), params)
        .await
}

/// The refusal's `data.reason`, asserting the frame is an error of `tag`.
pub(super) fn refused(frame: &Value, tag: &str) -> String {
    assert_eq!(frame["error"]["_tag"], json!(tag), "{frame}");
    frame["error"]["data"]["reason"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

pub(super) fn ok(frame: &Value) -> &Value {
    assert!(frame.get("result").is_some(), "{frame}");
    &frame["result"]
}
