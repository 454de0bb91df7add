//! REST's inputs on places and messages: a bad body or cursor names its
//! field, a send takes no `Idempotency-Key`, and management reads spend
//! `default` while writes spend `write`.

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::hub::ADMIN_TOKEN;
use crate::support::world::{call, expect, grant, on_space, principal, World};
use crate::support::TestHub;

/// A bad send body or history cursor over REST is a 400 whose pointer
/// names the field, as the gateway names it.
pub(super) async fn rest_inputs_are_named(w: &World) {
    let path = format!("/api/v1/conversations/{}/messages", w.general);
    let bodies = [
        (json!({ "parts": "x" }), "/parts"),
        (
            json!({ "parts": [{ "type": "text", "text": 5 }] }),
            "/parts/0",
        ),
        (
            json!({ "parts": [{ "type": "text", "text": "x" }], "threadId": "nope" }),
            "/threadId",
        ),
        (json!({}), "/parts"),
    ];
    for (body, pointer) in bodies {
        let v = expect(
            &w.hub,
            Method::POST,
            &path,
            &w.alex.key,
            Some(body.clone()),
            400,
        )
        .await;
        let got = v["error"]["details"][0]["pointer"].as_str().unwrap_or("");
        assert!(got.starts_with(pointer), "{body}: {v}");
    }
    let above = (i64::MAX as u64) + 1;
    for cursor in ["after", "before"] {
        for value in [above.to_string(), u64::MAX.to_string()] {
            let url = format!("{path}?{cursor}={value}");
            let v = expect(&w.hub, Method::GET, &url, &w.alex.key, None, 400).await;
            let pointer = format!("/{cursor}");
            assert_eq!(v["error"]["details"][0]["pointer"], json!(pointer), "{v}");
        }
    }
    let url = format!("{path}?after={}", i64::MAX);
    expect(&w.hub, Method::GET, &url, &w.alex.key, None, 200).await;
    // A send's idempotency is its clientMsgId: the header is refused, and
    // nothing is sent.
    let before = expect(&w.hub, Method::GET, &path, &w.alex.key, None, 200).await;
    let body = json!({ "parts": [{ "type": "text", "text": "once" }], "clientMsgId": "c-1" });
    let r = w
        .hub
        .http
        .post(format!("{}{path}", w.hub.base))
        .bearer_auth(&w.alex.key)
        .header("Idempotency-Key", "k-1")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v["error"]["code"],
        json!("idempotency_key_not_taken"),
        "{v}"
    );
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("Idempotency-Key"));
    let after = expect(&w.hub, Method::GET, &path, &w.alex.key, None, 200).await;
    assert_eq!(before["messages"], after["messages"]);
    let first = expect(
        &w.hub,
        Method::POST,
        &path,
        &w.alex.key,
        Some(body.clone()),
        201,
    )
    .await;
    let again = expect(&w.hub, Method::POST, &path, &w.alex.key, Some(body), 201).await;
    assert_eq!(again["duplicate"], json!(true), "{again}");
    assert_eq!(again["message"]["id"], first["message"]["id"]);
}

/// A principal's management reads spend `default`, its writes `write`
/// (docs/protocol.md): with a write budget of 2, ten grant listings are
/// all answered, and grant writes then run out of `write`.
#[tokio::test]
async fn grant_listings_spend_default_and_grant_writes_spend_write() {
    let options = TestHub::fast_options()
        .env("SWITCHBOARD_RATELIMIT__WRITE__PER_SECOND", 1)
        .env("SWITCHBOARD_RATELIMIT__WRITE__BURST", 2);
    let hub = TestHub::start_with(options).await;
    let dana = crate::support::world::person(&hub, "Dana").await;
    let sam = crate::support::world::person(&hub, "Sam").await;
    let place = crate::support::world::space(&hub, "Ops").await;
    grant(
        &hub,
        ADMIN_TOKEN,
        principal(dana.id),
        on_space(place),
        "admin",
    )
    .await;
    let list = format!("/api/v1/grants?spaceId={place}");
    for _ in 0..10 {
        expect(&hub, Method::GET, &list, &dana.key, None, 200).await;
    }
    let body = json!({ "subject": principal(sam.id), "place": on_space(place), "level": "read" });
    for _ in 0..50 {
        let a = call(
            &hub,
            Method::POST,
            "/api/v1/grants",
            &dana.key,
            Some(body.clone()),
        )
        .await;
        if a.status == 429 {
            assert_eq!(a.json()["error"]["class"], json!("write"), "{}", a.body);
            return;
        }
        assert_eq!(a.status, 201, "{}", a.body);
    }
    panic!("grant writes never ran out of the write budget");
}
