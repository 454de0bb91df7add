//! The app's side (ADR 0027 §5, §6): respond once (compare-and-swap), the
//! reply is the app's and not dispatchable, `components:write` gates
//! update and respond (and, missing, makes the app's components unusable),
//! and REST twins of the three routes; a reply in a channel reaches its
//! other app readers as a send does (`app/message/received`).

use reqwest::Method;
use serde_json::{json, Value};

use super::{both, buttons, component_id, next, press, reason, table, ALL_SCOPES};
use crate::installations::call;
use crate::support::hub::Options;

both!(
    a_respond_moves_once_and_its_reply_is_the_apps,
    losing_components_write_refuses_respond_and_update_and_stops_presses,
    without_components_write_a_card_posts_but_nothing_operates_it,
    the_rest_routes_answer_as_the_gateway,
    a_reply_in_a_channel_reaches_its_other_app_readers,
);

async fn a_respond_moves_once_and_its_reply_is_the_apps(options: Options) {
    let t = table(options, ALL_SCOPES).await;
    let mut app = t.connect(&t.bot).await;
    let mut alex = t.connect(&t.alex).await;
    let mut sam = t.connect(&t.sam).await;
    let card = t.post(&mut app, buttons(), "once").await["message"].clone();
    let yes = component_id(&card, "yes");
    let pressed = press(&mut alex, &t.alex, &card["id"], &yes, None).await;
    let id = pressed["result"]["interaction"]["interactionId"].clone();
    let event = next(&mut app, "app/interaction/created").await;
    assert_eq!(event["payload"]["interaction"]["interactionId"], id);
    let respond = |state: &str| {
        json!({"interactionId": id, "state": state,
               "reply": {"parts": [{"type": "text", "text": "counted"}]}})
    };
    let first = app
        .call(
            json!("r1"),
            "app/interaction/respond",
            respond("acknowledged"),
        )
        .await;
    assert_eq!(
        first["result"]["interaction"]["state"],
        json!("acknowledged"),
        "{first}"
    );
    let reply = &first["result"]["message"];
    assert_eq!(reply["origin"], json!("app"));
    assert_eq!(reply["replyToInteraction"], id);
    // The card's readers get the reply.
    loop {
        let got = next(&mut sam, "person/message/received").await;
        if got["payload"]["message"]["id"] == reply["id"] {
            break;
        }
    }
    // A second answer: 409 naming the state.
    let second = app
        .call(json!("r2"), "app/interaction/respond", respond("rejected"))
        .await;
    assert_eq!(second["error"]["code"], json!(-32009), "{second}");
    assert_eq!(second["error"]["data"]["state"], json!("acknowledged"));
    // Another app finds no such interaction.
    let mut manifest = crate::support::werewolf_manifest();
    manifest["scopes"] = json!(ALL_SCOPES);
    let (_, other_key) = t.hub.register_app(&manifest).await;
    let mut other = crate::support::RawSocket::connect(&t.hub.ws_url()).await;
    other
        .call(
            json!("c"),
            "app/network/connect",
            json!({"appKey": other_key}),
        )
        .await;
    let theirs = other
        .call(json!("r3"), "app/interaction/respond", respond("failed"))
        .await;
    assert_eq!(theirs["error"]["code"], json!(-32004), "{theirs}");
    assert_eq!(theirs["error"]["data"]["interactionId"], id);
}

/// The `app/message/received` copies of `message` in `key`'s log, read
/// over REST from the start: the reply is committed before its respond
/// answers, so a copy it writes is there at once.
async fn app_copies(t: &super::Table, key: &str, message: &Value) -> usize {
    let (status, page) = call(
        &t.hub,
        Method::GET,
        "/api/v1/events?after=0&limit=100",
        key,
        None,
    )
    .await;
    assert_eq!(status, 200, "{page}");
    page["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["type"] == json!("app/message/received") && e["payload"]["message"]["id"] == *message
        })
        .count()
}

async fn a_reply_in_a_channel_reaches_its_other_app_readers(options: Options) {
    let t = table(options, ALL_SCOPES).await;
    // Another app reads the channel and receives events.
    let mut manifest = crate::support::werewolf_manifest();
    manifest["name"] = json!("Ear");
    manifest["scopes"] = json!(["events:subscribe"]);
    let (ear_id, ear_key) = t.hub.register_app(&manifest).await;
    let ear: uuid::Uuid = ear_id.parse().unwrap();
    crate::support::world::grant(
        &t.hub,
        crate::support::hub::ADMIN_TOKEN,
        crate::support::world::principal(ear),
        crate::support::world::on_channel(t.general),
        "read",
    )
    .await;
    let mut app = t.connect(&t.bot).await;
    let mut alex = t.connect(&t.alex).await;
    let card = t.post(&mut app, buttons(), "once").await["message"].clone();
    assert_eq!(
        app_copies(&t, &ear_key, &card["id"]).await,
        1,
        "a send's copy"
    );
    let yes = component_id(&card, "yes");
    let pressed = press(&mut alex, &t.alex, &card["id"], &yes, None).await;
    let id = pressed["result"]["interaction"]["interactionId"].clone();
    next(&mut app, "app/interaction/created").await;
    let answered = app
        .call(
            json!("r"),
            "app/interaction/respond",
            json!({"interactionId": id, "state": "acknowledged",
                   "reply": {"parts": [{"type": "text", "text": "counted"}]}}),
        )
        .await;
    let reply = answered["result"]["message"]["id"].clone();
    assert!(reply.is_string(), "{answered}");
    assert_eq!(
        app_copies(&t, &ear_key, &reply).await,
        1,
        "the reply's copy, as a send's"
    );
    assert_eq!(
        app_copies(&t, &t.bot.key, &reply).await,
        0,
        "never the replying app's own"
    );
}

