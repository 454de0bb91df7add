//! The connect check (ADR 0023 §6, "Connect") and `events:subscribe` on
//! every path: a pending app cannot connect until installed; removing the
//! scope closes 4018 and the REST catch-up answers 403 `scope_missing`.

use switchboard::domain::installation::{Scope, ScopeSet};

use super::*;

async fn pending_install_cannot_connect(backend: &str) {
    let env = [("SWITCHBOARD_REGISTRATION__INSTALL", "pending")];
    let s = setup(backend, &env).await;
    let (app, key) = s.hub.register_app(&hooked()).await;
    assert_connect_refused(&s.hub, &key, "app_not_installed", 4012).await;
    assert_forbidden(&s.catch_up(&key).await, "app_not_installed");
    s.install(id(&app)).await;
    // No sweep needed: the connect reads the store.
    let mut socket = RawSocket::connect_app(&s.hub.ws_url(), &key).await;
    let r = socket
        .call(
            serde_json::json!(2),
            "app/identity/get",
            serde_json::json!({}),
        )
        .await;
    assert!(r.get("result").is_some(), "{r}");
    assert_eq!(s.catch_up(&key).await.0, 200);
}

async fn remove_events_subscribe_closes_4018(backend: &str) {
    let s = setup(backend, &[FAST_SWEEP]).await;
    let (app, key) = s.hub.register_app(&hooked()).await;
    let recipient = Uuid::new_v4();
    let mut fake = FakeApp::start(&s.hub, &key, recipient).await;
    assert_eq!(s.catch_up(&key).await.0, 200);
    s.set_scopes(id(&app), ScopeSet::EMPTY).await;
    assert_eq!(fake.wait_closed().await, Some(4018), "the sweep closes it");
    assert_connect_refused(&s.hub, &key, "scope_missing", 4018).await;
    assert_forbidden(&s.catch_up(&key).await, "scope_missing");
    // Consent again: it connects and catches up.
    s.set_scopes(id(&app), ScopeSet::of([Scope::EventsSubscribe]))
        .await;
    RawSocket::connect_app(&s.hub.ws_url(), &key).await;
    assert_eq!(s.catch_up(&key).await.0, 200);
}

#[tokio::test]
async fn sqlite_pending_install_cannot_connect() {
    pending_install_cannot_connect("sqlite").await;
}

#[tokio::test]
async fn postgres_pending_install_cannot_connect() {
    pending_install_cannot_connect("postgres").await;
}

#[tokio::test]
async fn sqlite_remove_events_subscribe_closes_4018() {
    remove_events_subscribe_closes_4018("sqlite").await;
}

#[tokio::test]
async fn postgres_remove_events_subscribe_closes_4018() {
    remove_events_subscribe_closes_4018("postgres").await;
}
