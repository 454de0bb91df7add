//! The operator's lifecycle over REST (ADR 0023 §3-§5): a pending app is
//! installed by the operator; suspend closes every socket of the app with
//! 4012 and resume restores its installation; withholding
//! `events:subscribe` closes with 4018; an upgrade leaves a scope it
//! requests but the operator withheld waiting for consent.

use reqwest::Method;
use serde_json::{json, Value};

use super::{app_events, both, call, described, events_scopes, operator};
use crate::support::hub::{Options, ADMIN_TOKEN};
use crate::support::{werewolf_manifest, RawSocket, TestHub};

both!(
    a_pending_app_is_installed_by_the_operator_once,
    suspend_closes_every_socket_with_4012_and_resume_restores,
    withholding_events_subscribe_closes_4018_and_an_upgrade_awaits_consent,
    an_upgrade_asking_a_new_scope_leaves_it_ungranted_until_consent,
    an_upgrade_dropping_events_subscribe_closes_4018,
);

fn pointer_and_message(body: &Value) -> (String, String) {
    let d = &body["error"]["details"][0];
    (
        d["pointer"].as_str().unwrap_or_default().to_string(),
        d["message"].as_str().unwrap_or_default().to_string(),
    )
}

/// Who may read an installation: the operator and the app itself; another
/// app's key finds no app, an agent's key is refused.
async fn check_readers(hub: &TestHub, app: &str, status_of_own: u16) {
    let (_, other_key) = hub.register_app(&werewolf_manifest()).await;
    let (_, agent_key) = hub.register_agent("nosy").await;
    let path = format!("/api/v1/apps/{app}/installation");
    let (status, body) = call(hub, Method::GET, &path, &other_key, None).await;
    assert_eq!(
        (status, body["error"]["message"].clone()),
        (404, json!("app not found")),
        "{body}"
    );
    let missing = format!("/api/v1/apps/{}/installation", uuid::Uuid::now_v7());
    let (status, same) = call(hub, Method::GET, &missing, ADMIN_TOKEN, None).await;
    assert_eq!((status, &same), (404, &body), "a missing app answers alike");
    let (status, bad) = call(
        hub,
        Method::GET,
        "/api/v1/apps/nope/installation",
        ADMIN_TOKEN,
        None,
    )
    .await;
    assert_eq!((status, &bad), (404, &body));
    let (status, body) = call(hub, Method::GET, &path, &agent_key, None).await;
    assert_eq!(status, 403, "{body}");
    let (status, _) = call(hub, Method::GET, &path, "not-a-token", None).await;
    assert_eq!(status, 401);
    let (status, _) = operator(hub, Method::GET, app, "installation", None).await;
    assert_eq!(status, status_of_own);
}

