//! Dispatch leases: static grants, hooks that grant, deny, hold and resolve.

use super::*;

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
