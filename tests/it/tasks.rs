//! App-bound tasks, the three gates and dispatch leases, end to end.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchboard::client::{AgentClient, AppClient, ClientError};
use switchboard::domain::gate::{
    AdmissionAnswer, DispatchAuthorizeAnswer, MessageAuthorizeAnswer, MessageVerdict,
    TaskCreateAnswer, TaskVerdict,
};
use switchboard::protocol::conversations::{
    AgentMessageSend, DeliveryState, MessageSendParams, MessageSendResult,
};
use switchboard::protocol::tasks::*;
use switchboard::rpc::RpcError;
use tokio::sync::Notify;
use uuid::Uuid;

use crate::support::agents::{agent, next_of, text, Agent};
use crate::support::hub::Options;
use crate::support::{RawSocket, TestHub};

fn manifest(task_create: Value, message_authorize: Value, dispatch_authorize: Value) -> Value {
    json!({
        "name": "Gatekeeper",
        "description": "A test app",
        "limits": { "maxParticipants": 4 },
        "conversations": [
            { "key": "all", "name": "Everyone", "participantFilter": "all" },
            { "key": "none", "name": "Nobody yet", "participantFilter": "none" }
        ],
        "hooks": {
            "task_create": task_create,
            "message_authorize": message_authorize,
            "dispatch_authorize": dispatch_authorize
        }
    })
}

fn open() -> Value {
    manifest(
        json!({"kind": "accept"}),
        json!({"kind": "forwardAllExceptSender"}),
        json!({"kind": "grant"}),
    )
}

struct World {
    hub: TestHub,
    app_id: Uuid,
    app_key: String,
    agents: Vec<Agent>,
}

async fn world(options: Options, manifest: Value, agents: usize) -> World {
    let hub = TestHub::start_with(options).await;
    let (app_id, app_key) = hub.register_app(&manifest).await;
    let mut list = Vec::new();
    for i in 0..agents {
        list.push(agent(&hub, &format!("agent-{i}")).await);
    }
    World {
        hub,
        app_id: app_id.parse().unwrap(),
        app_key,
        agents: list,
    }
}

impl World {
    async fn client(&self, i: usize) -> AgentClient {
        AgentClient::connect(&self.hub.base, &self.agents[i].key)
            .await
            .unwrap()
    }

    async fn request(
        &self,
        client: &AgentClient,
        invited: &[usize],
    ) -> Result<AcceptedTask, ClientError> {
        client
            .call::<AgentTaskRequest>(TaskRequestParams {
                app_id: self.app_id,
                invited_agent_ids: invited.iter().map(|i| self.agents[*i].id).collect(),
                initial_conversation: None,
            })
            .await
    }
}

fn code_of(err: &ClientError) -> (String, Value) {
    let e = err
        .rpc()
        .unwrap_or_else(|| panic!("not an RPC error: {err}"));
    (
        e.tag.clone().unwrap(),
        e.data.as_deref().cloned().unwrap_or(Value::Null),
    )
}