async fn a_pending_app_is_installed_by_the_operator_once(options: Options) {
    let hub =
        TestHub::start_with(options.env("SWITCHBOARD_REGISTRATION__INSTALL", "pending")).await;
    let (app, key) = hub.register_app(&werewolf_manifest()).await;
    let path = format!("/api/v1/apps/{app}/installation");
    let (status, body) = call(&hub, Method::GET, &path, ADMIN_TOKEN, None).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["message"], json!("installation not found"));
    // The pending app's own key is refused like on every route: it holds
    // no installation to act through (ADR 0023 §6, step 2b).
    let (status, body) = call(&hub, Method::GET, &path, &key, None).await;
    assert_eq!(
        (status, body["error"]["reason"].clone()),
        (403, json!("app_not_installed")),
        "{body}"
    );
    check_readers(&hub, &app, 404).await;
    for (scopes, message) in [
        (json!(["messages:write"]), "not requested by the manifest"),
        (json!(["admin:all"]), "must be one of"),
    ] {
        let body = json!({ "scopes": scopes });
        let (status, answer) =
            operator(&hub, Method::POST, &app, "installation", Some(&body)).await;
        assert_eq!(status, 400, "{answer}");
        let (pointer, said) = pointer_and_message(&answer);
        assert_eq!(pointer, "/scopes/0");
        assert!(said.starts_with(message), "{said}");
    }
    // Installed once, with an Idempotency-Key: a retry replays the answer.
    let install = || {
        hub.http
            .post(format!("{}{path}", hub.base))
            .bearer_auth(ADMIN_TOKEN)
            .header("Idempotency-Key", "install-1")
            .json(&json!({}))
            .send()
    };
    let first = install().await.unwrap();
    assert_eq!(first.status().as_u16(), 201);
    let first: Value = first.json().await.unwrap();
    let installation = &first["installation"];
    assert_eq!(installation["state"], json!("active"), "{first}");
    assert_eq!(installation["scopes"], events_scopes(true));
    assert_eq!(installation["appId"], json!(app));
    assert!(
        first.get("appKey").is_none(),
        "the app has its key: {first}"
    );
    let again = install().await.unwrap();
    assert!(again.headers().get("idempotent-replayed").is_some());
    let again: Value = again.json().await.unwrap();
    assert_eq!(
        again["installation"]["installationId"],
        installation["installationId"]
    );
    assert_eq!(again["keyWithheld"], json!(true));
    // The same key for another app is another request, not a replay.
    let (other, _) = hub.register_app(&werewolf_manifest()).await;
    let elsewhere = hub
        .http
        .post(format!("{}/api/v1/apps/{other}/installation", hub.base))
        .bearer_auth(ADMIN_TOKEN)
        .header("Idempotency-Key", "install-1")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert!(elsewhere.headers().get("idempotent-replayed").is_none());
    let elsewhere: Value = elsewhere.json().await.unwrap();
    assert_eq!(
        elsewhere["installation"]["appId"],
        json!(other),
        "{elsewhere}"
    );
    let (status, conflict) = operator(&hub, Method::POST, &app, "installation", None).await;
    assert_eq!(status, 409, "{conflict}");
    assert_eq!(conflict["error"]["code"], json!("conflict"));
    assert_eq!(conflict["error"]["state"], json!("active"));
    for bearer in [ADMIN_TOKEN, key.as_str()] {
        let (status, body) = call(&hub, Method::GET, &path, bearer, None).await;
        assert_eq!((status, &body), (200, installation), "{body}");
    }
    let told = app_events(&hub, &key, "app/installation/changed").await;
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(
        told[0]["payload"]["installationId"],
        installation["installationId"]
    );
    assert_eq!(told[0]["payload"]["scopes"], events_scopes(true));
}

