//! TestReceiveRuleForApps and TestAppPersonalEventsReachApp over catch-up
//! (ADR 0027 §4): an invocation is the owning app's event alone, live and
//! stored; two connected apps never receive each other's; an app's key on
//! the agents' event and dispatch calls is `subject_kind_not_allowed`; the
//! catch-up of an app without `events:subscribe` is 403 `scope_missing`,
//! and what is invoked meanwhile is written all the same and read once the
//! scope is back.

use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

use super::{both, setup, Setup};
use crate::support::event_reader::rest_events;
use crate::support::hub::{Options, ADMIN_TOKEN};
use crate::support::world::{call, grant, on_channel, principal, Member};
use crate::support::{werewolf_manifest, RawSocket};

both!(receive_rule_for_apps, personal_events_reach_app_on_catch_up);

/// A second command app, Ledger (`note`), with write on `general`.
async fn ledger(s: &Setup) -> Member {
    let mut m = werewolf_manifest();
    m["name"] = json!("Ledger");
    m["scopes"] = json!(["commands:write", "events:subscribe"]);
    m["commands"] =
        json!([{"name": "note", "description": "Take a note", "requiredLevel": "write"}]);
    let (id, key) = s.w.hub.register_app(&m).await;
    let ledger = Member {
        id: id.parse().unwrap(),
        key,
    };
    let alex = s.w.alex.key.clone();
    grant(
        &s.w.hub,
        &alex,
        principal(ledger.id),
        on_channel(s.w.general),
        "write",
    )
    .await;
    ledger
}

/// The id of the command `name` as Alex is offered it in `general`.
async fn offered(s: &Setup, alex: &mut RawSocket, name: &str) -> Uuid {
    let listed = s.listed(alex, &s.w.alex, s.w.general).await;
    let found = listed
        .iter()
        .find(|c| c["name"] == json!(name))
        .unwrap_or_else(|| panic!("no {name}: {listed:?}"));
    found["commandId"].as_str().unwrap().parse().unwrap()
}

/// Alex invokes `command` in `general`: the invocation id.
async fn invoked(s: &Setup, alex: &mut RawSocket, command: Uuid, options: Value) -> Value {
    let r = s
        .invoke(alex, &s.w.alex, command, s.w.general, options)
        .await;
    assert_eq!(r["result"]["accepted"], json!(true), "{r}");
    r["result"]["invocationId"].clone()
}

/// The invocation of the next `app/command/invoked` on an app's socket.
async fn next_invocation(app: &mut RawSocket) -> Value {
    loop {
        let f = app.recv().await;
        if f["method"] == json!("app/command/invoked") {
            return f["params"]["payload"]["invocation"]["invocationId"].clone();
        }
    }
}

/// The invocation ids in an app's stored stream, by catch-up.
async fn stored(s: &Setup, key: &str) -> Vec<Value> {
    let (status, page) = rest_events(&s.w.hub, key, "after=0").await;
    assert_eq!(status, 200, "{page}");
    page["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == json!("app/command/invoked"))
        .map(|e| e["payload"]["invocation"]["invocationId"].clone())
        .collect()
}

async fn receive_rule_for_apps(options: Options) {
    let s = setup(options).await;
    let ledger = ledger(&s).await;
    let url = s.w.hub.ws_url();
    let mut poll_app = RawSocket::connect_app(&url, &s.poll.key).await;
    let mut ledger_app = RawSocket::connect_app(&url, &ledger.key).await;
    let mut alex = s.w.connect(&s.w.alex).await;
    let vote = offered(&s, &mut alex, "vote").await;
    let note = offered(&s, &mut alex, "note").await;
    // Interleaved: each app's next invocation is always its own.
    let polls = [
        invoked(&s, &mut alex, vote, json!({"choice": "yes"})).await,
        invoked(&s, &mut alex, vote, json!({"choice": "no"})).await,
    ];
    let notes = [
        invoked(&s, &mut alex, note, json!({})).await,
        invoked(&s, &mut alex, note, json!({})).await,
    ];
    let last_poll = invoked(&s, &mut alex, vote, json!({"choice": "yes"})).await;
    for id in polls.iter().chain([&last_poll]) {
        assert_eq!(next_invocation(&mut poll_app).await, *id);
    }
    for id in &notes {
        assert_eq!(next_invocation(&mut ledger_app).await, *id);
    }
    // Stored alike: each stream holds its own invocations and no other's.
    assert_eq!(
        stored(&s, &s.poll.key).await,
        [polls[0].clone(), polls[1].clone(), last_poll]
    );
    assert_eq!(stored(&s, &ledger.key).await, notes);
    // An app's key on the agents' event and dispatch calls.
    for (method, params) in [
        ("agent/event/ack", json!({"seq": 0})),
        (
            "agent/dispatch/request",
            json!({"conversationId": s.w.general, "messageId": Uuid::now_v7()}),
        ),
    ] {
        let r = poll_app.call(json!(method), method, params).await;
        assert_eq!(r["error"]["_tag"], json!("ForbiddenError"), "{r}");
        assert_eq!(
            r["error"]["data"]["reason"],
            json!("subject_kind_not_allowed"),
            "{r}"
        );
    }
    // The agent in the channel heard none of it (its stream is empty of
    // invocations; a reader of the place is not their audience).
    let (status, page) = rest_events(&s.w.hub, &s.w.helper.key, "after=0").await;
    assert_eq!(status, 200, "{page}");
    assert!(page["events"].is_array(), "{page}");
    assert!(!page.to_string().contains("app/command/invoked"), "{page}");
}

async fn personal_events_reach_app_on_catch_up(options: Options) {
    let s = setup(options).await;
    let mut alex = s.w.connect(&s.w.alex).await;
    let vote = offered(&s, &mut alex, "vote").await;
    // Poll never connected: its stream holds the invocation for it.
    let first = invoked(&s, &mut alex, vote, json!({"choice": "yes"})).await;
    let (status, page) = rest_events(&s.w.hub, &s.poll.key, "after=0").await;
    assert_eq!(status, 200, "{page}");
    let event = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == json!("app/command/invoked"))
        .unwrap_or_else(|| panic!("{page}"))
        .clone();
    assert_eq!(event["audience"], json!(s.poll.id));
    assert_eq!(event["payload"]["invocation"]["invocationId"], first);
    assert_eq!(
        event["payload"]["invocation"]["options"],
        json!({"choice": "yes"})
    );
    // Without events:subscribe the catch-up is refused; an invoke (still
    // offered: commands:write stays) is written all the same, the durable
    // record of it, and is read once the scope is back.
    let path = format!("/api/v1/apps/{}/installation/scopes", s.poll.id);
    let scopes = |list: Value| Some(json!({ "scopes": list }));
    let a = call(
        &s.w.hub,
        Method::PUT,
        &path,
        ADMIN_TOKEN,
        scopes(json!(["commands:write"])),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let (status, body) = rest_events(&s.w.hub, &s.poll.key, "after=0").await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["reason"], json!("scope_missing"), "{body}");
    let second = invoked(&s, &mut alex, vote, json!({"choice": "no"})).await;
    let a = call(
        &s.w.hub,
        Method::PUT,
        &path,
        ADMIN_TOKEN,
        scopes(json!(["commands:write", "events:subscribe"])),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(stored(&s, &s.poll.key).await, [first, second]);
}
