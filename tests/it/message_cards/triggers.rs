//! TestAppNeverTriggersAgent for cards (ADR 0027 §6, §9), the personal
//! events reaching the app only (gateway and catch-up), the dispatch job's
//! ways (ADR 0027 §4) and TestDeniedAppActionsAudited for cards.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{both, buttons, component_id, next, press, reason, table, ALL_SCOPES};
use crate::support::event_reader::rest_events;
use crate::support::hub::{Options, ADMIN_TOKEN};
use crate::support::{RawSocket, TestHub};

both!(
    a_reply_is_not_dispatchable_but_the_apps_own_prompt_is,
    interaction_events_reach_the_app_alone_live_and_on_catch_up,
    an_interactions_url_app_fails_its_interactions_url_unverified,
    card_denials_are_audited_with_their_reasons,
);

/// A task of an app with components: its conversation, the app's and the
/// agents' sockets.
async fn task_room(hub: &TestHub) -> (RawSocket, RawSocket, RawSocket, Value) {
    let manifest = json!({
        "name": "Cards",
        "description": "Posts cards into its task",
        "limits": { "maxParticipants": 2 },
        "conversations": [{ "key": "room", "name": "Room", "participantFilter": "all" }],
        "scopes": ALL_SCOPES,
        "hooks": {
            "dispatch_authorize": { "kind": "grant" },
            "message_authorize": { "kind": "forwardAllExceptSender" },
            "task_create": { "kind": "accept" }
        }
    });
    let (app_id, app_key) = hub.register_app(&manifest).await;
    let (_, a_key) = hub.register_agent("asker").await;
    let (b_id, b_key) = hub.register_agent("other").await;
    let mut asker = RawSocket::connect_agent(&hub.ws_url(), &a_key).await;
    let request = json!({"appId": app_id, "invitedAgentIds": [b_id]});
    let task = asker.call(json!(1), "agent/task/request", request).await;
    let conversation = task["result"]["conversations"][0]["id"].clone();
    assert!(conversation.is_string(), "{task}");
    let app = RawSocket::connect_app(&hub.ws_url(), &app_key).await;
    let other = RawSocket::connect_agent(&hub.ws_url(), &b_key).await;
    (app, asker, other, conversation)
}

async fn a_reply_is_not_dispatchable_but_the_apps_own_prompt_is(options: Options) {
    let hub = TestHub::start_with(options).await;
    let (mut app, mut asker, mut other, conversation) = task_room(&hub).await;
    let post = |components: Option<Value>| {
        let mut p = json!({"conversationId": conversation,
                           "parts": [{"type": "text", "text": "pick"}]});
        if let Some(c) = components {
            p["components"] = c;
        }
        p
    };
    let card = app
        .call(json!("p"), "app/message/send", post(Some(buttons())))
        .await;
    let card = card["result"]["message"].clone();
    let received = next(&mut asker, "agent/message/received").await;
    assert_eq!(received["payload"]["message"]["card"], card["card"]);
    let yes = component_id(&card, "yes");
    let pressed = press(&mut asker, &json_member("agent"), &card["id"], &yes, None).await;
    let id = pressed["result"]["interaction"]["interactionId"].clone();
    assert!(id.is_string(), "{pressed}");
    // The press reaches no agent: the other agent's next message is the
    // card's update, never an interaction or a message.
    let updated = next_message_event(&mut other).await;
    assert_eq!(
        updated["method"],
        json!("agent/message/received"),
        "{updated}"
    );
    let updated = next_message_event(&mut other).await;
    assert_eq!(
        updated["method"],
        json!("agent/message/updated"),
        "{updated}"
    );
    let answer = json!({"interactionId": id, "state": "acknowledged",
                        "reply": {"parts": [{"type": "text", "text": "noted"}]}});
    let replied = app
        .call(json!("r"), "app/interaction/respond", answer)
        .await;
    let reply = replied["result"]["message"].clone();
    assert_eq!(reply["replyToInteraction"], id, "{replied}");
    let got = next(&mut other, "agent/message/received").await;
    assert_eq!(got["payload"]["message"]["id"], reply["id"]);
    let lease = other
        .call(
            json!("d1"),
            "agent/dispatch/request",
            json!({"conversationId": conversation, "messageId": reply["id"]}),
        )
        .await;
    assert_eq!(lease["error"]["code"], json!(-32003), "{lease}");
    assert_eq!(reason(&lease), json!("app_reply"));
    // The seed-000 flow is unchanged: the app's own prompt is dispatchable.
    let prompt = app.call(json!("p2"), "app/message/send", post(None)).await;
    let prompt = prompt["result"]["message"].clone();
    let lease = other
        .call(
            json!("d2"),
            "agent/dispatch/request",
            json!({"conversationId": conversation, "messageId": prompt["id"]}),
        )
        .await;
    assert!(lease["result"]["lease"].is_object(), "{lease}");
}

