//! Suspend and resume (ADR 0023 §5, §6): the sweep closes the app's
//! sockets 4012, its connects are refused `app_suspended`, every gate of
//! its tasks fails closed `app_suspended` without a call to the app
//! (counted `inactive`), its REST calls answer 403; resume restores.

use serde_json::json;
use switchboard::client::AgentClient;
use switchboard::domain::installation::{Actor, Transition};
use switchboard::domain::now_millis;
use switchboard::protocol::conversations::DeliveryState;
use switchboard::protocol::tasks::{
    AgentDispatchRequest, AgentTaskRequest, DispatchRequestParams, TaskRequestParams,
};

use super::*;
use crate::support::agents::{agent, next_of, send};

async fn suspend_fails_everything_closed_and_resume_restores(backend: &str) {
    let s = setup(backend, &[FAST_SWEEP]).await;
    let (app, key) = s.hub.register_app(&hooked()).await;
    let (a0, a1) = (agent(&s.hub, "a0").await, agent(&s.hub, "a1").await);
    let c0 = AgentClient::connect(&s.hub.base, &a0.key).await.unwrap();
    let c1 = AgentClient::connect(&s.hub.base, &a1.key).await.unwrap();
    let mut rx = c1.connection.notifications().unwrap();
    let mut fake = FakeApp::start(&s.hub, &key, a1.id).await;
    let request = || TaskRequestParams {
        app_id: id(&app),
        invited_agent_ids: vec![a1.id],
        initial_conversation: None,
    };
    let task = c0.call::<AgentTaskRequest>(request()).await.unwrap();
    let town = task.conversations[0].id;
    let before = send(&c0, town, "before").await;
    assert_eq!(before.delivery.state, DeliveryState::Forwarded);
    let calls_before = fake.calls().len();

    s.transition(id(&app), Transition::Suspend).await;
    assert_eq!(fake.wait_closed().await, Some(4012), "the sweep closes it");
    assert_connect_refused(&s.hub, &key, "app_suspended", 4012).await;
    assert_forbidden(&s.catch_up(&key).await, "app_suspended");

    // Every gate fails closed with app_suspended. The app has no socket
    // now (its connects are refused), so "no round trip" shows in the
    // reason and the outcome: a gate that tried to call it would fail
    // `app_unavailable` and count `unavailable`, not `inactive`.
    let blocked = send(&c0, town, "during").await;
    assert_eq!(
        blocked.delivery.state,
        DeliveryState::Blocked,
        "{blocked:?}"
    );
    assert_eq!(blocked.delivery.reason.as_deref(), Some("app_suspended"));
    c1.call::<AgentDispatchRequest>(DispatchRequestParams {
        conversation_id: town,
        message_id: before.message.id,
    })
    .await
    .unwrap();
    let released = next_of(&mut rx, "agent/dispatch/released").await;
    let lease = &released["payload"]["lease"];
    assert_eq!(lease["state"], json!("denied"), "{released}");
    assert_eq!(lease["reason"], json!("app_suspended"));
    let refused = c0.call::<AgentTaskRequest>(request()).await;
    let failed = match refused {
        Ok(task) => panic!("a suspended app's task was accepted: {task:?}"),
        Err(e) => e,
    };
    assert!(
        format!("{failed:?}").contains("app_suspended"),
        "{failed:?}"
    );
    assert_eq!(
        fake.calls().len(),
        calls_before,
        "nothing reached the closed socket"
    );
    assert!(!metrics(&s.hub).await.contains("outcome=\"unavailable\""));
    let metrics = metrics(&s.hub).await;
    for method in [
        "app/task/create",
        "app/message/authorize",
        "app/dispatch/authorize",
    ] {
        let line = format!("method=\"{method}\",outcome=\"inactive\"");
        assert!(metrics.contains(&line), "{method} inactive: {metrics}");
    }

    // Resume: it connects, its gates ask it again.
    s.transition(id(&app), Transition::Resume).await;
    let again = FakeApp::start(&s.hub, &key, a1.id).await;
    let after = send(&c0, town, "after").await;
    assert_eq!(after.delivery.state, DeliveryState::Forwarded, "{after:?}");
    assert_eq!(again.calls(), ["app/message/authorize"]);
    assert_eq!(s.catch_up(&key).await.0, 200);
}

#[tokio::test]
async fn sqlite_suspend_fails_everything_closed_and_resume_restores() {
    suspend_fails_everything_closed_and_resume_restores("sqlite").await;
}

#[tokio::test]
async fn postgres_suspend_fails_everything_closed_and_resume_restores() {
    suspend_fails_everything_closed_and_resume_restores("postgres").await;
}

/// An uninstall written elsewhere revokes the app's keys and ends its
/// installation in one commit: the sweep closes the socket 4012 (the
/// installation), never 4003 (the keys), and the old key is refused.
async fn uninstall_elsewhere_closes_4012_not_4003(backend: &str) {
    let s = setup(backend, &[FAST_SWEEP]).await;
    let (app, key) = s.hub.register_app(&hooked()).await;
    let mut fake = FakeApp::start(&s.hub, &key, Uuid::new_v4()).await;
    let live = s.store.installation(id(&app)).await.unwrap().unwrap();
    let no_events = |_: &switchboard::store::FailedTask| Vec::new();
    s.store
        .uninstall(live.id, Actor::Operator, now_millis(), &no_events)
        .await
        .unwrap();
    assert_eq!(fake.wait_closed().await, Some(4012));
    assert_eq!(s.catch_up(&key).await.0, 401, "its key is revoked");
}

#[tokio::test]
async fn sqlite_uninstall_elsewhere_closes_4012_not_4003() {
    uninstall_elsewhere_closes_4012_not_4003("sqlite").await;
}

#[tokio::test]
async fn postgres_uninstall_elsewhere_closes_4012_not_4003() {
    uninstall_elsewhere_closes_4012_not_4003("postgres").await;
}
