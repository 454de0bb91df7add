//! TestAppCommandHiddenWithoutScopeOrWrite (ADR 0027 §3): an app's command
//! is listed and invocable in a place only while the installation is
//! active, holds `commands:write`, and the app has write there; otherwise
//! it answers exactly as an unknown command, on the gateway and REST.

use reqwest::Method;
use serde_json::json;
use uuid::Uuid;

use super::{both, names, poll_manifest, setup, Setup};
use crate::support::hub::{Options, ADMIN_TOKEN};
use crate::support::raw::same_answer;
use crate::support::world::{call, grant, on_channel, principal, Member};

/// The REST invoke of `hidden` and of a random id answer the same, byte
/// for byte (status, headers, body) once the ids are swapped.
async fn same_rest_answer(s: &Setup, who: &Member, hidden: Uuid, conversation: Uuid) {
    let random = Uuid::new_v4();
    let body = json!({"conversationId": conversation, "options": {"choice": "yes"}});
    let path = |id: Uuid| format!("/api/v1/commands/{id}/invocations");
    let seen = call(
        &s.w.hub,
        Method::POST,
        &path(hidden),
        &who.key,
        Some(body.clone()),
    )
    .await;
    let unknown = call(&s.w.hub, Method::POST, &path(random), &who.key, Some(body)).await;
    assert_eq!(unknown.status, 404, "{}", unknown.body);
    let swap = |t: &str| t.replace(&hidden.to_string(), &random.to_string());
    assert_eq!(seen.status, unknown.status);
    assert_eq!(seen.headers, unknown.headers);
    assert_eq!(swap(&seen.body), unknown.body);
}

async fn assert_hidden(
    s: &Setup,
    socket: &mut crate::support::RawSocket,
    command: Uuid,
    place: Uuid,
) {
    let params =
        |id: Uuid| json!({"commandId": id, "conversationId": place, "options": {"choice": "yes"}});
    same_answer(
        socket,
        "person/command/invoke",
        "NotFoundError",
        command,
        params,
    )
    .await;
    let ask =
        |id: Uuid| json!({"commandId": id, "conversationId": place, "option": "who", "value": "a"});
    same_answer(
        socket,
        "person/command/autocomplete",
        "NotFoundError",
        command,
        ask,
    )
    .await;
    same_rest_answer(s, &s.w.alex, command, place).await;
}

async fn app_command_hidden_without_scope_or_write(options: Options) {
    let s = setup(options).await;
    let mut alex = s.w.connect(&s.w.alex).await;
    // An app whose installation lacks commands:write (the operator did
    // not consent to it): its commands exist and are never offered.
    let mut mute = poll_manifest();
    mute["name"] = json!("Mute");
    let (mute_id, mute_key) = s.w.hub.register_app(&mute).await;
    let alex_key = s.w.alex.key.clone();
    let mute_id: Uuid = mute_id.parse().unwrap();
    grant(
        &s.w.hub,
        &alex_key,
        principal(mute_id),
        on_channel(s.w.general),
        "write",
    )
    .await;
    let own = format!("/api/v1/apps/{mute_id}/commands");
    let r = call(&s.w.hub, Method::GET, &own, &mute_key, None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mute_vote: Uuid = r.json()["commands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == json!("vote"))
        .unwrap()["commandId"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let scopes = json!({"scopes": ["events:subscribe"]});
    let path = format!("/api/v1/apps/{mute_id}/installation/scopes");
    let a = call(&s.w.hub, Method::PUT, &path, ADMIN_TOKEN, Some(scopes)).await;
    assert_eq!(a.status, 200, "{}", a.body);
    let r = call(&s.w.hub, Method::GET, &own, &mute_key, None).await;
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(r.json()["error"]["reason"], json!("scope_missing"));
    let listed = s.listed(&mut alex, &s.w.alex, s.w.general).await;
    assert_eq!(names(&listed), ["find", "purge", "vote"]);
    assert!(listed.iter().all(|c| c["appId"] == json!(s.poll.id)));
    assert_hidden(&s, &mut alex, mute_vote, s.w.general).await;

    // Poll without write on escalation: hidden there, read or not.
    let vote = s.command_id("vote").await;
    assert_hidden(&s, &mut alex, vote, s.w.escalation).await;
    grant(
        &s.w.hub,
        &alex_key,
        principal(s.poll.id),
        on_channel(s.w.escalation),
        "read",
    )
    .await;
    assert!(s
        .listed(&mut alex, &s.w.alex, s.w.escalation)
        .await
        .is_empty());
    assert_hidden(&s, &mut alex, vote, s.w.escalation).await;

    // The operator takes commands:write: hidden in general too, at once.
    let scopes = json!({"scopes": ["events:subscribe"]});
    let path = format!("/api/v1/apps/{}/installation/scopes", s.poll.id);
    let a = call(&s.w.hub, Method::PUT, &path, ADMIN_TOKEN, Some(scopes)).await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(s.listed(&mut alex, &s.w.alex, s.w.general).await.is_empty());
    assert_hidden(&s, &mut alex, vote, s.w.general).await;
    // Given back, it is offered again.
    let scopes = json!({"scopes": ["commands:write", "events:subscribe"]});
    let a = call(&s.w.hub, Method::PUT, &path, ADMIN_TOKEN, Some(scopes)).await;
    assert_eq!(a.status, 200, "{}", a.body);
    let r = s
        .invoke(
            &mut alex,
            &s.w.alex,
            vote,
            s.w.general,
            json!({"choice": "yes"}),
        )
        .await;
    assert_eq!(r["result"]["accepted"], json!(true), "{r}");
}

/// Listing a place the caller cannot read is that place's not-found.
async fn a_hidden_place_lists_as_missing(options: Options) {
    let s = setup(options).await;
    let mut sam = s.w.connect(&s.w.sam).await;
    let params = |id: Uuid| json!({"conversationId": id});
    same_answer(
        &mut sam,
        "person/command/list",
        "NotFoundError",
        s.w.notes,
        params,
    )
    .await;
}

both!(
    app_command_hidden_without_scope_or_write,
    a_hidden_place_lists_as_missing
);
