//! Hidden equals missing (ADR 0020 §3): for every kind of resource a
//! principal can name today, the answer to an id it may not see is the
//! answer to a random unknown id, byte for byte once the two ids (both 36
//! characters) and the JSON-RPC ids are swapped. Over the gateway, on SQLite
//! and PostgreSQL. (No REST route a principal calls names a resource yet:
//! `GET /api/v1/events` reads one's own stream.)

use serde_json::{json, Value};
use switchboard::client::AgentClient;
use switchboard::protocol::conversations::{
    AgentConversationCreate, ConversationCreateParams, NewConversationKind,
};
use switchboard::protocol::tasks::{
    AgentDispatchRequest, AgentTaskRequest, DispatchRequestParams, TaskRequestParams,
};
use uuid::Uuid;

use crate::support::agents::{agent, direct, send, Agent};
use crate::support::hub::Options;
use crate::support::raw::same_answer;
use crate::support::{werewolf_manifest, RawSocket, TestHub};

fn open_app() -> Value {
    let mut m = werewolf_manifest();
    m["name"] = json!("Open");
    m["hooks"] = json!({
        "task_create": {"kind": "accept"},
        "message_authorize": {"kind": "forwardAllExceptSender"},
        "dispatch_authorize": {"kind": "grant"}
    });
    m
}

/// The world: `a` and `b` talk (directly, in a group and in a task of app
/// `app`); `c` and app `other` see none of it.
struct World {
    hub: TestHub,
    a: Agent,
    b: Agent,
    c: Agent,
    other_key: String,
    direct: Uuid,
    group: Uuid,
    task: Uuid,
    task_conversation: Uuid,
    /// A message of `a` to `b` in their direct conversation.
    direct_message: Uuid,
    /// A message of `a` in the task conversation, which `b` received.
    task_message: Uuid,
    /// `b`'s lease on `task_message`.
    lease: Uuid,
    /// `c`'s own conversation with `a`.
    own: Uuid,
}

async fn world(options: Options) -> World {
    let hub = TestHub::start_with(options).await;
    let (app_id, _) = hub.register_app(&open_app()).await;
    let (_, other_key) = hub.register_app(&open_app()).await;
    let (a, b, c) = (
        agent(&hub, "a").await,
        agent(&hub, "b").await,
        agent(&hub, "c").await,
    );
    let ca = AgentClient::connect(&hub.base, &a.key).await.unwrap();
    let cb = AgentClient::connect(&hub.base, &b.key).await.unwrap();
    let cc = AgentClient::connect(&hub.base, &c.key).await.unwrap();
    let direct_ab = direct(&ca, b.id).await;
    let group = ca
        .call::<AgentConversationCreate>(ConversationCreateParams {
            kind: NewConversationKind::Group,
            participants: vec![b.id],
            name: Some("pair".into()),
        })
        .await
        .unwrap()
        .conversation
        .id;
    let accepted = ca
        .call::<AgentTaskRequest>(TaskRequestParams {
            app_id: app_id.parse().unwrap(),
            invited_agent_ids: vec![b.id],
            initial_conversation: None,
        })
        .await
        .unwrap();
    let task_conversation = accepted.conversations[0].id;
    let direct_message = send(&ca, direct_ab, "hello b").await.message.id;
    let task_message = send(&ca, task_conversation, "in the task").await.message.id;
    let lease = cb
        .call::<AgentDispatchRequest>(DispatchRequestParams {
            conversation_id: task_conversation,
            message_id: task_message,
        })
        .await
        .unwrap()
        .lease
        .lease_id;
    let own = direct(&cc, a.id).await;
    World {
        hub,
        a,
        b,
        c,
        other_key,
        direct: direct_ab,
        group,
        task: accepted.task.id,
        task_conversation,
        direct_message,
        task_message,
        lease,
        own,
    }
}

fn text() -> Value {
    json!([{"type": "text", "text": "hi"}])
}

