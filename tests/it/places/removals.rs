//! Rights removed against a warm membership cache take effect before the
//! removal's answer (ADR 0020 §3): a deleted grant, a group member removed
//! and a person disabled. The ex-reader's next send is refused, its history
//! is the unknown conversation's 404, and a later message does not reach
//! it: the next message it receives is a direct one sent after that message
//! (live delivery is in commit order, so a fan-out would arrive first).

use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

use super::{ok, refused, send_as};
use crate::support::hub::ADMIN_TOKEN;
use crate::support::world::{
    call, expect, grant, on_channel, person, principal, world, Member, World,
};
use crate::support::{RawEvent, RawSocket, TestHub};

/// The next `person/message/received` on `s`: its text.
async fn next_received(s: &mut RawSocket) -> String {
    loop {
        let frame = s.recv().await;
        if frame["method"] == json!("person/message/received") {
            let message = &frame["params"]["payload"]["message"];
            return message["parts"][0]["text"].as_str().unwrap().to_string();
        }
    }
}

/// Alex sends `text` to general and `who` receives it: the cache entry of
/// general is warm and holds `who`.
async fn warm(w: &World, alex: &mut RawSocket, who: &mut RawSocket, text: &str) {
    ok(&send_as(alex, &w.alex, w.general, text, json!({})).await);
    assert_eq!(next_received(who).await, text);
}

/// After the removal's answer: `who`'s send and history are the unknown
/// conversation's, and Alex's next message to general does not reach it.
async fn removed(w: &World, alex: &mut RawSocket, who: &Member, s: &mut RawSocket, label: &str) {
    let frame = send_as(s, who, w.general, "still here?", json!({})).await;
    assert_eq!(refused(&frame, "NotFoundError"), "", "{label}: {frame}");
    assert_eq!(frame["error"]["message"], json!("conversation not found"));
    let history = format!("/api/v1/conversations/{}/messages", w.general);
    let v = expect(&w.hub, Method::GET, &history, &who.key, None, 404).await;
    assert_eq!(
        v["error"]["message"],
        json!("conversation not found"),
        "{label}"
    );
    ok(&send_as(alex, &w.alex, w.general, "after", json!({})).await);
    let marker = format!("marker {label}");
    let direct = direct_with(alex, who).await;
    ok(&send_as(alex, &w.alex, direct, &marker, json!({})).await);
    assert_eq!(
        next_received(s).await,
        marker,
        "{label}: a fan-out after the removal"
    );
}

async fn direct_with(alex: &mut RawSocket, who: &Member) -> Uuid {
    let params = json!({ "kind": "direct", "participants": [who.id] });
    let frame = alex
        .call(json!("d"), "person/conversation/create", params)
        .await;
    ok(&frame)["conversation"]["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn removals_take_effect_on_a_warm_cache_before_their_answer() {
    let w = world(TestHub::fast_options()).await;
    let mut alex = w.connect(&w.alex).await;

    // A grant deleted.
    let ria = person(&w.hub, "Ria").await;
    let given = grant(
        &w.hub,
        &w.alex.key,
        principal(ria.id),
        on_channel(w.general),
        "write",
    )
    .await;
    let mut s = w.connect(&ria).await;
    ok(&send_as(&mut s, &ria, w.general, "i write", json!({})).await);
    warm(&w, &mut alex, &mut s, "before the delete").await;
    let path = format!("/api/v1/grants/{}", given["grantId"].as_str().unwrap());
    expect(&w.hub, Method::DELETE, &path, &w.alex.key, None, 204).await;
    removed(&w, &mut alex, &ria, &mut s, "grant deleted").await;

    // A group member removed.
    let gus = person(&w.hub, "Gus").await;
    let body = Some(json!({ "name": "general-readers" }));
    let v = expect(
        &w.hub,
        Method::POST,
        "/api/v1/groups",
        ADMIN_TOKEN,
        body,
        201,
    )
    .await;
    let group = v["group"]["groupId"].as_str().unwrap().to_string();
    let member = format!("/api/v1/groups/{group}/members/{}", gus.id);
    expect(&w.hub, Method::PUT, &member, ADMIN_TOKEN, None, 204).await;
    let holder = json!({ "groupId": group });
    grant(&w.hub, &w.alex.key, holder, on_channel(w.general), "read").await;
    let mut s = w.connect(&gus).await;
    warm(&w, &mut alex, &mut s, "before the removal").await;
    let frame = send_as(&mut s, &gus, w.general, "a reader", json!({})).await;
    assert_eq!(refused(&frame, "ForbiddenError"), "level_insufficient");
    expect(&w.hub, Method::DELETE, &member, ADMIN_TOKEN, None, 204).await;
    removed(&w, &mut alex, &gus, &mut s, "member removed").await;

    // A person disabled: its keys are revoked and its sockets closed before
    // the answer, so it is refused before any decision, and no message sent
    // after the answer reached its socket before the close.
    let pia = person(&w.hub, "Pia").await;
    grant(
        &w.hub,
        &w.alex.key,
        principal(pia.id),
        on_channel(w.general),
        "write",
    )
    .await;
    let mut s = w.connect(&pia).await;
    warm(&w, &mut alex, &mut s, "before the disable").await;
    let disable = format!("/api/v1/people/{}/disable", pia.id);
    expect(&w.hub, Method::POST, &disable, ADMIN_TOKEN, None, 204).await;
    ok(&send_as(
        &mut alex,
        &w.alex,
        w.general,
        "after the disable",
        json!({}),
    )
    .await);
    let mut frames: Vec<Value> = Vec::new();
    let close = loop {
        match s.next_event().await {
            RawEvent::Text(frame) => frames.push(frame),
            RawEvent::Close(c) => break c,
            RawEvent::Ended => break None,
        }
    };
    assert_eq!(close.map(|c| c.0), Some(4003), "{frames:?}");
    assert!(
        !serde_json::to_string(&frames)
            .unwrap()
            .contains("after the disable"),
        "{frames:?}"
    );
    let history = format!("/api/v1/conversations/{}/messages", w.general);
    let a = call(&w.hub, Method::GET, &history, &pia.key, None).await;
    assert_eq!(a.status, 401, "{}", a.body);
    // The channel still fans out to its readers: Sam reads Support (its
    // connect replays what it missed first; the socket's deadline bounds
    // the wait).
    let mut sam = w.connect(&w.sam).await;
    ok(&send_as(&mut alex, &w.alex, w.general, "to readers", json!({})).await);
    while next_received(&mut sam).await != "to readers" {}
}
