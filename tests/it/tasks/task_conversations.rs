//! A task's conversations: the owning app and the task's participants only.

use super::*;

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
