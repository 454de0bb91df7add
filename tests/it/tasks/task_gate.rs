//! The task gate: accepted, validated, rejected, and hooks that decide or fail closed.

use super::*;

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
