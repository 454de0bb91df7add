//! A place the caller may not see answers exactly like a missing one (ADR
//! 0020 §6 `places::hidden_equals_missing`): over REST the status, headers
//! and body after swapping the two ids (both 36 characters); over the
//! gateway the frame after swapping the ids and the JSON-RPC ids. SQLite and
//! PostgreSQL.

use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

use super::{ok, send_as};
use crate::support::hub::{Options, ADMIN_TOKEN};
use crate::support::raw::same_answer;
use crate::support::world::{call, expect, grant, on_channel, principal, text, world, World};
use crate::support::TestHub;

/// `method path(id)` by `token` for `hidden` and for a random id: one answer.
async fn same_rest(
    w: &World,
    (token, method, hidden): (&str, Method, Uuid),
    path: impl Fn(Uuid) -> String,
    body: impl Fn(Uuid) -> Option<Value>,
    status: u16,
) {
    let random = Uuid::new_v4();
    let seen = call(&w.hub, method.clone(), &path(hidden), token, body(hidden)).await;
    let unknown = call(&w.hub, method.clone(), &path(random), token, body(random)).await;
    let what = format!("{method} {}", path(random));
    assert_eq!(unknown.status, status, "{what}: {}", unknown.body);
    assert_eq!(seen.status, unknown.status, "{what}");
    assert_eq!(seen.headers, unknown.headers, "{what}");
    let swapped = seen.body.replace(&hidden.to_string(), &random.to_string());
    assert_eq!(
        swapped, unknown.body,
        "{what}: a hidden id answered otherwise"
    );
}

async fn over_rest(w: &World) {
    let sam = &w.sam.key;
    let hid = w.research;
    same_rest(
        w,
        (sam, Method::GET, hid),
        |id| format!("/api/v1/spaces/{id}"),
        |_| None,
        404,
    )
    .await;
    same_rest(
        w,
        (sam, Method::GET, hid),
        |id| format!("/api/v1/spaces/{id}/channels"),
        |_| None,
        404,
    )
    .await;
    let name = |_| Some(json!({ "name": "sneak" }));
    same_rest(
        w,
        (sam, Method::POST, hid),
        |id| format!("/api/v1/spaces/{id}/channels"),
        name,
        404,
    )
    .await;
    let on_space = |id: Uuid| {
        Some(json!({ "subject": principal(w.sam.id), "place": { "spaceId": id }, "level": "read" }))
    };
    same_rest(
        w,
        (sam, Method::POST, hid),
        |_| "/api/v1/grants".into(),
        on_space,
        404,
    )
    .await;
    same_rest(
        w,
        (sam, Method::GET, hid),
        |id| format!("/api/v1/grants?spaceId={id}"),
        |_| None,
        404,
    )
    .await;

    let hid = w.notes;
    let state = |_| Some(json!({ "state": "archived" }));
    same_rest(
        w,
        (sam, Method::PATCH, hid),
        |id| format!("/api/v1/channels/{id}"),
        state,
        404,
    )
    .await;
    same_rest(
        w,
        (sam, Method::GET, hid),
        |id| format!("/api/v1/conversations/{id}"),
        |_| None,
        404,
    )
    .await;
    let messages = |id: Uuid| format!("/api/v1/conversations/{id}/messages");
    same_rest(w, (sam, Method::GET, hid), messages, |_| None, 404).await;
    let parts = |_| Some(json!({ "parts": [{ "type": "text", "text": "x" }] }));
    same_rest(w, (sam, Method::POST, hid), messages, parts, 404).await;
    same_rest(
        w,
        (sam, Method::GET, hid),
        |id| format!("/api/v1/grants?channelId={id}"),
        |_| None,
        404,
    )
    .await;
    let on_chan = |id: Uuid| {
        Some(json!({ "subject": principal(w.sam.id), "place": on_channel(id), "level": "read" }))
    };
    same_rest(
        w,
        (sam, Method::POST, hid),
        |_| "/api/v1/grants".into(),
        on_chan,
        404,
    )
    .await;

    // A grant on a place Sam cannot see.
    let path = format!("/api/v1/grants?spaceId={}", w.research);
    let v = expect(&w.hub, Method::GET, &path, ADMIN_TOKEN, None, 200).await;
    let grant_id: Uuid = v["grants"][0]["grantId"].as_str().unwrap().parse().unwrap();
    let hid = grant_id;
    same_rest(
        w,
        (sam, Method::DELETE, hid),
        |id| format!("/api/v1/grants/{id}"),
        |_| None,
        404,
    )
    .await;
    // Still there: the refusal deleted nothing.
    let v = expect(&w.hub, Method::GET, &path, ADMIN_TOKEN, None, 200).await;
    assert!(v["grants"]
        .as_array()
        .unwrap()
        .iter()
        .any(|g| g["grantId"] == json!(grant_id)));
}

async fn over_the_gateway(w: &World) {
    // Sam writes escalation; Robin's message in notes is a root Sam cannot see.
    grant(
        &w.hub,
        &w.alex.key,
        principal(w.sam.id),
        on_channel(w.escalation),
        "write",
    )
    .await;
    let mut robin = w.connect(&w.robin).await;
    let root = ok(&send_as(&mut robin, &w.robin, w.notes, "a root", json!({})).await)["message"]
        ["id"]
        .as_str()
        .unwrap()
        .parse::<Uuid>()
        .unwrap();
    let mut sam = w.connect(&w.sam).await;
    let list = |id: Uuid| json!({ "conversationId": id });
    same_answer(
        &mut sam,
        "person/message/list",
        "NotFoundError",
        w.notes,
        list,
    )
    .await;
    let send = |id: Uuid| json!({ "conversationId": id, "parts": text("x") });
    same_answer(
        &mut sam,
        "person/message/send",
        "NotFoundError",
        w.notes,
        send,
    )
    .await;
    same_answer(
        &mut sam,
        "person/typing/send",
        "NotFoundError",
        w.notes,
        list,
    )
    .await;
    let escalation = w.escalation;
    let threaded =
        |id: Uuid| json!({ "conversationId": escalation, "parts": text("x"), "threadId": id });
    same_answer(
        &mut sam,
        "person/message/send",
        "InvalidParamsError",
        root,
        threaded,
    )
    .await;
    let thread_list = |id: Uuid| json!({ "conversationId": escalation, "threadId": id });
    same_answer(
        &mut sam,
        "person/message/list",
        "InvalidParamsError",
        root,
        thread_list,
    )
    .await;
}

async fn hidden_places(options: Options) {
    let w = world(options).await;
    over_rest(&w).await;
    over_the_gateway(&w).await;
}

#[tokio::test]
async fn hidden_places_answer_like_missing_ones() {
    hidden_places(TestHub::fast_options()).await;
}

#[tokio::test]
async fn hidden_places_answer_like_missing_ones_on_postgres() {
    let options = Options {
        database_url: Some(crate::support::pg::fresh_database().await),
        ..TestHub::fast_options()
    };
    hidden_places(options).await;
}
