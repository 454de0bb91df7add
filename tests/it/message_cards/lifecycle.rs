//! The lifecycle's effects on cards alone (ADR 0027 §7): every card of the
//! app disabled once by a suspend, kept disabled by a resume and opened
//! again only by the app; an uninstall disabling the active ones (a used
//! card stays used and is not counted) and keeping the messages; each with
//! the audit row's count of disabled components. The seed's three
//! lifecycle tests with a command and cards on one app are
//! `tests/it/app_lifecycle.rs`.

use reqwest::Method;
use serde_json::{json, Value};

use super::{both, buttons, component_id, next, press, reason, table, ALL_SCOPES};
use crate::installations::{audit_details, operator};
use crate::support::hub::Options;

both!(
    suspend_disables_every_card_once_and_resume_keeps_them_disabled,
    uninstall_disables_the_components_and_keeps_the_messages,
);

async fn suspend_disables_every_card_once_and_resume_keeps_them_disabled(options: Options) {
    let t = table(options, ALL_SCOPES).await;
    let mut app = t.connect(&t.bot).await;
    let mut alex = t.connect(&t.alex).await;
    let first = t.post(&mut app, buttons(), "once").await["message"].clone();
    let second = t.post(&mut app, buttons(), "once_per_principal").await["message"].clone();
    for _ in 0..2 {
        next(&mut alex, "person/message/received").await;
    }
    let app_id = t.bot.id.to_string();
    let (status, body) =
        operator(&t.hub, Method::POST, &app_id, "installation/suspend", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(app.closed().await, Some((4012, "app_suspended".into())));
    // Resume: the app is back and posts a marker; up to it, Alex got
    // exactly one message.updated per card, version + 1, every component
    // disabled.
    let (status, body) = operator(&t.hub, Method::POST, &app_id, "installation/resume", None).await;
    assert_eq!(status, 200, "{body}");
    let mut app = t.connect(&t.bot).await;
    let marker = app
        .call(
            json!("m"),
            "app/message/send",
            json!({"conversationId": t.general, "parts": [{"type": "text", "text": "marker"}]}),
        )
        .await;
    let marker = marker["result"]["message"]["id"].clone();
    let mut seen = Vec::new();
    loop {
        let frame = alex.recv().await;
        let message = frame["params"]["payload"]["message"].clone();
        if frame["method"] == json!("person/message/received") && message["id"] == marker {
            break;
        }
        if frame["method"] != json!("person/message/updated") {
            continue;
        }
        assert_eq!(message["card"]["version"], json!(2), "{message}");
        for c in message["card"]["components"].as_array().unwrap() {
            assert_eq!(c["state"], json!("disabled"));
        }
        seen.push(message["id"].clone());
    }
    seen.sort_by_key(|v| v.to_string());
    let mut posted = vec![first["id"].clone(), second["id"].clone()];
    posted.sort_by_key(|v| v.to_string());
    assert_eq!(seen, posted, "exactly one update per card");
    // Two cards of two buttons: four components disabled, in the row; the
    // resume's row records none.
    assert_eq!(
        audit_details(&t.hub, &app_id, "app.suspend").await,
        [json!({"componentsDisabled": 4})]
    );
    assert_eq!(
        audit_details(&t.hub, &app_id, "app.resume").await,
        [json!(null)]
    );
    let pressed = press(
        &mut alex,
        &t.alex,
        &first["id"],
        &component_id(&first, "yes"),
        None,
    )
    .await;
    assert_eq!(reason(&pressed), json!("component_used"), "{pressed}");
    // Resumed: its components stay disabled.
    let pressed = press(
        &mut alex,
        &t.alex,
        &second["id"],
        &component_id(&second, "no"),
        None,
    )
    .await;
    assert_eq!(reason(&pressed), json!("component_used"), "{pressed}");
    let page = alex
        .call(
            json!("h"),
            "person/message/list",
            json!({ "conversationId": t.general }),
        )
        .await;
    let messages = page["result"]["messages"].as_array().unwrap();
    let cards: Vec<&Value> = messages.iter().filter(|m| !m["card"].is_null()).collect();
    assert_eq!(cards.len(), 2, "both cards are listed: {page}");
    for m in cards {
        assert_eq!(m["card"]["version"], json!(2), "{m}");
        assert_eq!(m["card"]["components"][0]["state"], json!("disabled"));
    }
    // The app may open one again: version + 1, usable.
    let yes = component_id(&second, "yes");
    let updated = app
        .call(
            json!("u"),
            "app/component/update",
            json!({"messageId": second["id"], "componentId": yes, "state": "active"}),
        )
        .await;
    assert_eq!(
        updated["result"]["message"]["card"]["version"],
        json!(3),
        "{updated}"
    );
    let pressed = press(&mut alex, &t.alex, &second["id"], &yes, None).await;
    assert_eq!(
        pressed["result"]["interaction"]["state"],
        json!("received"),
        "{pressed}"
    );
}

async fn uninstall_disables_the_components_and_keeps_the_messages(options: Options) {
    let t = table(options, ALL_SCOPES).await;
    let mut app = t.connect(&t.bot).await;
    let mut alex = t.connect(&t.alex).await;
    // A used card: its components are used, not disabled, and not counted.
    let used = t.post(&mut app, buttons(), "once").await["message"].clone();
    next(&mut alex, "person/message/received").await;
    let mut helper = t.connect(&t.helper).await;
    let no = component_id(&used, "no");
    let pressed = press(&mut helper, &t.helper, &used["id"], &no, None).await;
    assert_eq!(
        pressed["result"]["interaction"]["state"],
        json!("received"),
        "{pressed}"
    );
    let updated = next(&mut alex, "person/message/updated").await;
    assert_eq!(updated["payload"]["message"]["card"]["version"], json!(2));
    let card = t.post(&mut app, buttons(), "once").await["message"].clone();
    next(&mut alex, "person/message/received").await;
    let app_id = t.bot.id.to_string();
    let (status, body) = operator(&t.hub, Method::DELETE, &app_id, "installation", None).await;
    assert_eq!(status, 204, "{body}");
    let updated = next(&mut alex, "person/message/updated").await;
    assert_eq!(updated["payload"]["message"]["id"], card["id"]);
    assert_eq!(updated["payload"]["message"]["card"]["version"], json!(2));
    assert_eq!(
        audit_details(&t.hub, &app_id, "app.uninstall").await,
        [json!({"componentsDisabled": 2})]
    );
    // The messages stay, with their author and their text.
    let page = alex
        .call(
            json!("h"),
            "person/message/list",
            json!({ "conversationId": t.general }),
        )
        .await;
    let kept = page["result"]["messages"].as_array().unwrap();
    assert_eq!(kept.len(), 2, "{page}");
    let kept_card = kept.iter().find(|m| m["id"] == card["id"]).unwrap();
    assert_eq!(kept_card["senderId"], json!(t.bot.id));
    assert_eq!(kept_card["parts"], card["parts"]);
    assert_eq!(
        kept_card["card"]["components"][1]["state"],
        json!("disabled")
    );
    let kept_used = kept.iter().find(|m| m["id"] == used["id"]).unwrap();
    assert_eq!(kept_used["senderId"], json!(t.bot.id));
    assert_eq!(kept_used["card"]["version"], json!(2), "{kept_used}");
    assert_eq!(kept_used["card"]["components"][0]["state"], json!("used"));
}
