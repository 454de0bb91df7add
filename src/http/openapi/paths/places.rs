//! Spaces, channels, conversations and their messages, grants and groups
//! (`http::places`, `http::messages`, `http::grants`).

use serde_json::{json, Value};

use super::super::op::Op;
use super::super::schemas::{bounded_text, object, one_of_names, time, uuid, Components};
use crate::domain::authz::ChannelState;
use crate::domain::conversation::Conversation;
use crate::protocol::conversations::{
    ConversationGetResult, MessageListParams, MessageListResult, MessageSendParams,
    MessageSendResult,
};

const HIDDEN: &str =
    "not_found: no such place, or one the caller may not see (answered exactly alike)";
const FORBIDDEN: &str =
    "forbidden (with reason): the caller sees it without the level, or is an app whose installation is not active";

fn display_name() -> Value {
    let mut name = bounded_text(1, 80);
    name["description"] = json!(crate::domain::place_names::DISPLAY_NAME_RULE);
    name
}

/// A body whose members are all optional but one must be given.
fn at_least_one(mut schema: Value) -> Value {
    schema["minProperties"] = json!(1);
    schema
}

fn channel_name() -> Value {
    json!({"type": "string", "pattern": "^[a-z0-9-]{1,80}$"})
}

/// `*/message/send`'s params without `conversationId`, which the path gives.
fn send_body(c: &mut Components) -> Value {
    c.body_without::<MessageSendParams>("MessageSendBody", &["conversationId"])
}