/// An agent's socket's next message event (received or updated), whatever
/// else comes between; an interaction event to an agent fails the test.
async fn next_message_event(s: &mut RawSocket) -> Value {
    loop {
        let frame = s.recv().await;
        let method = frame["method"].as_str().unwrap_or_default().to_string();
        assert!(!method.contains("interaction"), "an agent got {frame}");
        if method.starts_with("agent/message/") {
            return frame;
        }
    }
}

/// A stand-in member for `press`, which needs only the key's audience.
fn json_member(audience: &str) -> crate::support::world::Member {
    crate::support::world::Member {
        id: uuid::Uuid::nil(),
        key: format!("sbk_{audience}_x"),
    }
}

async fn interaction_events_reach_the_app_alone_live_and_on_catch_up(options: Options) {
    let t = table(options, ALL_SCOPES).await;
    let mut app = t.connect(&t.bot).await;
    let mut alex = t.connect(&t.alex).await;
    let card = t.post(&mut app, buttons(), "once").await["message"].clone();
    let yes = component_id(&card, "yes");
    let pressed = press(&mut alex, &t.alex, &card["id"], &yes, None).await;
    let interaction = pressed["result"]["interaction"].clone();
    let live = next(&mut app, "app/interaction/created").await;
    assert_eq!(live["payload"]["interaction"], interaction);
    // Catch-up: the same event in the app's log.
    let (status, page) = rest_events(&t.hub, &t.bot.key, "after=0").await;
    assert_eq!(status, 200, "{page}");
    let logged: Vec<&Value> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == json!("app/interaction/created"))
        .collect();
    assert_eq!(logged.len(), 1, "{page}");
    assert_eq!(logged[0]["payload"]["interaction"], interaction);
    // A reader of the channel has the card's update, never the interaction.
    for key in [&t.sam.key, &t.alex.key, &t.helper.key] {
        let (status, page) = rest_events(&t.hub, key, "after=0").await;
        assert_eq!(status, 200, "{page}");
        let text = page.to_string();
        assert!(
            text.contains("message/updated"),
            "the card's update: {text}"
        );
        assert!(!text.contains("interaction/created"), "{text}");
        assert!(!text.contains(interaction["interactionId"].as_str().unwrap()));
    }
}

