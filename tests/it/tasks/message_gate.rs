//! The message gate: forward, block, and fail closed on every failure.

use super::*;

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