async fn suspend_closes_every_socket_with_4012_and_resume_restores(options: Options) {
    let hub = TestHub::start_with(options).await;
    let (app, key) = hub.register_app(&werewolf_manifest()).await;
    let mut first = RawSocket::connect_app(&hub.ws_url(), &key).await;
    let mut second = RawSocket::connect_app(&hub.ws_url(), &key).await;
    let (_, bystander_key) = hub.register_app(&werewolf_manifest()).await;
    let mut bystander = RawSocket::connect_app(&hub.ws_url(), &bystander_key).await;

    let (status, body) = operator(&hub, Method::POST, &app, "installation/suspend", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["installation"]["state"], json!("suspended"));
    for socket in [&mut first, &mut second] {
        assert_eq!(socket.closed().await, Some((4012, "app_suspended".into())));
    }
    let ping = bystander
        .call(
            json!("p"),
            "app/task/get",
            json!({"taskId": uuid::Uuid::now_v7()}),
        )
        .await;
    assert!(
        ping.get("error").is_some(),
        "the bystander's socket still answers: {ping}"
    );
    let (status, again) = operator(&hub, Method::POST, &app, "installation/suspend", None).await;
    assert_eq!(
        (status, &again["installation"]),
        (200, &body["installation"]),
        "a repeat changes nothing"
    );
    // A suspended app's own key reads nothing and replaces nothing.
    let own = format!("/api/v1/apps/{app}/installation");
    let (status, body) = call(&hub, Method::GET, &own, &key, None).await;
    assert_eq!(
        (status, body["error"]["reason"].clone()),
        (403, json!("app_suspended")),
        "{body}"
    );
    let mut renamed = werewolf_manifest();
    renamed["name"] = json!("renamed while suspended");
    let upgrade = format!("/api/v1/apps/{app}/manifest");
    let (status, body) = call(&hub, Method::PUT, &upgrade, &key, Some(&renamed)).await;
    assert_eq!(
        (status, body["error"]["reason"].clone()),
        (403, json!("app_suspended")),
        "{body}"
    );

    let (status, body) = operator(&hub, Method::POST, &app, "installation/resume", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["installation"]["state"], json!("active"));
    assert_eq!(body["installation"]["scopes"], events_scopes(true));
    let (status, repeat) = operator(&hub, Method::POST, &app, "installation/resume", None).await;
    assert_eq!(
        (status, &repeat["installation"]),
        (200, &body["installation"])
    );
    let told = app_events(&hub, &key, "app/installation/changed").await;
    assert_eq!(
        told.len(),
        1,
        "resume tells the app; suspend does not: {told:?}"
    );
    assert_eq!(told[0]["payload"]["state"], json!("active"));
    RawSocket::connect_app(&hub.ws_url(), &key).await;
    let (status, body) = operator(
        &hub,
        Method::POST,
        &app,
        "installation/suspend",
        Some(&json!({"why": 1})),
    )
    .await;
    assert_eq!(status, 400, "{body}");
}

async fn withholding_events_subscribe_closes_4018_and_an_upgrade_awaits_consent(options: Options) {
    let hub = TestHub::start_with(options).await;
    let (app, key) = hub.register_app(&werewolf_manifest()).await;
    let mut socket = RawSocket::connect_app(&hub.ws_url(), &key).await;
    let none = json!({"scopes": []});
    let (status, body) =
        operator(&hub, Method::PUT, &app, "installation/scopes", Some(&none)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["installation"]["scopes"], events_scopes(false));
    assert_eq!(socket.closed().await, Some((4018, "scope_missing".into())));

    // The app upgrades itself: what it requests and was withheld waits.
    let path = format!("/api/v1/apps/{app}/manifest");
    let next = described("the second edition");
    let (status, body) = call(&hub, Method::PUT, &path, &key, Some(&next)).await;
    assert_eq!(status, 200, "{body}");
    let scopes = |granted: Value, awaiting: Value| json!({"requested": ["events:subscribe"], "granted": granted, "awaitingConsent": awaiting});
    assert_eq!(
        body,
        json!({"appId": app, "changed": ["/description"], "scopes": scopes(json!([]), json!(["events:subscribe"])),
               "commands": {"added": [], "changed": [], "removed": []}})
    );
    let consent = json!({"scopes": ["events:subscribe"]});
    let (status, body) = operator(
        &hub,
        Method::PUT,
        &app,
        "installation/scopes",
        Some(&consent),
    )
    .await;
    assert_eq!(
        (status, &body["installation"]["scopes"]),
        (200, &events_scopes(true)),
        "{body}"
    );
    let (status, body) = call(&hub, Method::PUT, &path, ADMIN_TOKEN, Some(&next)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["changed"], json!([]));
    assert_eq!(
        body["scopes"],
        scopes(json!(["events:subscribe"]), json!([]))
    );
    RawSocket::connect_app(&hub.ws_url(), &key).await;

    // Refusals: a manifest invalid as at registration, a scope not asked
    // for, no scopes at all, another app's key, an agent's key.
    let mut bad = werewolf_manifest();
    bad["hooks"] = json!({});
    let (status, body) = call(&hub, Method::PUT, &path, &key, Some(&bad)).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], json!("invalid_manifest"));
    assert!(pointer_and_message(&body).0.starts_with("/hooks"), "{body}");
    for (sent, pointer) in [
        (json!({"scopes": ["messages:write"]}), "/scopes/0"),
        (json!({}), "/scopes"),
    ] {
        let (status, body) =
            operator(&hub, Method::PUT, &app, "installation/scopes", Some(&sent)).await;
        assert_eq!(
            (status, pointer_and_message(&body).0.as_str()),
            (400, pointer),
            "{body}"
        );
    }
    let (_, other_key) = hub.register_app(&werewolf_manifest()).await;
    let (status, body) = call(&hub, Method::PUT, &path, &other_key, Some(&next)).await;
    assert_eq!(
        (status, body["error"]["message"].clone()),
        (404, json!("app not found"))
    );
    let (_, agent_key) = hub.register_agent("meddler").await;
    let (status, _) = call(&hub, Method::PUT, &path, &agent_key, Some(&next)).await;
    assert_eq!(status, 403);
}