async fn an_interactions_url_app_fails_its_interactions_url_unverified(options: Options) {
    let options = options.env("SWITCHBOARD_EGRESS__ALLOWLIST", r#"["hooks.example.com"]"#);
    let t = table(options, ALL_SCOPES).await;
    let mut manifest = crate::support::werewolf_manifest();
    manifest["scopes"] = json!(ALL_SCOPES);
    manifest["delivery"] = json!({"mode": "interactions_url",
                                  "interactionsUrl": "https://hooks.example.com/i"});
    let (hook_id, hook_key) = t.hub.register_app(&manifest).await;
    let grant = json!({"subject": {"principalId": hook_id}, "place": {"channelId": t.general},
                       "level": "write"});
    let (status, body) = crate::installations::call(
        &t.hub,
        reqwest::Method::POST,
        "/api/v1/grants",
        ADMIN_TOKEN,
        Some(&grant),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let mut hook_app = RawSocket::connect_app(&t.hub.ws_url(), &hook_key).await;
    let mut alex = t.connect(&t.alex).await;
    let card = t.post(&mut hook_app, buttons(), "once").await["message"].clone();
    let pressed = press(
        &mut alex,
        &t.alex,
        &card["id"],
        &component_id(&card, "no"),
        None,
    )
    .await;
    let id = pressed["result"]["interaction"]["interactionId"].clone();
    // The job fails it, nothing sent to an unverified URL: the test waits
    // on the job's counted end (the only interaction of this hub).
    let done = "kind=\"app_interaction_dispatch\",outcome=\"done\"";
    let deadline = Instant::now() + Duration::from_secs(20);
    while t.hub.metric("switchboard_jobs_total", done).await < 1.0 {
        assert!(Instant::now() < deadline, "the job never ran");
        tokio::task::yield_now().await;
    }
    let answered = hook_app
        .call(
            json!("r"),
            "app/interaction/respond",
            json!({"interactionId": id, "state": "acknowledged"}),
        )
        .await;
    assert_eq!(
        answered["error"]["data"]["state"],
        json!("failed"),
        "{answered}"
    );
    let log = t.hub.log();
    assert!(
        log.contains("url_unverified"),
        "a warn line names the reason"
    );
    // Its check (ADR 0032) names the host it tried, never the path.
    assert!(
        !log.contains("hooks.example.com/i"),
        "the URL's path is never logged"
    );
}

async fn card_denials_are_audited_with_their_reasons(options: Options) {
    let t = table(options, ALL_SCOPES).await;
    let mut app = t.connect(&t.bot).await;
    let mut sam = t.connect(&t.sam).await;
    let mut alex = t.connect(&t.alex).await;
    let card = t.post(&mut app, json!([
        {"kind": "button", "customId": "approve", "label": "Approve", "requiredCapability": "approve_actions"},
        {"kind": "button", "customId": "admin", "label": "Admin", "restrictedTo": "owner"},
        {"kind": "button", "customId": "plain", "label": "Plain"}
    ]), "once_per_principal").await["message"].clone();
    let denied = [
        (
            press(
                &mut alex,
                &t.alex,
                &card["id"],
                &component_id(&card, "approve"),
                None,
            )
            .await,
            "capability_missing",
        ),
        (
            press(
                &mut alex,
                &t.alex,
                &card["id"],
                &component_id(&card, "admin"),
                None,
            )
            .await,
            "component_restricted",
        ),
        (
            press(
                &mut sam,
                &t.sam,
                &card["id"],
                &component_id(&card, "plain"),
                None,
            )
            .await,
            "level_insufficient",
        ),
    ];
    for (answer, why) in &denied {
        assert_eq!(reason(answer), json!(why), "{answer}");
    }
    // The app's own denials: another app's card, another's interaction.
    let mut manifest = crate::support::werewolf_manifest();
    manifest["scopes"] = json!(ALL_SCOPES);
    let (other_id, other_key) = t.hub.register_app(&manifest).await;
    let mut other = RawSocket::connect_app(&t.hub.ws_url(), &other_key).await;
    let update = other
        .call(
            json!("u"),
            "app/component/update",
            json!({"messageId": card["id"],
              "componentId": component_id(&card, "plain"), "state": "disabled"}),
        )
        .await;
    assert_eq!(update["error"]["code"], json!(-32004), "{update}");
    let respond = other
        .call(
            json!("r"),
            "app/interaction/respond",
            json!({"interactionId": uuid::Uuid::now_v7(), "state": "failed"}),
        )
        .await;
    assert_eq!(respond["error"]["code"], json!(-32004), "{respond}");
    let expected = [
        (
            t.alex.id.to_string(),
            "interaction.create",
            "capability_missing",
        ),
        (
            t.alex.id.to_string(),
            "interaction.create",
            "component_restricted",
        ),
        (
            t.sam.id.to_string(),
            "interaction.create",
            "level_insufficient",
        ),
        (other_id.clone(), "component.update", "no_grant"),
        (other_id, "interaction.respond", "no_grant"),
    ];
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, body) = crate::installations::call(
            &t.hub,
            reqwest::Method::GET,
            "/api/v1/audit",
            ADMIN_TOKEN,
            None,
        )
        .await;
        let records = body["records"].as_array().cloned().unwrap_or_default();
        let found = expected.iter().all(|(actor, action, why)| {
            records.iter().any(|r| {
                r["actorId"] == json!(actor)
                    && r["action"] == json!(action)
                    && r["reason"] == json!(why)
            })
        });
        if found {
            break;
        }
        assert!(Instant::now() < deadline, "missing audit records: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