async fn send(client: &AgentClient, conversation: Uuid, body: &str) -> MessageSendResult {
    client
        .call::<AgentMessageSend>(MessageSendParams {
            conversation_id: conversation,
            parts: text(body),
            client_msg_id: None,
            reply_to: None,
            thread_id: None,
            components: None,
            card_use: None,
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn an_accepted_task_opens_its_conversations_and_tells_the_invited() {
    an_accepted_task_opens_its_conversations_and_tells_the_invited_on(TestHub::fast_options())
        .await;
}

#[tokio::test]
async fn an_accepted_task_opens_its_conversations_and_tells_the_invited_on_postgres() {
    an_accepted_task_opens_its_conversations_and_tells_the_invited_on(on_postgres().await).await;
}

async fn an_accepted_task_opens_its_conversations_and_tells_the_invited_on(options: Options) {
    let w = world(options, open(), 3).await;
    let initiator = w.client(0).await;
    let invited = w.client(1).await;
    let mut rx = invited.connection.notifications().unwrap();
    let accepted = initiator
        .call::<AgentTaskRequest>(TaskRequestParams {
            app_id: w.app_id,
            invited_agent_ids: vec![w.agents[1].id, w.agents[2].id],
            initial_conversation: Some(InitialConversation {
                name: "Side chat".into(),
                participants: vec![w.agents[0].id, w.agents[1].id],
            }),
        })
        .await
        .unwrap();
    assert_eq!(
        accepted.task.state,
        switchboard::domain::task::TaskState::Active
    );
    assert_eq!(accepted.task.participants.len(), 3);
    let names: Vec<&str> = accepted
        .conversations
        .iter()
        .map(|c| c.name.as_deref().unwrap())
        .collect();
    // The answer lists the conversations the initiator is in; the app sees all.
    assert_eq!(names, vec!["Everyone", "Side chat"]);
    assert_eq!(accepted.conversations[0].participants.len(), 3);
    assert_eq!(accepted.conversations[1].participants.len(), 2);
    let app = AppClient::builder(&w.hub.base, &w.app_key)
        .connect()
        .await
        .unwrap();
    let all = app
        .call::<AppTaskGet>(TaskGetParams {
            task_id: accepted.task.id,
        })
        .await
        .unwrap();
    let names: Vec<&str> = all
        .conversations
        .iter()
        .map(|c| c.name.as_deref().unwrap())
        .collect();
    assert_eq!(names, vec!["Everyone", "Nobody yet", "Side chat"]);
    assert!(all.conversations[1].participants.is_empty());
    let keys: Vec<Option<&str>> = all.conversations.iter().map(|c| c.key.as_deref()).collect();
    assert_eq!(
        keys,
        vec![Some("all"), Some("none"), None],
        "template conversations carry their manifest key"
    );
    let invite = next_of(&mut rx, "agent/task/invited").await;
    assert_eq!(invite["payload"]["task"]["id"], json!(accepted.task.id));
    let got = initiator
        .call::<AgentTaskGet>(TaskGetParams {
            task_id: accepted.task.id,
        })
        .await
        .unwrap();
    assert_eq!(got.task.id, accepted.task.id);
    let listed = invited
        .call::<AgentTaskList>(TaskListParams::default())
        .await
        .unwrap();
    assert_eq!(listed.tasks.len(), 1);
    // Outsiders see nothing.
    let outsider = AgentClient::connect(&w.hub.base, &agent(&w.hub, "outsider").await.key)
        .await
        .unwrap();
    let err = outsider
        .call::<AgentTaskGet>(TaskGetParams {
            task_id: accepted.task.id,
        })
        .await
        .unwrap_err();
    assert_eq!(code_of(&err).0, "NotFoundError");
}

#[tokio::test]
async fn task_requests_are_validated() {
    let w = world(TestHub::fast_options(), open(), 6).await;
    let c = w.client(0).await;
    let err = w.request(&c, &[1, 2, 3, 4]).await.unwrap_err();
    let (tag, data) = code_of(&err);
    assert_eq!(tag, "InvalidParamsError");
    assert_eq!(data["limit"], json!(4));
    assert!(err
        .rpc()
        .unwrap()
        .message
        .contains("limits.maxParticipants"));
    let err = w.request(&c, &[1, 1]).await.unwrap_err();
    assert_eq!(code_of(&err).0, "InvalidParamsError");
    let err = w.request(&c, &[0]).await.unwrap_err();
    assert_eq!(code_of(&err).0, "InvalidParamsError");
    let err = c
        .call::<AgentTaskRequest>(TaskRequestParams {
            app_id: Uuid::new_v4(),
            invited_agent_ids: vec![],
            initial_conversation: None,
        })
        .await
        .unwrap_err();
    assert_eq!(err.rpc().unwrap().message, "app not found");
    let err = c
        .call::<AgentTaskRequest>(TaskRequestParams {
            app_id: w.app_id,
            invited_agent_ids: vec![Uuid::new_v4()],
            initial_conversation: None,
        })
        .await
        .unwrap_err();
    assert_eq!(code_of(&err).0, "NotFoundError");
    let err = c
        .call::<AgentTaskRequest>(TaskRequestParams {
            app_id: w.app_id,
            invited_agent_ids: vec![w.agents[1].id],
            initial_conversation: Some(InitialConversation {
                name: "x".into(),
                participants: vec![w.agents[5].id],
            }),
        })
        .await
        .unwrap_err();
    assert!(err
        .rpc()
        .unwrap()
        .message
        .contains("initialConversation.participants"));
}

#[tokio::test]
async fn a_static_reject_fails_the_task_with_its_reason() {
    let m = manifest(
        json!({"kind": "reject", "reason": "closed for the season"}),
        json!({"kind": "forwardAllExceptSender"}),
        json!({"kind": "grant"}),
    );
    let w = world(TestHub::fast_options(), m, 2).await;
    let c = w.client(0).await;
    let mut rx = c.connection.notifications().unwrap();
    let err = w.request(&c, &[1]).await.unwrap_err();
    let (tag, data) = code_of(&err);
    assert_eq!(tag, "ForbiddenError");
    assert_eq!(data["code"], json!("rejected"));
    assert_eq!(data["reason"], json!("closed for the season"));
    let failed = next_of(&mut rx, "agent/task/failed").await;
    assert_eq!(failed["payload"]["task"]["state"], json!("failed"));
    assert_eq!(
        failed["payload"]["task"]["failure"]["code"],
        json!("rejected")
    );
}

async fn on_postgres() -> Options {
    Options {
        database_url: Some(crate::support::pg::fresh_database().await),
        ..TestHub::fast_options()
    }
}

fn hooked(timeout_ms: u64) -> Value {
    manifest(
        json!({"kind": "hook", "timeoutMs": timeout_ms}),
        json!({"kind": "hook", "timeoutMs": timeout_ms}),
        json!({"kind": "hook", "timeoutMs": timeout_ms}),
    )
}

#[tokio::test]
async fn task_create_hooks_decide_and_every_failure_closes_the_gate() {
    task_create_hooks_decide_and_every_failure_closes_the_gate_on(TestHub::fast_options()).await;
}

#[tokio::test]
async fn task_create_hooks_decide_and_every_failure_closes_the_gate_on_postgres() {
    task_create_hooks_decide_and_every_failure_closes_the_gate_on(on_postgres().await).await;
}

async fn task_create_hooks_decide_and_every_failure_closes_the_gate_on(options: Options) {
    let w = world(options, hooked(300), 2).await;
    let c = w.client(0).await;

    // Never connected.
    let (_, data) = code_of(&w.request(&c, &[1]).await.unwrap_err());
    assert_eq!(data["code"], json!("app_unavailable"));

    // An app that answers with each kind of verdict, then misbehaves.
    let mut raw = RawSocket::connect_app(&w.hub.ws_url(), &w.app_key).await;
    for (answer, expected) in [
        (
            json!({"result": {"verdict": {"decision": "Accept"}}}),
            Ok(()),
        ),
        (
            json!({"result": {"verdict": {"decision": "Reject", "reason": "no"}}}),
            Err("rejected"),
        ),
        (
            json!({"error": {"code": -32000, "message": "boom"}}),
            Err("app_error"),
        ),
        (
            json!({"result": {"verdict": {"decision": "Perhaps"}}}),
            Err("invalid_answer"),
        ),
        (json!({"result": 42}), Err("invalid_answer")),
    ] {
        let call = w.request(&c, &[1]);
        let app = async {
            let req = raw.recv_request().await;
            assert_eq!(req["method"], json!("app/task/create"));
            let mut frame = json!({"jsonrpc": "2.0", "id": req["id"]});
            for (k, v) in answer.as_object().unwrap() {
                frame[k] = v.clone();
            }
            raw.send_json(&frame).await;
        };
        let (result, ()) = tokio::join!(call, app);
        match expected {
            Ok(()) => assert!(result.is_ok(), "{result:?}"),
            Err(code) => assert_eq!(code_of(&result.unwrap_err()).1["code"], json!(code)),
        }
    }

    // Late: the app reads the call and never answers in time.
    let started = Instant::now();
    let call = w.request(&c, &[1]);
    let app = async { raw.recv_request().await };
    let (result, late) = tokio::join!(call, app);
    let (tag, data) = code_of(&result.unwrap_err());
    assert_eq!(
        (tag.as_str(), data["code"].clone()),
        ("TimeoutError", json!("timeout"))
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    raw.send_json(
        &json!({"jsonrpc": "2.0", "id": late["id"], "result": {"verdict": {"decision": "Accept"}}}),
    )
    .await;

    // Disconnecting mid-call.
    let call = w.request(&c, &[1]);
    let app = async {
        raw.recv_request().await;
        drop(raw);
    };
    let (result, ()) = tokio::join!(call, app);
    assert_eq!(
        code_of(&result.unwrap_err()).1["code"],
        json!("app_unavailable")
    );
}

#[tokio::test]
async fn app_conversations_are_for_the_owning_app_and_task_participants_only() {
    let w = world(TestHub::fast_options(), open(), 3).await;
    let c = w.client(0).await;
    let task = w.request(&c, &[1]).await.unwrap().task;
    let app = AppClient::builder(&w.hub.base, &w.app_key)
        .connect()
        .await
        .unwrap();
    let (_, other_key) = w.hub.register_app(&open()).await;
    let other = AppClient::builder(&w.hub.base, &other_key)
        .connect()
        .await
        .unwrap();

    let params = |participants: Vec<Uuid>| AppConversationCreateParams {
        task_id: task.id,
        name: "Pair".into(),
        participants,
    };
    let ok = app
        .call::<AppConversationCreate>(params(vec![w.agents[0].id, w.agents[1].id]))
        .await
        .unwrap();
    assert_eq!(ok.conversation.task_id, Some(task.id));
    let err = other
        .call::<AppConversationCreate>(params(vec![w.agents[0].id]))
        .await
        .unwrap_err();
    assert_eq!(err.rpc().unwrap().message, "task not found");
    let err = app
        .call::<AppConversationCreate>(params(vec![w.agents[2].id]))
        .await
        .unwrap_err();
    assert_eq!(code_of(&err).0, "ForbiddenError");
    let err = c
        .connection
        .call_value(
            "app/conversation/create",
            json!({"taskId": task.id, "name": "x", "participants": []}),
        )
        .await
        .unwrap_err();
    assert_eq!(code_of(&err).0, "ForbiddenError");

    // The "none" conversation gets its members from the app.
    let accepted_none = app
        .call::<AppConversationAdd>(AppConversationAddParams {
            conversation_id: ok.conversation.id,
            participants: vec![w.agents[1].id],
        })
        .await
        .unwrap();
    assert_eq!(accepted_none.conversation.participants.len(), 2);

    // The app speaks; everyone in the conversation hears it.
    let b = w.client(1).await;
    let mut rx = b.connection.notifications().unwrap();
    let sent = app
        .call::<AppMessageSend>(MessageSendParams {
            conversation_id: ok.conversation.id,
            parts: text("game on"),
            client_msg_id: None,
            reply_to: None,
            thread_id: None,
            components: None,
            card_use: None,
        })
        .await
        .unwrap();
    assert_eq!(sent.delivery.recipients, Some(2));
    let got = next_of(&mut rx, "agent/message/received").await;
    assert_eq!(got["payload"]["message"]["origin"], json!("app"));

    app.call::<AppTaskClose>(TaskCloseParams {
        task_id: task.id,
        reason: None,
    })
    .await
    .unwrap();
    let closed = next_of(&mut rx, "agent/task/closed").await;
    assert_eq!(closed["payload"]["task"]["state"], json!("closed"));
    let err = app
        .call::<AppConversationCreate>(params(vec![]))
        .await
        .unwrap_err();
    assert_eq!(code_of(&err).0, "ConflictError");
    let err = c
        .call::<AgentMessageSend>(MessageSendParams {
            conversation_id: ok.conversation.id,
            parts: text("hello?"),
            client_msg_id: None,
            reply_to: None,
            thread_id: None,
            components: None,
            card_use: None,
        })
        .await
        .unwrap_err();
    assert_eq!(code_of(&err).0, "ConflictError");
}

/// An SDK app whose message gate answers by script.
async fn message_app(
    w: &World,
    answer: impl Fn(&MessageAuthorizeCallback) -> Result<MessageAuthorizeAnswer, RpcError>
        + Send
        + Sync
        + 'static,
) -> AppClient {
    let answer = Arc::new(answer);
    AppClient::builder(&w.hub.base, &w.app_key)
        .handle::<AppTaskCreate, _, _>(|_| async {
            Ok(TaskCreateAnswer {
                verdict: TaskVerdict::Accept {},
            })
        })
        .handle::<AppMessageAuthorize, _, _>(move |p| {
            let answer = answer.clone();
            async move { answer(&p) }
        })
        .connect()
        .await
        .unwrap()
}

#[tokio::test]
async fn message_gates_forward_block_and_fail_closed() {
    message_gates_forward_block_and_fail_closed_on(TestHub::fast_options()).await;
}

#[tokio::test]
async fn message_gates_forward_block_and_fail_closed_on_postgres() {
    message_gates_forward_block_and_fail_closed_on(on_postgres().await).await;
}

async fn message_gates_forward_block_and_fail_closed_on(options: Options) {
    let w = world(options, hooked(400), 3).await;
    let stranger = Uuid::new_v4();
    let (c0, c1, c2) = (w.client(0).await, w.client(1).await, w.client(2).await);
    let (a1, a2) = (w.agents[1].id, w.agents[2].id);
    let _app = message_app(&w, move |p| {
        let text = match &p.message.parts[0] {
            switchboard::domain::message::Part::Text { text } => text.clone(),
            _ => String::new(),
        };
        match text.as_str() {
            "to one" => Ok(MessageAuthorizeAnswer {
                verdict: MessageVerdict::Forward {
                    recipients: vec![a1, stranger],
                },
            }),
            "block" => Ok(MessageAuthorizeAnswer {
                verdict: MessageVerdict::Block {
                    reason: Some("night phase is closed".into()),
                },
            }),
            "error" => Err(RpcError::new(switchboard::rpc::ErrorKind::Internal, "oops")),
            _ => Ok(MessageAuthorizeAnswer {
                verdict: MessageVerdict::Forward {
                    recipients: vec![a1, a2],
                },
            }),
        }
    })
    .await;
    let task = w.request(&c0, &[1, 2]).await.unwrap();
    let town = task.conversations[0].id;
    let mut rx1 = c1.connection.notifications().unwrap();
    let mut rx2 = c2.connection.notifications().unwrap();

    let r = send(&c0, town, "hello all").await;
    assert_eq!(
        (r.delivery.state, r.delivery.recipients),
        (DeliveryState::Forwarded, Some(2))
    );
    let r = send(&c0, town, "to one").await;
    assert_eq!(
        (r.delivery.state, r.delivery.recipients, r.delivery.dropped),
        (DeliveryState::Forwarded, Some(1), Some(1))
    );
    let r = send(&c0, town, "block").await;
    assert_eq!(r.delivery.state, DeliveryState::Blocked);
    assert_eq!(r.delivery.reason.as_deref(), Some("night phase is closed"));
    let r = send(&c0, town, "error").await;
    assert_eq!(
        r.delivery.reason.as_deref(),
        Some("infrastructure: app_error")
    );

    // Agent 1 got the first two, agent 2 only the first.
    let texts = |v: &Value| {
        v["payload"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        texts(&next_of(&mut rx1, "agent/message/received").await),
        "hello all"
    );
    assert_eq!(
        texts(&next_of(&mut rx1, "agent/message/received").await),
        "to one"
    );
    assert_eq!(
        texts(&next_of(&mut rx2, "agent/message/received").await),
        "hello all"
    );
    let r = send(&c0, town, "marker").await;
    assert_eq!(r.delivery.recipients, Some(2));
    assert_eq!(
        texts(&next_of(&mut rx2, "agent/message/received").await),
        "marker",
        "nothing blocked in between"
    );
    assert_eq!(
        texts(&next_of(&mut rx1, "agent/message/received").await),
        "marker"
    );
    // History: blocked messages stay with their sender only.
    let h = c2
        .call::<switchboard::protocol::conversations::AgentMessageList>(
            switchboard::protocol::conversations::MessageListParams {
                conversation_id: town,
                after: None,
                before: None,
                limit: None,
                thread_id: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(h.messages.len(), 2);
}

#[tokio::test]
async fn a_task_closed_while_its_message_hook_decides_never_forwards() {
    a_task_closed_while_its_message_hook_decides_never_forwards_on(TestHub::fast_options()).await;
}

#[tokio::test]
async fn a_task_closed_while_its_message_hook_decides_never_forwards_on_postgres() {
    a_task_closed_while_its_message_hook_decides_never_forwards_on(on_postgres().await).await;
}

async fn a_task_closed_while_its_message_hook_decides_never_forwards_on(options: Options) {
    let gated = manifest(
        json!({"kind": "accept"}),
        json!({"kind": "hook", "timeoutMs": 20_000}),
        json!({"kind": "grant"}),
    );
    let w = world(options, gated, 2).await;
    let c0 = w.client(0).await;
    let mut raw = RawSocket::connect_app(&w.hub.ws_url(), &w.app_key).await;
    let task = w.request(&c0, &[1]).await.unwrap();
    let town = task.conversations[0].id;
    let a1 = w.agents[1].id;
    let sending = send(&c0, town, "racing the close");
    let app = async {
        let req = raw.recv_request().await;
        assert_eq!(req["method"], json!("app/message/authorize"));
        // The app closes the task, then allows the message.
        let closed = raw
            .call(
                json!("close-1"),
                "app/task/close",
                json!({ "taskId": task.task.id }),
            )
            .await;
        assert!(closed.get("result").is_some(), "{closed}");
        raw.send_json(&json!({
            "jsonrpc": "2.0",
            "id": req["id"],
            "result": { "verdict": { "decision": "Forward", "recipients": [a1] } }
        }))
        .await;
    };
    let (r, ()) = tokio::join!(sending, app);
    assert_eq!(r.delivery.state, DeliveryState::Blocked, "{r:?}");
    assert_eq!(r.delivery.reason.as_deref(), Some("task is closed"));
    assert_eq!(r.delivery.recipients, None);
}

#[tokio::test]
async fn message_gate_timeouts_and_absent_apps_block() {
    let w = world(
        TestHub::fast_options(),
        manifest(
            json!({"kind": "accept"}),
            json!({"kind": "hook", "timeoutMs": 200}),
            json!({"kind": "grant"}),
        ),
        2,
    )
    .await;
    let c0 = w.client(0).await;
    let task = w.request(&c0, &[1]).await.unwrap();
    let town = task.conversations[0].id;
    let r = send(&c0, town, "nobody home").await;
    assert_eq!(
        r.delivery.reason.as_deref(),
        Some("infrastructure: app_unavailable")
    );
    let mut raw = RawSocket::connect_app(&w.hub.ws_url(), &w.app_key).await;
    let sending = send(&c0, town, "slow");
    let app = async { raw.recv_request().await };
    let (r, req) = tokio::join!(sending, app);
    assert_eq!(req["method"], json!("app/message/authorize"));
    assert_eq!(
        r.delivery.reason.as_deref(),
        Some("infrastructure: timeout")
    );
    let sending = send(&c0, town, "garbage");
    let app = async {
        let req = raw.recv_request().await;
        raw.send_json(&json!({"jsonrpc": "2.0", "id": req["id"], "result": {"verdict": "yes"}}))
            .await;
    };
    let (r, ()) = tokio::join!(sending, app);
    assert_eq!(
        r.delivery.reason.as_deref(),
        Some("infrastructure: invalid_answer")
    );
}

#[tokio::test]
async fn an_app_disconnecting_during_message_authorize_blocks() {
    // A deadline far beyond the test's, so only the disconnect can decide.
    let gated = manifest(
        json!({"kind": "accept"}),
        json!({"kind": "hook", "timeoutMs": 60_000}),
        json!({"kind": "grant"}),
    );
    let w = world(TestHub::fast_options(), gated, 2).await;
    let c0 = w.client(0).await;
    let task = w.request(&c0, &[1]).await.unwrap();
    let town = task.conversations[0].id;
    let mut raw = RawSocket::connect_app(&w.hub.ws_url(), &w.app_key).await;
    let sending = send(&c0, town, "hang up");
    let app = async {
        raw.recv_request().await;
        drop(raw);
    };
    let (r, ()) = tokio::join!(sending, app);
    assert_eq!(
        r.delivery.reason.as_deref(),
        Some("infrastructure: app_unavailable"),
        "disconnecting mid-call blocks"
    );
}

#[tokio::test]
async fn static_message_policies_forward_or_deny() {
    let w = world(
        TestHub::fast_options(),
        manifest(
            json!({"kind": "accept"}),
            json!({"kind": "deny", "reason": "silence"}),
            json!({"kind": "grant"}),
        ),
        2,
    )
    .await;
    let c0 = w.client(0).await;
    let task = w.request(&c0, &[1]).await.unwrap();
    let r = send(&c0, task.conversations[0].id, "hello").await;
    assert_eq!(
        (r.delivery.state, r.delivery.reason.as_deref()),
        (DeliveryState::Blocked, Some("silence"))
    );
    let mut rx = c0.connection.notifications().unwrap();
    let d = next_of(&mut rx, "agent/message/delivery").await;
    assert_eq!(d["payload"]["delivery"]["state"], json!("blocked"));
}

async fn dispatch(
    client: &AgentClient,
    conversation: Uuid,
    message: Uuid,
) -> Result<LeaseResult, ClientError> {
    client
        .call::<AgentDispatchRequest>(DispatchRequestParams {
            conversation_id: conversation,
            message_id: message,
        })
        .await
}

#[tokio::test]
async fn static_grants_expire_unless_completed_and_only_recipients_may_ask() {
    static_grants_expire_unless_completed_and_only_recipients_may_ask_on(TestHub::fast_options())
        .await;
}

#[tokio::test]
async fn static_grants_expire_unless_completed_and_only_recipients_may_ask_on_postgres() {
    static_grants_expire_unless_completed_and_only_recipients_may_ask_on(on_postgres().await).await;
}

async fn static_grants_expire_unless_completed_and_only_recipients_may_ask_on(options: Options) {
    let w = world(
        options.env("SWITCHBOARD_LEASES__DEFAULT_TIMEOUT_MS", 300),
        open(),
        3,
    )
    .await;
    let (c0, c1) = (w.client(0).await, w.client(1).await);
    let task = w.request(&c0, &[1]).await.unwrap();
    let town = task.conversations[0].id;
    let mut rx = c1.connection.notifications().unwrap();
    let m1 = send(&c0, town, "first").await.message.id;
    let m2 = send(&c0, town, "second").await.message.id;

    let lease = dispatch(&c1, town, m1).await.unwrap().lease;
    assert_eq!(lease.state, switchboard::domain::lease::LeaseState::Pending);
    let again = dispatch(&c1, town, m1).await.unwrap().lease;
    assert_eq!(
        again.lease_id, lease.lease_id,
        "one live lease per recipient and message"
    );
    let released = next_of(&mut rx, "agent/dispatch/released").await;
    assert_eq!(released["payload"]["lease"]["state"], json!("granted"));
    assert!(released["payload"]["lease"]["expiresAt"].is_string());
    let done = c1
        .call::<AgentDispatchComplete>(LeaseParams {
            lease_id: lease.lease_id,
        })
        .await
        .unwrap();
    assert_eq!(
        done.lease.state,
        switchboard::domain::lease::LeaseState::Completed
    );

    let lease2 = dispatch(&c1, town, m2).await.unwrap().lease;
    next_of(&mut rx, "agent/dispatch/released").await;
    let expired = next_of(&mut rx, "agent/dispatch/expired").await;
    assert_eq!(
        expired["payload"]["lease"]["leaseId"],
        json!(lease2.lease_id)
    );
    let err = c1
        .call::<AgentDispatchComplete>(LeaseParams {
            lease_id: lease2.lease_id,
        })
        .await
        .unwrap_err();
    assert_eq!(code_of(&err).0, "ConflictError");

    // The sender is not a recipient; an outsider cannot see the conversation.
    assert_eq!(
        code_of(&dispatch(&c0, town, m1).await.unwrap_err()).0,
        "NotFoundError"
    );
    let c2 = w.client(2).await;
    assert_eq!(
        code_of(&dispatch(&c2, town, m1).await.unwrap_err()).0,
        "NotFoundError"
    );
}

#[tokio::test]
async fn dispatch_hooks_grant_deny_hold_and_resolve() {
    dispatch_hooks_grant_deny_hold_and_resolve_on(TestHub::fast_options()).await;
}

#[tokio::test]
async fn dispatch_hooks_grant_deny_hold_and_resolve_on_postgres() {
    dispatch_hooks_grant_deny_hold_and_resolve_on(on_postgres().await).await;
}

async fn dispatch_hooks_grant_deny_hold_and_resolve_on(options: Options) {
    let w = world(
        options.env("SWITCHBOARD_LEASES__MAX_HOLD_MS", 400),
        manifest(
            json!({"kind": "accept"}),
            json!({"kind": "forwardAllExceptSender"}),
            json!({"kind": "hook", "timeoutMs": 300}),
        ),
        2,
    )
    .await;
    let (c0, c1) = (w.client(0).await, w.client(1).await);
    let mut rx = c1.connection.notifications().unwrap();
    let task = w.request(&c0, &[1]).await.unwrap();
    let town = task.conversations[0].id;
    let app = AppClient::builder(&w.hub.base, &w.app_key)
        .handle::<AppDispatchAuthorize, _, _>(|p| async move {
            let text = match &p.message.parts[0] {
                switchboard::domain::message::Part::Text { text } => text.clone(),
                _ => String::new(),
            };
            let admission = match text.as_str() {
                "grant" => AdmissionAnswer::Grant {
                    lease_timeout_ms: Some(60_000),
                },
                "deny" => AdmissionAnswer::Deny {
                    reason: Some("not your turn".into()),
                },
                "slow" => {
                    tokio::time::sleep(Duration::from_millis(1500)).await;
                    AdmissionAnswer::Grant {
                        lease_timeout_ms: None,
                    }
                }
                _ => AdmissionAnswer::Hold {
                    reason: Some("waiting for moderator state".into()),
                },
            };
            Ok(DispatchAuthorizeAnswer { admission })
        })
        .connect()
        .await
        .unwrap();

    let state_of = |v: &Value| v["payload"]["lease"]["state"].as_str().unwrap().to_string();
    let m = send(&c0, town, "grant").await.message.id;
    dispatch(&c1, town, m).await.unwrap();
    let r = next_of(&mut rx, "agent/dispatch/released").await;
    assert_eq!(state_of(&r), "granted");

    let m = send(&c0, town, "deny").await.message.id;
    dispatch(&c1, town, m).await.unwrap();
    let r = next_of(&mut rx, "agent/dispatch/released").await;
    assert_eq!(
        (
            state_of(&r).as_str(),
            r["payload"]["lease"]["reason"].as_str()
        ),
        ("denied", Some("not your turn"))
    );

    let m = send(&c0, town, "slow").await.message.id;
    dispatch(&c1, town, m).await.unwrap();
    let r = next_of(&mut rx, "agent/dispatch/released").await;
    assert_eq!(
        r["payload"]["lease"]["reason"],
        json!("infrastructure: timeout")
    );

    // Held, then resolved by the app.
    let m = send(&c0, town, "hold").await.message.id;
    let held = dispatch(&c1, town, m).await.unwrap().lease;
    let h = next_of(&mut rx, "agent/dispatch/held").await;
    assert_eq!(state_of(&h), "held");
    let resolved = app
        .call::<AppDispatchResolve>(DispatchResolveParams {
            lease_id: held.lease_id,
            resolution: Resolution::Grant {
                lease_timeout_ms: Some(5000),
            },
        })
        .await
        .unwrap();
    assert_eq!(
        resolved.lease.state,
        switchboard::domain::lease::LeaseState::Granted
    );
    assert_eq!(
        state_of(&next_of(&mut rx, "agent/dispatch/released").await),
        "granted"
    );
    let err = app
        .call::<AppDispatchResolve>(DispatchResolveParams {
            lease_id: held.lease_id,
            resolution: Resolution::Deny { reason: None },
        })
        .await
        .unwrap_err();
    assert_eq!(code_of(&err).0, "ConflictError");

    // Held and never resolved: denied at leases.max_hold_ms.
    let m = send(&c0, town, "hold again").await.message.id;
    dispatch(&c1, town, m).await.unwrap();
    next_of(&mut rx, "agent/dispatch/held").await;
    let r = next_of(&mut rx, "agent/dispatch/released").await;
    assert_eq!(
        (
            state_of(&r).as_str(),
            r["payload"]["lease"]["reason"].as_str()
        ),
        ("denied", Some("hold_expired"))
    );
}

#[tokio::test]
async fn hundred_concurrent_task_hooks_run_at_once_against_one_app() {
    let w = world(
        TestHub::fast_options(),
        manifest(
            json!({"kind": "hook", "timeoutMs": 20000}),
            json!({"kind": "forwardAllExceptSender"}),
            json!({"kind": "grant"}),
        ),
        5,
    )
    .await;
    let in_flight = Arc::new(AtomicUsize::new(0));
    let all_there = Arc::new(Notify::new());
    let (f, n) = (in_flight.clone(), all_there.clone());
    let _app = AppClient::builder(&w.hub.base, &w.app_key)
        .handle::<AppTaskCreate, _, _>(move |_| {
            let (f, n) = (f.clone(), n.clone());
            async move {
                // Every call waits until all 100 are in flight together: if
                // the hub serialized them, none would ever be accepted.
                let waiter = n.notified();
                tokio::pin!(waiter);
                waiter.as_mut().enable();
                if f.fetch_add(1, Ordering::SeqCst) + 1 == 100 {
                    n.notify_waiters();
                } else {
                    waiter.await;
                }
                Ok(TaskCreateAnswer {
                    verdict: TaskVerdict::Accept {},
                })
            }
        })
        .connect()
        .await
        .unwrap();
    let mut clients = Vec::new();
    for i in 0..4 {
        clients.push(w.client(i).await);
    }
    let w = &w;
    let calls = (0..100).map(|i| {
        let c = &clients[i % 4];
        // Each of the four initiators invites the fifth agent.
        async move { w.request(c, &[4]).await }
    });
    let results = futures_util::future::join_all(calls).await;
    assert!(
        results.iter().all(|r| r.is_ok()),
        "{:?}",
        results.iter().find(|r| r.is_err())
    );
    assert_eq!(in_flight.load(Ordering::SeqCst), 100);
}

#[tokio::test]
async fn a_restart_between_persist_and_verdict_still_decides_the_message() {
    let dir = tempfile::tempdir().unwrap();
    let options = || {
        let mut o = TestHub::fast_options().env("SWITCHBOARD_JOBS__INLINE_GRACE_MS", 100);
        o.dir = Some(dir.path().to_path_buf());
        o
    };
    let m = manifest(
        json!({"kind": "accept"}),
        json!({"kind": "hook", "timeoutMs": 3000}),
        json!({"kind": "grant"}),
    );
    let mut hub = TestHub::start_with(options()).await;
    let (app_id, app_key) = hub.register_app(&m).await;
    let a = agent(&hub, "speaker").await;
    let b = agent(&hub, "listener").await;
    let c0 = AgentClient::connect(&hub.base, &a.key).await.unwrap();
    let task = c0
        .call::<AgentTaskRequest>(TaskRequestParams {
            app_id: app_id.parse().unwrap(),
            invited_agent_ids: vec![b.id],
            initial_conversation: None,
        })
        .await
        .unwrap();
    let town = task.conversations[0].id;
    // The app receives the authorize call (so the message is stored) and
    // the hub dies before any verdict.
    let mut raw = RawSocket::connect_app(&hub.ws_url(), &app_key).await;
    let sending = tokio::spawn(async move { send_result(&c0, town, "survive this").await });
    let call = loop {
        let frame = raw.recv_request().await;
        if frame.get("id").is_some() {
            break frame;
        }
    };
    assert_eq!(call["method"], json!("app/message/authorize"));
    let message_id = call["params"]["message"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    hub.signal(libc::SIGKILL);
    hub.wait_exit(Duration::from_secs(30)).await;
    assert!(
        sending.await.unwrap().is_err(),
        "the send was never acknowledged"
    );

    // After the restart the durable job runs the gate again.
    let hub = TestHub::start_with(options()).await;
    let _app = AppClient::builder(&hub.base, &app_key)
        .handle::<AppMessageAuthorize, _, _>(|p| async move {
            Ok(MessageAuthorizeAnswer {
                verdict: MessageVerdict::Forward {
                    recipients: p.conversation.participants.clone(),
                },
            })
        })
        .connect()
        .await
        .unwrap();
    let sender = AgentClient::connect(&hub.base, &a.key).await.unwrap();
    let mut rx = sender.connection.notifications().unwrap();
    let delivery = next_of(&mut rx, "agent/message/delivery").await;
    assert_eq!(delivery["payload"]["messageId"], json!(message_id));
    let state = delivery["payload"]["delivery"]["state"]
        .as_str()
        .unwrap()
        .to_string();
    let listener = AgentClient::connect(&hub.base, &b.key).await.unwrap();
    let mut rx = listener.connection.notifications().unwrap();
    if state == "forwarded" {
        let got = next_of(&mut rx, "agent/message/received").await;
        assert_eq!(got["payload"]["message"]["id"], json!(message_id));
    } else {
        // The app may not have been back in time: then the gate failed closed.
        assert_eq!(state, "blocked");
        assert_eq!(
            delivery["payload"]["delivery"]["reason"],
            json!("infrastructure: app_unavailable")
        );
    }
}

async fn send_result(
    client: &AgentClient,
    conversation: Uuid,
    body: &str,
) -> Result<MessageSendResult, ClientError> {
    client
        .call::<AgentMessageSend>(MessageSendParams {
            conversation_id: conversation,
            parts: text(body),
            client_msg_id: None,
            reply_to: None,
            thread_id: None,
            components: None,
            card_use: None,
        })
        .await
}

/// An in-process hub on a fresh SQLite file, for tests that must reach
/// states no client can produce (a gate whose every run fails).
async fn in_process_hub() -> (switchboard::server::Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = switchboard::config::Config::default();
    config.server.listen = "127.0.0.1:0".parse().unwrap();
    config.server.data_dir = dir.path().to_path_buf();
    (
        switchboard::server::Server::start(config).await.unwrap(),
        dir,
    )
}

async fn stored_agent(hub: &switchboard::hub::Hub, name: &str) -> Uuid {
    use switchboard::domain::PrincipalKind;
    use switchboard::store::{NewKey, NewPrincipal};
    let id = Uuid::now_v7();
    hub.store
        .create_agent(
            &NewPrincipal {
                id,
                kind: PrincipalKind::Agent,
                name: name.into(),
                description: None,
                created_at: 1,
            },
            &NewKey {
                key_id: format!("k{}", id.simple()),
                secret_hash: [7; 32],
            },
            None,
        )
        .await
        .unwrap();
    id
}

/// A message stored in a task conversation whose task does not exist, so
/// every run of a gate about it fails in the store. Returns the
/// conversation's id and what the insert answered.
async fn orphan_message(
    hub: &switchboard::hub::Hub,
    message: &switchboard::store::NewMessage,
    participants: Vec<Uuid>,
) -> (Uuid, switchboard::store::InsertedMessage) {
    use switchboard::domain::conversation::ConversationKind;
    use switchboard::store::NewConversation;
    let conversation = NewConversation {
        id: message.conversation_id,
        kind: ConversationKind::Task,
        name: Some("orphan".into()),
        task_id: Some(Uuid::now_v7()),
        direct_key: None,
        template_key: None,
        created_by: message.sender_id,
        participants,
        created_at: 1,
    };
    hub.store
        .create_conversation(&conversation, &[])
        .await
        .unwrap();
    (
        conversation.id,
        hub.store.insert_message(message).await.unwrap(),
    )
}

fn stored_message(
    sender: Uuid,
    body: &str,
    fanout: switchboard::store::Fanout,
    job: Option<switchboard::store::NewJob>,
) -> switchboard::store::NewMessage {
    use switchboard::domain::message::Origin;
    switchboard::store::NewMessage {
        id: job.as_ref().map(|j| j.subject).unwrap_or_else(Uuid::now_v7),
        conversation_id: Uuid::now_v7(),
        sender_id: sender,
        origin: Origin::Agent,
        parts: text(body),
        reply_to: None,
        thread_id: None,
        in_channel: false,
        client_msg_id: None,
        request_hash: None,
        created_at: 1,
        fanout,
        job,
        card: None,
        reply_to_interaction: None,
    }
}

#[tokio::test]
async fn a_task_gate_that_keeps_failing_fails_the_task() {
    use switchboard::domain::task::{TaskParticipant, TaskRole, TaskState};
    use switchboard::store::{Job, JobKind, NewJob, NewTask};

    // The task names an agent as its app: every run of the gate fails to
    // load the app.
    let (server, _dir) = in_process_hub().await;
    let hub = server.hub.clone();
    let initiator = stored_agent(&hub, "initiator").await;
    let not_an_app = stored_agent(&hub, "not-an-app").await;
    let task_id = Uuid::now_v7();
    let job = NewJob::new(JobKind::TaskCreate, task_id, i64::MAX / 2);
    hub.store
        .create_task(
            &NewTask {
                id: task_id,
                app_id: not_an_app,
                initiator_id: initiator,
                participants: vec![TaskParticipant {
                    agent_id: initiator,
                    role: TaskRole::Initiator,
                }],
                initial_conversation: None,
                created_at: 1,
            },
            &job,
        )
        .await
        .unwrap();
    let run = |attempts| Job {
        id: job.id,
        kind: JobKind::TaskCreate,
        subject: task_id,
        attempts,
    };
    switchboard::jobs::execute(&hub, run(1)).await;
    let state = |hub: std::sync::Arc<switchboard::hub::Hub>| async move {
        hub.store.task(task_id).await.unwrap().unwrap().task
    };
    assert_eq!(state(hub.clone()).await.state, TaskState::Waiting);
    switchboard::jobs::execute(&hub, run(hub.config.jobs.max_attempts)).await;
    let task = state(hub.clone()).await;
    assert_eq!(task.state, TaskState::Failed);
    assert_eq!(task.failure.unwrap().code, "hub_error");
    let events = hub.store.events_after(initiator, 0, 10).await.unwrap();
    assert_eq!(
        events
            .iter()
            .map(|e| e.event_type.as_str())
            .collect::<Vec<_>>(),
        ["agent/task/failed"]
    );
    assert!(hub.store.claim_job(job.id, 0, 1).await.unwrap().is_none());
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_dispatch_gate_that_keeps_failing_denies_the_lease() {
    use switchboard::domain::lease::LeaseState;
    use switchboard::store::{CreatedLease, Fanout, Job, JobKind, NewJob, NewLease};

    // A forwarded message in a conversation whose task does not exist:
    // every run of the dispatch gate fails to load the task.
    let (server, _dir) = in_process_hub().await;
    let hub = server.hub.clone();
    let sender = stored_agent(&hub, "sender").await;
    let recipient = stored_agent(&hub, "recipient").await;
    let message = stored_message(
        sender,
        "act on me",
        Fanout::Forward {
            recipients: vec![recipient],
            event_type: "agent/message/received",
            people: switchboard::store::PersonCopies::NONE,
        },
        None,
    );
    let message_id = message.id;
    let (conversation_id, _) = orphan_message(&hub, &message, vec![sender, recipient]).await;
    let lease_id = Uuid::now_v7();
    let job = NewJob::new(JobKind::DispatchAuthorize, lease_id, i64::MAX / 2);
    let created = hub
        .store
        .create_lease(
            &NewLease {
                id: lease_id,
                message_id,
                conversation_id,
                recipient_id: recipient,
                created_at: 1,
            },
            &job,
        )
        .await
        .unwrap();
    assert!(matches!(created, CreatedLease::Created(_)));
    let run = |attempts| Job {
        id: job.id,
        kind: JobKind::DispatchAuthorize,
        subject: lease_id,
        attempts,
    };
    switchboard::jobs::execute(&hub, run(1)).await;
    let lease = hub.store.lease(lease_id).await.unwrap().unwrap();
    assert_eq!(lease.state, LeaseState::Pending);
    switchboard::jobs::execute(&hub, run(hub.config.jobs.max_attempts)).await;
    let lease = hub.store.lease(lease_id).await.unwrap().unwrap();
    assert_eq!(lease.state, LeaseState::Denied);
    assert_eq!(lease.reason.as_deref(), Some("infrastructure: hub_error"));
    assert!(hub.store.claim_job(job.id, 0, 1).await.unwrap().is_none());
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_gate_job_that_keeps_failing_fails_closed() {
    use switchboard::store::{Fanout, InsertedMessage, Job, JobKind, NewJob, Verdict};

    // An in-process hub whose message gate cannot run: the conversation
    // names a task that does not exist, so every run fails in the store.
    let (server, _dir) = in_process_hub().await;
    let hub = server.hub.clone();
    let sender = Uuid::now_v7();
    let message_id = Uuid::now_v7();
    let job = NewJob::new(JobKind::MessageAuthorize, message_id, i64::MAX / 2);
    let message = stored_message(sender, "stuck", Fanout::Pending, Some(job.clone()));
    let (_, inserted) = orphan_message(&hub, &message, vec![sender]).await;
    assert!(matches!(
        inserted,
        InsertedMessage::Inserted {
            verdict: Verdict::Pending,
            ..
        }
    ));

    // An early failing run only schedules a retry.
    let run = |attempts| Job {
        id: job.id,
        kind: JobKind::MessageAuthorize,
        subject: message_id,
        attempts,
    };
    switchboard::jobs::execute(&hub, run(1)).await;
    assert_eq!(
        hub.store.message(message_id).await.unwrap().unwrap().1,
        Verdict::Pending
    );
    // The last allowed run applies the fail-closed verdict and ends the job.
    switchboard::jobs::execute(&hub, run(hub.config.jobs.max_attempts)).await;
    let (_, verdict) = hub.store.message(message_id).await.unwrap().unwrap();
    assert_eq!(
        verdict,
        Verdict::Blocked {
            reason: "infrastructure: hub_error".into()
        }
    );
    assert!(
        hub.store.claim_job(job.id, 0, 1).await.unwrap().is_none(),
        "the job is gone"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn dispatch_gate_failures_deny() {
    let w = world(
        TestHub::fast_options(),
        manifest(
            json!({"kind": "accept"}),
            json!({"kind": "forwardAllExceptSender"}),
            json!({"kind": "hook", "timeoutMs": 2000}),
        ),
        2,
    )
    .await;
    let (c0, c1) = (w.client(0).await, w.client(1).await);
    let mut rx = c1.connection.notifications().unwrap();
    let town = w.request(&c0, &[1]).await.unwrap().conversations[0].id;
    let reason = |v: &Value| {
        v["payload"]["lease"]["reason"]
            .as_str()
            .unwrap()
            .to_string()
    };

    // No app socket at all.
    let m = send(&c0, town, "first").await.message.id;
    dispatch(&c1, town, m).await.unwrap();
    let r = next_of(&mut rx, "agent/dispatch/released").await;
    assert_eq!(
        (
            r["payload"]["lease"]["state"].as_str().unwrap(),
            reason(&r).as_str()
        ),
        ("denied", "infrastructure: app_unavailable")
    );

    // An app that answers garbage, then one that answers an error, then one
    // that disconnects mid-call.
    let mut raw = RawSocket::connect_app(&w.hub.ws_url(), &w.app_key).await;
    for (answer, expected) in [
        (
            json!({"result": {"admission": {"decision": "perhaps"}}}),
            "infrastructure: invalid_answer",
        ),
        (
            json!({"error": {"code": -32000, "message": "no"}}),
            "infrastructure: app_error",
        ),
    ] {
        let m = send(&c0, town, "next").await.message.id;
        dispatch(&c1, town, m).await.unwrap();
        let req = raw.recv_request().await;
        assert_eq!(req["method"], json!("app/dispatch/authorize"));
        let mut frame = json!({"jsonrpc": "2.0", "id": req["id"]});
        for (k, v) in answer.as_object().unwrap() {
            frame[k] = v.clone();
        }
        raw.send_json(&frame).await;
        assert_eq!(
            reason(&next_of(&mut rx, "agent/dispatch/released").await),
            expected
        );
    }
    let m = send(&c0, town, "last").await.message.id;
    dispatch(&c1, town, m).await.unwrap();
    raw.recv_request().await;
    drop(raw);
    assert_eq!(
        reason(&next_of(&mut rx, "agent/dispatch/released").await),
        "infrastructure: app_unavailable"
    );
}

/// An app answering a gate with a member the answer type does not define is
/// refused like any other answer that does not decode: fail closed as
/// `invalid_answer`, at the top level and inside the verdict, for all three
/// gates (including the member-less `Accept`).
#[tokio::test]
async fn hook_answers_with_unknown_members_fail_closed() {
    let w = world(TestHub::fast_options(), hooked(2000), 2).await;
    let c0 = w.client(0).await;
    let c1 = w.client(1).await;
    let mut raw = RawSocket::connect_app(&w.hub.ws_url(), &w.app_key).await;
    async fn answer(raw: &mut RawSocket, method: &str, result: Value) {
        let req = raw.recv_request().await;
        assert_eq!(req["method"], json!(method));
        raw.send_json(&json!({"jsonrpc": "2.0", "id": req["id"], "result": result}))
            .await;
    }

    for bad in [
        json!({"verdict": {"decision": "Accept"}, "note": "extra"}),
        json!({"verdict": {"decision": "Accept", "note": "extra"}}),
        json!({"verdict": {"decision": "Reject", "reason": "no", "note": "extra"}}),
    ] {
        let (result, ()) = tokio::join!(
            w.request(&c0, &[1]),
            answer(&mut raw, "app/task/create", bad.clone())
        );
        let err = result.expect_err(&format!("{bad} must not be accepted"));
        assert_eq!(code_of(&err).1["code"], json!("invalid_answer"), "{bad}");
    }

    // A clean answer still works; it opens the task the other gates need.
    let (task, ()) = tokio::join!(
        w.request(&c0, &[1]),
        answer(
            &mut raw,
            "app/task/create",
            json!({"verdict": {"decision": "Accept"}})
        )
    );
    let town = task.unwrap().conversations[0].id;

    let a1 = w.agents[1].id;
    for bad in [
        json!({"verdict": {"decision": "Forward", "recipients": [a1]}, "note": 1}),
        json!({"verdict": {"decision": "Forward", "recipients": [a1], "cc": [a1]}}),
    ] {
        let (r, ()) = tokio::join!(
            send(&c0, town, "hello"),
            answer(&mut raw, "app/message/authorize", bad.clone())
        );
        assert_eq!(r.delivery.state, DeliveryState::Blocked, "{bad}");
        assert_eq!(
            r.delivery.reason.as_deref(),
            Some("infrastructure: invalid_answer"),
            "{bad}"
        );
    }
    let (r, ()) = tokio::join!(
        send(&c0, town, "dispatch me"),
        answer(
            &mut raw,
            "app/message/authorize",
            json!({"verdict": {"decision": "Forward", "recipients": [a1]}})
        )
    );
    assert_eq!(r.delivery.state, DeliveryState::Forwarded);

    let mut rx = c1.connection.notifications().unwrap();
    let (lease, ()) = tokio::join!(
        dispatch(&c1, town, r.message.id),
        answer(
            &mut raw,
            "app/dispatch/authorize",
            json!({"admission": {"decision": "grant", "leaseTimeoutMs": 60000, "scope": "all"}})
        )
    );
    lease.unwrap();
    let released = next_of(&mut rx, "agent/dispatch/released").await;
    assert_eq!(released["payload"]["lease"]["state"], json!("denied"));
    assert_eq!(
        released["payload"]["lease"]["reason"],
        json!("infrastructure: invalid_answer")
    );
}