/// Direct, group and task conversations through every method naming one.
async fn conversations(w: &World) {
    let mut c = RawSocket::connect_agent(&w.hub.ws_url(), &w.c.key).await;
    for hidden in [w.direct, w.group, w.task_conversation] {
        let nf = "NotFoundError";
        same_answer(
            &mut c,
            "agent/conversation/get",
            nf,
            hidden,
            |id| json!({"conversationId": id}),
        )
        .await;
        same_answer(
            &mut c,
            "agent/message/send",
            nf,
            hidden,
            |id| json!({"conversationId": id, "parts": text()}),
        )
        .await;
        same_answer(
            &mut c,
            "agent/message/list",
            nf,
            hidden,
            |id| json!({"conversationId": id}),
        )
        .await;
        same_answer(
            &mut c,
            "agent/typing/send",
            nf,
            hidden,
            |id| json!({"conversationId": id}),
        )
        .await;
    }
    let mut other = RawSocket::connect_app(&w.hub.ws_url(), &w.other_key).await;
    let hidden = w.task_conversation;
    same_answer(
        &mut other,
        "app/message/send",
        "NotFoundError",
        hidden,
        |id| json!({"conversationId": id, "parts": text()}),
    )
    .await;
    same_answer(
        &mut other,
        "app/conversation/add",
        "NotFoundError",
        hidden,
        |id| json!({"conversationId": id, "participants": [w.a.id]}),
    )
    .await;
}

/// Messages named by `replyTo` and as dispatch targets; tasks by agent and
/// by app; leases by complete and by resolve; the app of `task.request`.
async fn the_rest(w: &World) {
    let ws = w.hub.ws_url();
    let mut c = RawSocket::connect_agent(&ws, &w.c.key).await;
    let own = w.own;
    same_answer(
        &mut c,
        "agent/message/send",
        "InvalidParamsError",
        w.direct_message,
        |id| json!({"conversationId": own, "parts": text(), "replyTo": id}),
    )
    .await;
    same_answer(
        &mut c,
        "agent/dispatch/request",
        "NotFoundError",
        w.direct_message,
        |id| json!({"conversationId": own, "messageId": id}),
    )
    .await;
    same_answer(
        &mut c,
        "agent/task/get",
        "NotFoundError",
        w.task,
        |id| json!({"taskId": id}),
    )
    .await;
    same_answer(
        &mut c,
        "agent/dispatch/complete",
        "NotFoundError",
        w.lease,
        |id| json!({"leaseId": id}),
    )
    .await;
    // The sender of a message is no recipient of it: hidden to `a`.
    let mut a = RawSocket::connect_agent(&ws, &w.a.key).await;
    let conversation = w.task_conversation;
    same_answer(
        &mut a,
        "agent/dispatch/request",
        "NotFoundError",
        w.task_message,
        |id| json!({"conversationId": conversation, "messageId": id}),
    )
    .await;
    // An agent's id is no app's.
    same_answer(
        &mut a,
        "agent/task/request",
        "NotFoundError",
        w.b.id,
        |id| json!({"appId": id, "invitedAgentIds": []}),
    )
    .await;
    let mut other = RawSocket::connect_app(&ws, &w.other_key).await;
    same_answer(
        &mut other,
        "app/task/get",
        "NotFoundError",
        w.task,
        |id| json!({"taskId": id}),
    )
    .await;
    same_answer(
        &mut other,
        "app/task/close",
        "NotFoundError",
        w.task,
        |id| json!({"taskId": id}),
    )
    .await;
    same_answer(
        &mut other,
        "app/conversation/create",
        "NotFoundError",
        w.task,
        |id| json!({"taskId": id, "name": "side", "participants": []}),
    )
    .await;
    same_answer(
        &mut other,
        "app/dispatch/resolve",
        "NotFoundError",
        w.lease,
        |id| json!({"leaseId": id, "resolution": {"decision": "deny"}}),
    )
    .await;
}

/// Each refusal above was a request-mode denial, counted by action and
/// reason (never by id).
async fn denials_are_counted(w: &World) {
    let counted = w
        .hub
        .metric(
            "switchboard_authz_denials_total",
            "action=\"conversation.read\",reason=\"no_grant\",mode=\"request\"",
        )
        .await;
    assert!(counted >= 6.0, "conversation.read denials: {counted}");
    let not_self = w
        .hub
        .metric(
            "switchboard_authz_denials_total",
            "action=\"dispatch.complete\",reason=\"not_self\"",
        )
        .await;
    assert_eq!(not_self, 2.0);
}

#[tokio::test]
async fn hidden_ids_answer_like_unknown_ones() {
    let w = world(TestHub::fast_options()).await;
    conversations(&w).await;
    the_rest(&w).await;
    denials_are_counted(&w).await;
}

#[tokio::test]
async fn hidden_ids_answer_like_unknown_ones_on_postgres() {
    let options = Options {
        database_url: Some(crate::support::pg::fresh_database().await),
        ..TestHub::fast_options()
    };
    let w = world(options).await;
    conversations(&w).await;
    the_rest(&w).await;
}
