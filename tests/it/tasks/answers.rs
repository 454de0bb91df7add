//! Hook answers that do not decode fail closed.

use super::*;

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
