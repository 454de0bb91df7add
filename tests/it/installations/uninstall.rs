//! Uninstall (ADR 0023 §5) end to end: the app's sockets close with 4012,
//! its active task fails with `agent/task/failed` to each participant, the
//! task's messages stay with their author, the app's keys are revoked (the
//! old key answers 401), and a re-install is a new installation with a new
//! key that works.

use reqwest::Method;
use serde_json::{json, Value};
use switchboard::client::AgentClient;
use switchboard::protocol::tasks::{AgentTaskRequest, TaskRequestParams};
use uuid::Uuid;

use super::{both, operator};
use crate::support::agents::{agent, next_of, send};
use crate::support::event_reader::rest_events;
use crate::support::hub::Options;
use crate::support::{RawSocket, TestHub};

both!(uninstall_fails_the_tasks_keeps_the_messages_and_revokes_the_keys);

/// An app whose gates decide without it: its tasks run while it is away.
fn static_manifest() -> Value {
    json!({
        "name": "Referee",
        "description": "decides without calls",
        "limits": { "maxParticipants": 4 },
        "conversations": [{ "key": "all", "name": "Everyone", "participantFilter": "all" }],
        "hooks": {
            "task_create": {"kind": "accept"},
            "message_authorize": {"kind": "forwardAllExceptSender"},
            "dispatch_authorize": {"kind": "grant"}
        }
    })
}

async fn uninstall_fails_the_tasks_keeps_the_messages_and_revokes_the_keys(options: Options) {
    let hub = TestHub::start_with(options).await;
    let (app, key) = hub.register_app(&static_manifest()).await;
    let app_id: Uuid = app.parse().unwrap();
    let (a, b) = (agent(&hub, "a").await, agent(&hub, "b").await);
    let initiator = AgentClient::connect(&hub.base, &a.key).await.unwrap();
    let invited = AgentClient::connect(&hub.base, &b.key).await.unwrap();
    let mut a_rx = initiator.connection.notifications().unwrap();
    let mut b_rx = invited.connection.notifications().unwrap();
    let request = TaskRequestParams {
        app_id,
        invited_agent_ids: vec![b.id],
        initial_conversation: None,
    };
    let accepted = initiator.call::<AgentTaskRequest>(request).await.unwrap();
    let conversation = accepted.conversations[0].id;
    let sent = send(&initiator, conversation, "my move").await;
    let mut socket = RawSocket::connect_app(&hub.ws_url(), &key).await;
    let (_, installed) = operator(&hub, Method::GET, &app, "installation", None).await;

    let (status, body) = operator(&hub, Method::DELETE, &app, "installation", None).await;
    assert_eq!((status, body), (204, Value::Null));
    assert_eq!(
        socket.closed().await,
        Some((4012, "app_uninstalled".into()))
    );
    for rx in [&mut a_rx, &mut b_rx] {
        let failed = next_of(rx, "agent/task/failed").await;
        let task = &failed["payload"]["task"];
        assert_eq!(task["id"], json!(accepted.task.id), "{failed}");
        assert_eq!(task["state"], json!("failed"));
        assert_eq!(task["failure"]["code"], json!("app_uninstalled"));
    }
    // The messages stay, with their author.
    let mut reader = RawSocket::connect_agent(&hub.ws_url(), &b.key).await;
    let list = json!({"conversationId": conversation, "limit": 10});
    let listed = reader.call(json!("l"), "agent/message/list", list).await;
    let messages = listed["result"]["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0]["id"], json!(sent.message.id));
    assert_eq!(messages[0]["senderId"], json!(a.id));
    // The keys are revoked; no live installation is left.
    let (status, _) = rest_events(&hub, &key, "after=0").await;
    assert_eq!(status, 401);
    let (status, body) = operator(&hub, Method::GET, &app, "installation", None).await;
    assert_eq!(
        (status, body["error"]["message"].clone()),
        (404, json!("installation not found"))
    );
    let (status, body) = operator(&hub, Method::DELETE, &app, "installation", None).await;
    assert_eq!(status, 404, "{body}");

    // A re-install: a new installation, and a new key, shown once.
    let (status, again) = operator(&hub, Method::POST, &app, "installation", None).await;
    assert_eq!(status, 201, "{again}");
    assert_ne!(
        again["installation"]["installationId"],
        installed["installationId"]
    );
    let fresh = again["appKey"]
        .as_str()
        .unwrap_or_else(|| panic!("a new key: {again}"));
    RawSocket::connect_app(&hub.ws_url(), fresh).await;
    let (status, _) = rest_events(&hub, fresh, "after=0").await;
    assert_eq!(status, 200);
}
