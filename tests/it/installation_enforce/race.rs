//! ADR 0023 §13 `suspend_races_message_hook`: a gate that started before
//! a suspend may finish, but its verdict is not applied. The hub runs with
//! a long sweep interval, so the suspend written here (another process)
//! neither closes the app's socket nor reaches the hub's cache: the
//! pending call would otherwise end as `Disconnected` and the test could
//! not fail. The fake app holds the hook's answer until the suspend has
//! committed, then answers `forward`; the verdict transaction's own check
//! of the installation must refuse the forward, and the gate decided again
//! blocks with `app_suspended`. Without that check it is forwarded.

use serde_json::json;
use switchboard::client::AgentClient;
use switchboard::domain::installation::Transition;
use switchboard::protocol::conversations::DeliveryState;
use switchboard::protocol::tasks::{
    AgentDispatchRequest, AgentTaskRequest, DispatchRequestParams, TaskRequestParams,
};
use tokio::sync::{mpsc, oneshot};

use super::*;
use crate::support::agents::{agent, next_of, send};

const SLOW_SWEEP: (&str, &str) = ("SWITCHBOARD_GATEWAY__REVOCATION_CHECK_INTERVAL_MS", "60000");

/// A fake app answering every gate at once but `hold`, which it answers
/// only when released: `held` gets a sender per held call.
fn holding_app(
    mut socket: RawSocket,
    recipient: Uuid,
    hold: &'static str,
    held: mpsc::UnboundedSender<oneshot::Sender<()>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let frame = match socket.next_event().await {
                RawEvent::Text(frame) => frame,
                _ => return,
            };
            let (Some(method), Some(id)) = (frame["method"].as_str(), frame.get("id")) else {
                continue;
            };
            if method == hold {
                let (release, released) = oneshot::channel();
                held.send(release).unwrap();
                released.await.unwrap();
            }
            let result = answer(method, recipient);
            socket
                .send_json(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
                .await;
        }
    })
}

async fn suspend_races_message_hook(backend: &str) {
    let s = setup(backend, &[SLOW_SWEEP]).await;
    let (app, key) = s.hub.register_app(&hooked()).await;
    let (a0, a1) = (agent(&s.hub, "a0").await, agent(&s.hub, "a1").await);
    let c0 = AgentClient::connect(&s.hub.base, &a0.key).await.unwrap();
    let socket = RawSocket::connect_app(&s.hub.ws_url(), &key).await;
    let (held_tx, mut held) = mpsc::unbounded_channel();
    let fake = holding_app(socket, a1.id, "app/message/authorize", held_tx);
    let task = c0
        .call::<AgentTaskRequest>(TaskRequestParams {
            app_id: id(&app),
            invited_agent_ids: vec![a1.id],
            initial_conversation: None,
        })
        .await
        .unwrap();
    let town = task.conversations[0].id;

    let sending = tokio::spawn(async move {
        let r = send(&c0, town, "racing the suspend").await;
        (r, c0)
    });
    let release = held_call(&mut held).await;
    // The suspend commits while the app holds its answer.
    s.transition(id(&app), Transition::Suspend).await;
    release.send(()).unwrap();
    let (r, _c0) = sending.await.unwrap();
    assert_eq!(r.delivery.state, DeliveryState::Blocked, "{r:?}");
    assert_eq!(r.delivery.reason.as_deref(), Some("app_suspended"));
    assert_eq!(r.delivery.recipients, None);
    // The app was asked once: the second round decided on the store's
    // installation without a round trip.
    assert!(held.try_recv().is_err(), "no second hook call");
    fake.abort();
}

/// The first held call's release, within the deadline.
async fn held_call(held: &mut mpsc::UnboundedReceiver<oneshot::Sender<()>>) -> oneshot::Sender<()> {
    tokio::time::timeout(crate::support::raw::DEADLINE, held.recv())
        .await
        .expect("the hook call within the deadline")
        .unwrap()
}

