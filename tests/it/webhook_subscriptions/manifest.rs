//! A manifest's `delivery.eventsUrl` with its `eventSubscriptions` keeps
//! one subscription in step: made at registration, changed and dropped by
//! upgrades, never by the app's REST calls.

use reqwest::Method;
use serde_json::{json, Value};

use super::{ids, World, CHANGED, SUBSCRIPTIONS};
use crate::installations::call;
use crate::support::hub::ADMIN_TOKEN;
use crate::support::{werewolf_manifest, TestHub};

fn with_events_url(url: &str, description: &str) -> Value {
    let mut m = werewolf_manifest();
    m["description"] = json!(description);
    m["delivery"] = json!({"mode": "gateway", "eventsUrl": url});
    m["eventSubscriptions"] = json!([CHANGED]);
    m
}

#[tokio::test]
async fn the_manifest_keeps_its_subscription_in_step() {
    let w = World::new(TestHub::fast_options()).await;
    let (app, key) = w
        .hub
        .register_app(&with_events_url(&w.url("/ok"), "first"))
        .await;
    let (status, listed) = call(&w.hub, Method::GET, SUBSCRIPTIONS, &key, None).await;
    assert_eq!(status, 200, "{listed}");
    let subs = listed["subscriptions"].as_array().unwrap().clone();
    assert_eq!(subs.len(), 1, "{listed}");
    assert_eq!(subs[0]["source"], json!("manifest"));
    assert_eq!(subs[0]["eventTypes"], json!([CHANGED]));
    let id = subs[0]["id"].as_str().unwrap().to_string();
    let path = format!("{SUBSCRIPTIONS}/{id}");
    let (status, refused) = call(&w.hub, Method::DELETE, &path, &key, None).await;
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["error"]["code"], json!("manifest_subscription"));

    // An upgrade to another path keeps the subscription (and its cursor)
    // and writes an event, delivered to the new URL.
    let manifest = format!("/api/v1/apps/{app}/manifest");
    let next = with_events_url(&w.url("/accepted"), "second");
    let (status, body) = call(&w.hub, Method::PUT, &manifest, ADMIN_TOKEN, Some(&next)).await;
    assert_eq!(status, 200, "{body}");
    let got = w.receiver.wait_on("/accepted", 1).await;
    let events = crate::installations::app_events(&w.hub, &key, CHANGED).await;
    assert_eq!(
        ids(&got),
        vec![events.last().unwrap()["id"].as_str().unwrap().to_string()]
    );
    let (_, listed) = call(&w.hub, Method::GET, SUBSCRIPTIONS, &key, None).await;
    assert_eq!(listed["subscriptions"][0]["id"], json!(id));
    assert!(
        w.receiver.received_on("/ok").is_empty(),
        "registration's own events came before it"
    );

    // Dropping eventsUrl drops the subscription.
    let mut plain = werewolf_manifest();
    plain["description"] = json!("third");
    let (status, body) = call(&w.hub, Method::PUT, &manifest, ADMIN_TOKEN, Some(&plain)).await;
    assert_eq!(status, 200, "{body}");
    let (_, listed) = call(&w.hub, Method::GET, SUBSCRIPTIONS, &key, None).await;
    assert_eq!(listed, json!({"subscriptions": []}));

    // A URL off the allowlist is refused at registration.
    let (status, body) = w
        .hub
        .post(
            "/api/v1/apps/register",
            &json!({"manifest": with_events_url("https://elsewhere.example.com/in", "x")}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("/delivery/eventsUrl"), "{body}");
}