async fn without_components_write_a_card_posts_but_nothing_operates_it(options: Options) {
    let t = table(options, &["messages:write", "events:subscribe"]).await;
    let mut app = t.connect(&t.bot).await;
    let mut alex = t.connect(&t.alex).await;
    let card = t.post(&mut app, buttons(), "once").await["message"].clone();
    let yes = component_id(&card, "yes");
    let pressed = press(&mut alex, &t.alex, &card["id"], &yes, None).await;
    assert_eq!(pressed["error"]["code"], json!(-32009), "{pressed}");
    assert_eq!(reason(&pressed), json!("component_used"));
    let updated = app
        .call(
            json!("u"),
            "app/component/update",
            json!({"messageId": card["id"], "componentId": yes, "state": "disabled"}),
        )
        .await;
    assert_eq!(reason(&updated), json!("scope_missing"), "{updated}");
    let answered = app
        .call(
            json!("r"),
            "app/interaction/respond",
            json!({"interactionId": uuid::Uuid::now_v7(), "state": "acknowledged"}),
        )
        .await;
    assert_eq!(answered["error"]["code"], json!(-32004), "{answered}");
}

async fn the_rest_routes_answer_as_the_gateway(options: Options) {
    let t = table(options, ALL_SCOPES).await;
    let mut app = t.connect(&t.bot).await;
    let card = t.post(&mut app, buttons(), "once").await["message"].clone();
    let (yes, no) = (component_id(&card, "yes"), component_id(&card, "no"));
    let path = format!(
        "/api/v1/messages/{}/interactions",
        card["id"].as_str().unwrap()
    );
    let body = json!({ "componentId": yes });
    let (status, created) = call(&t.hub, Method::POST, &path, &t.helper.key, Some(&body)).await;
    assert_eq!(status, 201, "{created}");
    let id = created["interaction"]["interactionId"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, again) = call(
        &t.hub,
        Method::POST,
        &path,
        &t.alex.key,
        Some(&json!({"componentId": no})),
    )
    .await;
    assert_eq!(
        (status, again["error"]["code"].clone()),
        (409, json!("component_used")),
        "{again}"
    );
    let respond = format!("/api/v1/interactions/{id}/response");
    let (status, answered) = call(
        &t.hub,
        Method::POST,
        &respond,
        &t.bot.key,
        Some(&json!({"state": "rejected"})),
    )
    .await;
    assert_eq!(status, 200, "{answered}");
    assert_eq!(answered["interaction"]["state"], json!("rejected"));
    let patch = format!(
        "/api/v1/messages/{}/components/{no}",
        card["id"].as_str().unwrap()
    );
    let (status, patched) = call(
        &t.hub,
        Method::PATCH,
        &patch,
        &t.bot.key,
        Some(&json!({"label": "Nope"})),
    )
    .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(
        patched["message"]["card"]["components"][1]["label"],
        json!("Nope")
    );
    // Bad input names the field; a value never appears.
    let (status, bad) = call(
        &t.hub,
        Method::PATCH,
        &patch,
        &t.bot.key,
        Some(&json!({"label": "x".repeat(81)})),
    )
    .await;
    assert_eq!(status, 400, "{bad}");
    assert_eq!(bad["error"]["details"][0]["pointer"], json!("/label"));
    let _: Value = bad;
}

async fn losing_components_write_refuses_respond_and_update_and_stops_presses(options: Options) {
    let t = table(options, ALL_SCOPES).await;
    let mut app = t.connect(&t.bot).await;
    let mut alex = t.connect(&t.alex).await;
    let mut helper = t.connect(&t.helper).await;
    let card = t.post(&mut app, buttons(), "once_per_principal").await["message"].clone();
    let yes = component_id(&card, "yes");
    let pressed = press(&mut alex, &t.alex, &card["id"], &yes, None).await;
    let id = pressed["result"]["interaction"]["interactionId"].clone();
    assert!(id.is_string(), "{pressed}");
    let scopes = json!({"scopes": ["messages:write", "events:subscribe"]});
    let path = format!("/api/v1/apps/{}/installation/scopes", t.bot.id);
    let (status, body) = call(
        &t.hub,
        Method::PUT,
        &path,
        crate::support::hub::ADMIN_TOKEN,
        Some(&scopes),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let answered = app
        .call(
            json!("r"),
            "app/interaction/respond",
            json!({"interactionId": id, "state": "acknowledged"}),
        )
        .await;
    assert_eq!(answered["error"]["code"], json!(-32003), "{answered}");
    assert_eq!(reason(&answered), json!("scope_missing"));
    let updated = app
        .call(
            json!("u"),
            "app/component/update",
            json!({"messageId": card["id"], "componentId": yes, "state": "disabled"}),
        )
        .await;
    assert_eq!(reason(&updated), json!("scope_missing"), "{updated}");
    let late = press(&mut helper, &t.helper, &card["id"], &yes, None).await;
    assert_eq!(reason(&late), json!("component_used"), "{late}");
}