/// The same race on the task gate: the app accepts after the suspend
/// committed; the accept's transaction refuses it and the task fails
/// `app_suspended`.
async fn suspend_races_task_hook(backend: &str) {
    let s = setup(backend, &[SLOW_SWEEP]).await;
    let (app, key) = s.hub.register_app(&hooked()).await;
    let (a0, a1) = (agent(&s.hub, "a0").await, agent(&s.hub, "a1").await);
    let c0 = AgentClient::connect(&s.hub.base, &a0.key).await.unwrap();
    let socket = RawSocket::connect_app(&s.hub.ws_url(), &key).await;
    let (held_tx, mut held) = mpsc::unbounded_channel();
    let fake = holding_app(socket, a1.id, "app/task/create", held_tx);
    let app_id = id(&app);
    let requesting = tokio::spawn(async move {
        c0.call::<AgentTaskRequest>(TaskRequestParams {
            app_id,
            invited_agent_ids: vec![a1.id],
            initial_conversation: None,
        })
        .await
    });
    let release = held_call(&mut held).await;
    s.transition(app_id, Transition::Suspend).await;
    release.send(()).unwrap();
    let refused = requesting.await.unwrap();
    let e = refused.expect_err("the accept after the suspend is not applied");
    assert!(format!("{e:?}").contains("app_suspended"), "{e:?}");
    assert!(held.try_recv().is_err(), "no second hook call");
    fake.abort();
}

/// And on the dispatch gate: the grant after the suspend is not applied;
/// the lease is denied `app_suspended`.
async fn suspend_races_dispatch_hook(backend: &str) {
    let s = setup(backend, &[SLOW_SWEEP]).await;
    let (app, key) = s.hub.register_app(&hooked()).await;
    let (a0, a1) = (agent(&s.hub, "a0").await, agent(&s.hub, "a1").await);
    let c0 = AgentClient::connect(&s.hub.base, &a0.key).await.unwrap();
    let c1 = AgentClient::connect(&s.hub.base, &a1.key).await.unwrap();
    let mut rx = c1.connection.notifications().unwrap();
    let socket = RawSocket::connect_app(&s.hub.ws_url(), &key).await;
    let (held_tx, mut held) = mpsc::unbounded_channel();
    let fake = holding_app(socket, a1.id, "app/dispatch/authorize", held_tx);
    let task = c0
        .call::<AgentTaskRequest>(TaskRequestParams {
            app_id: id(&app),
            invited_agent_ids: vec![a1.id],
            initial_conversation: None,
        })
        .await
        .unwrap();
    let town = task.conversations[0].id;
    let sent = send(&c0, town, "dispatch me").await;
    assert_eq!(sent.delivery.state, DeliveryState::Forwarded);
    c1.call::<AgentDispatchRequest>(DispatchRequestParams {
        conversation_id: town,
        message_id: sent.message.id,
    })
    .await
    .unwrap();
    let release = held_call(&mut held).await;
    s.transition(id(&app), Transition::Suspend).await;
    release.send(()).unwrap();
    let released = next_of(&mut rx, "agent/dispatch/released").await;
    let lease = &released["payload"]["lease"];
    assert_eq!(lease["state"], json!("denied"), "{released}");
    assert_eq!(lease["reason"], json!("app_suspended"));
    fake.abort();
}

#[tokio::test]
async fn sqlite_suspend_races_task_hook() {
    suspend_races_task_hook("sqlite").await;
}

#[tokio::test]
async fn postgres_suspend_races_task_hook() {
    suspend_races_task_hook("postgres").await;
}

#[tokio::test]
async fn sqlite_suspend_races_dispatch_hook() {
    suspend_races_dispatch_hook("sqlite").await;
}

#[tokio::test]
async fn postgres_suspend_races_dispatch_hook() {
    suspend_races_dispatch_hook("postgres").await;
}

#[tokio::test]
async fn sqlite_suspend_races_message_hook() {
    suspend_races_message_hook("sqlite").await;
}

#[tokio::test]
async fn postgres_suspend_races_message_hook() {
    suspend_races_message_hook("postgres").await;
}