/// The werewolf manifest asking for `scopes`.
fn asking(scopes: Value) -> Value {
    let mut m = werewolf_manifest();
    m["scopes"] = scopes;
    m
}

async fn an_upgrade_asking_a_new_scope_leaves_it_ungranted_until_consent(options: Options) {
    let hub = TestHub::start_with(options).await;
    let (app, key) = hub.register_app(&werewolf_manifest()).await;
    let path = format!("/api/v1/apps/{app}/manifest");
    let more = asking(json!(["events:subscribe", "messages:write"]));
    let (status, body) = call(&hub, Method::PUT, &path, &key, Some(&more)).await;
    assert_eq!(status, 200, "{body}");
    let both = json!(["messages:write", "events:subscribe"]);
    assert_eq!(body["changed"], json!(["/scopes"]));
    assert_eq!(
        body["scopes"],
        json!({"requested": both, "granted": ["events:subscribe"], "awaitingConsent": ["messages:write"]})
    );
    let (_, read) = operator(&hub, Method::GET, &app, "installation", None).await;
    assert_eq!(
        read["scopes"]["effective"],
        json!(["events:subscribe"]),
        "{read}"
    );
    let told = app_events(&hub, &key, "app/installation/changed").await;
    assert_eq!(told.len(), 1, "the upgrade tells the app: {told:?}");
    assert_eq!(told[0]["payload"]["scopes"]["requested"], both);

    let consent = json!({"scopes": ["messages:write", "events:subscribe"]});
    let (status, body) = operator(
        &hub,
        Method::PUT,
        &app,
        "installation/scopes",
        Some(&consent),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["installation"]["scopes"]["effective"], both);
    // Back to the scopeless manifest: the dropped scope is gone at once.
    let (status, body) = call(&hub, Method::PUT, &path, &key, Some(&werewolf_manifest())).await;
    assert_eq!(status, 200, "{body}");
    let events = json!(["events:subscribe"]);
    assert_eq!(
        body["scopes"],
        json!({"requested": events, "granted": events, "awaitingConsent": []})
    );
}

async fn an_upgrade_dropping_events_subscribe_closes_4018(options: Options) {
    let hub = TestHub::start_with(options).await;
    let mut quiet = werewolf_manifest();
    quiet["hooks"] = json!({
        "task_create": {"kind": "accept"},
        "message_authorize": {"kind": "forwardAllExceptSender"},
        "dispatch_authorize": {"kind": "grant"}
    });
    let (app, key) = hub.register_app(&quiet).await;
    let mut socket = RawSocket::connect_app(&hub.ws_url(), &key).await;
    quiet["scopes"] = json!([]);
    let path = format!("/api/v1/apps/{app}/manifest");
    let (status, body) = call(&hub, Method::PUT, &path, &key, Some(&quiet)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["scopes"],
        json!({"requested": [], "granted": [], "awaitingConsent": []})
    );
    assert_eq!(socket.closed().await, Some((4018, "scope_missing".into())));
}