/// `*/message/list`'s params but `conversationId`, as query parameters.
fn history(op: Op, c: &mut Components) -> Op {
    let params = c.inline::<MessageListParams>();
    let props = params["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    props
        .into_iter()
        .filter(|(name, _)| name != "conversationId")
        .fold(op, |op, (name, mut schema)| {
            let description = schema
                .as_object_mut()
                .and_then(|s| s.remove("description"))
                .and_then(|d| d.as_str().map(str::to_string))
                .unwrap_or_default();
            op.query(&name, not_null(schema), &description)
        })
}

/// An optional member's `["integer", "null"]` as a query parameter's type:
/// a query string has no null, only an absent parameter.
fn not_null(mut schema: Value) -> Value {
    if let Some(types) = schema["type"].as_array() {
        let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        schema["type"] = match &kept[..] {
            [one] => one.clone(),
            _ => Value::Array(kept),
        };
    }
    schema
}

fn page_limit(key: &str, max: u32) -> Value {
    json!({"type": "integer", "minimum": 1, "maximum": max, "description": format!("1 to {key} (given at its default)")})
}

pub fn ops(c: &mut Components) -> Vec<Op> {
    let mut ops = spaces(c);
    ops.extend(conversations(c));
    ops.extend(grants(c));
    ops
}

fn spaces(c: &mut Components) -> Vec<Op> {
    let page_max = crate::config::MessagesConfig::default().page_max;
    let space = c.named(
        "Space",
        object(
            &[
                ("spaceId", uuid()),
                ("name", json!({"type": "string"})),
                ("createdAt", time()),
            ],
            &[],
        ),
    );
    let conversation = c.of::<Conversation>();
    let channel = c.named(
        "ChannelAnswer",
        object(&[("channel", conversation.clone())], &[]),
    );
    let channels = object(
        &[("channels", json!({"type": "array", "items": conversation}))],
        &[("nextAfter", uuid())],
    );
    let states = one_of_names(ChannelState::ALL.map(ChannelState::as_str));
    vec![
        Op::post("/api/v1/spaces", "createSpace", "Create a space")
            .admin()
            .json_body(object(&[("name", display_name())], &[]), true)
            .answer(201, "the space", object(&[("space", space.clone())], &[]))
            .refusal(409, "conflict: the name is in use (pointer /name)"),
        Op::get(
            "/api/v1/spaces/{spaceId}",
            "getSpace",
            "Read a space (space.read)",
        )
        .key()
        .path_id("spaceId", "space")
        .answer(200, "the space", object(&[("space", space)], &[]))
        .refusal(403, FORBIDDEN)
        .refusal(404, HIDDEN),
        Op::get(
            "/api/v1/spaces/{spaceId}/channels",
            "listChannels",
            "The channels of a space the caller reads",
        )
        .key()
        .path_id("spaceId", "space")
        .query("after", uuid(), "The last channel id of the previous page.")
        .query(
            "limit",
            page_limit("messages.page_max", page_max),
            "Channels per page.",
        )
        .answer(
            200,
            "a page of channels; nextAfter when more follow",
            channels,
        )
        .refusal(400, "invalid_request: /limit out of bounds")
        .refusal(403, FORBIDDEN)
        .refusal(404, HIDDEN),
        Op::post(
            "/api/v1/spaces/{spaceId}/channels",
            "createChannel",
            "Create a channel (channel.create)",
        )
        .admin()
        .key()
        .path_id("spaceId", "space")
        .json_body(object(&[("name", channel_name())], &[]), true)
        .answer(201, "the channel, open", channel.clone())
        .refusal(403, FORBIDDEN)
        .refusal(404, HIDDEN)
        .refusal(
            409,
            "conflict: the name is in use in the space (pointer /name)",
        ),
        Op::patch(
            "/api/v1/channels/{channelId}",
            "changeChannel",
            "Rename a channel or set its state (channel.manage)",
        )
        .admin()
        .key()
        .path_id("channelId", "channel")
        .json_body(
            at_least_one(object(&[], &[("name", channel_name()), ("state", states)])),
            true,
        )
        .answer(200, "the channel", channel)
        .refusal(403, FORBIDDEN)
        .refusal(404, HIDDEN)
        .refusal(
            409,
            "conflict: the name is in use in the space (pointer /name)",
        ),
    ]
}

fn conversations(c: &mut Components) -> Vec<Op> {
    let read = c.of::<ConversationGetResult>();
    let listed = c.of::<MessageListResult>();
    let sent = c.of::<MessageSendResult>();
    let send = send_body(c);
    let history_op = Op::get(
        "/api/v1/conversations/{conversationId}/messages",
        "listMessages",
        "A page of a conversation's messages (as */message/list)",
    )
    .key()
    .path_id("conversationId", "conversation");
    vec![
        Op::get("/api/v1/conversations/{conversationId}", "getConversation", "Read a conversation (as */conversation/get)")
            .key()
            .path_id("conversationId", "conversation")
            .answer(200, "the conversation", read)
            .refusal(403, FORBIDDEN)
            .refusal(404, HIDDEN),
        history(history_op, c)
            .answer(200, "the page, oldest first", listed)
            .refusal(400, "invalid_request: after and before together, or a bad threadId")
            .refusal(403, "forbidden: an app's key (apps have no history: subject_kind_not_allowed), or the level is missing")
            .refusal(404, HIDDEN),
        Op::post("/api/v1/conversations/{conversationId}/messages", "sendMessage", "Send a message (as */message/send)")
            .describe("Idempotent by clientMsgId: a retry with the same one is 201 with the original message and duplicate: true. An Idempotency-Key header is refused (400 idempotency_key_not_taken).")
            .key()
            .path_id("conversationId", "conversation")
            .json_body(send, true)
            .answer(201, "the message and its delivery", sent)
            .refusal(400, "idempotency_key_not_taken: an Idempotency-Key header was sent")
            .refusal(403, FORBIDDEN)
            .refusal(404, HIDDEN)
            .refusal(409, "conflict: the clientMsgId was used for another message, or the conversation's state forbids it"),
    ]
}

fn grants(c: &mut Components) -> Vec<Op> {
    let grant = c.grant();
    let grant_body = c.grant_body();
    let group = object(
        &[
            ("groupId", uuid()),
            ("name", json!({"type": "string"})),
            ("createdAt", time()),
        ],
        &[],
    );
    vec![
        Op::post("/api/v1/grants", "putGrant", "Grant a level on a place (grant.manage)")
            .describe("Granting again replaces the level (same grantId).")
            .admin()
            .key()
            .json_body(grant_body, true)
            .answer(201, "the grant", object(&[("grant", grant.clone())], &[]))
            .refusal(400, "level_above_app_cap (pointer /level); invalid_request: /subject/principalId or /subject/groupId names nothing")
            .refusal(403, FORBIDDEN)
            .refusal(404, HIDDEN)
            .refusal(409, "app_not_installed (pointer /subject/principalId): an app without a live installation"),
        Op::get("/api/v1/grants", "listGrants", "The grants on one place (grant.manage)")
            .admin()
            .key()
            .query("spaceId", uuid(), "The space (give exactly one of spaceId, channelId).")
            .query("channelId", uuid(), "The channel (give exactly one of spaceId, channelId).")
            .answer(200, "the grants", object(&[("grants", json!({"type": "array", "items": grant}))], &[]))
            .refusal(400, "invalid_request: not exactly one of spaceId, channelId")
            .refusal(403, FORBIDDEN)
            .refusal(404, HIDDEN),
        Op::delete("/api/v1/grants/{grantId}", "deleteGrant", "Delete a grant (grant.manage on its place)")
            .admin()
            .key()
            .path_id("grantId", "grant")
            .empty(204, "deleted")
            .refusal(403, FORBIDDEN)
            .refusal(404, "not_found: no such grant, or one on a place the caller may not see"),
        Op::post("/api/v1/groups", "createGroup", "Create a group")
            .admin()
            .json_body(object(&[("name", display_name())], &[]), true)
            .answer(201, "the group", object(&[("group", group)], &[]))
            .refusal(409, "conflict: the name is in use (pointer /name)"),
        Op::put("/api/v1/groups/{groupId}/members/{principalId}", "addGroupMember", "Add a principal to a group (idempotent)")
            .admin()
            .path_id("groupId", "group")
            .path_id("principalId", "principal")
            .empty(204, "a member")
            .refusal(404, "not_found: no such group or principal (a disabled one can only be removed)"),
        Op::delete("/api/v1/groups/{groupId}/members/{principalId}", "removeGroupMember", "Remove a principal from a group (idempotent)")
            .admin()
            .path_id("groupId", "group")
            .path_id("principalId", "principal")
            .empty(204, "not a member")
            .refusal(404, "not_found: no such group or principal"),
    ]
}
