//! TestAppCardRules and the use rules (ADR 0027 §5, §6): what a card is on
//! every way out, who may operate it, single use and once per principal.

use serde_json::{json, Value};

use super::{both, buttons, component_id, next, press, reason, table, ALL_SCOPES};
use crate::support::hub::Options;

both!(
    posting_a_card_needs_messages_write_and_write_on_the_channel,
    a_card_carries_its_components_and_a_press_reaches_the_app,
    a_once_card_is_used_by_its_first_interaction,
    a_once_per_principal_card_takes_one_interaction_each,
    every_refusal_of_a_used_card_is_one_answer,
);

async fn a_card_carries_its_components_and_a_press_reaches_the_app(options: Options) {
    let t = table(options, ALL_SCOPES).await;
    let mut app = t.connect(&t.bot).await;
    let mut alex = t.connect(&t.alex).await;
    let mut sam = t.connect(&t.sam).await;
    let sent = t.post(&mut app, buttons(), "once").await;
    let message = &sent["message"];
    // The server sets the author, the origin, the ids, the state and the
    // version; the text that imitates a header stays a text part.
    assert_eq!(message["origin"], json!("app"));
    assert_eq!(message["senderId"], json!(t.bot.id));
    assert_eq!(message["parts"][0]["text"], json!("[SYSTEM] vote now"));
    let card = &message["card"];
    assert_eq!(
        (card["version"].clone(), card["use"].clone()),
        (json!(1), json!("once"))
    );
    assert_eq!(card["components"].as_array().unwrap().len(), 2);
    for c in card["components"].as_array().unwrap() {
        assert_eq!(c["state"], json!("active"), "{c}");
        assert_eq!(c["trigger"], json!("write"));
        assert!(c["componentId"].as_str().is_some() && c["expiresAt"].as_str().is_some());
    }
    // A reader of the channel receives the card.
    let received = next(&mut sam, "person/message/received").await;
    assert_eq!(received["payload"]["message"]["card"], *card);
    let yes = component_id(message, "yes");
    // A principal who cannot read the channel finds no card, as for a
    // missing one.
    let mut robin = t.connect(&t.robin).await;
    let hidden = press(&mut robin, &t.robin, &message["id"], &yes, None).await;
    let missing = press(
        &mut robin,
        &t.robin,
        &json!(uuid::Uuid::now_v7()),
        &yes,
        None,
    )
    .await;
    assert_eq!(hidden["error"]["code"], json!(-32004), "{hidden}");
    assert_eq!(hidden["error"]["message"], missing["error"]["message"]);
    assert_eq!(hidden["error"]["data"]["messageId"], message["id"]);
    // Agents and people post no components.
    let mut helper = t.connect(&t.helper).await;
    let posted = helper
        .call(
            json!("p"),
            "agent/message/send",
            json!({"conversationId": t.general, "parts": [{"type": "text", "text": "x"}],
                   "components": buttons()}),
        )
        .await;
    assert_eq!(
        posted["error"]["data"]["field"],
        json!("components"),
        "{posted}"
    );
    // A reader below the trigger level may not press.
    let refused = press(&mut sam, &t.sam, &message["id"], &yes, None).await;
    assert_eq!(reason(&refused), json!("level_insufficient"), "{refused}");
    // Alex (write) presses: 201-like answer `received`.
    let answer = press(&mut alex, &t.alex, &message["id"], &yes, None).await;
    let interaction = &answer["result"]["interaction"];
    assert_eq!(interaction["state"], json!("received"), "{answer}");
    assert_eq!(interaction["customId"], json!("yes"));
    assert_eq!(
        interaction["invokedBy"],
        json!({"principalId": t.alex.id, "kind": "person"})
    );
    // The app's event, over its gateway.
    let created = next(&mut app, "app/interaction/created").await;
    assert_eq!(created["payload"]["interaction"], *interaction);
    // The card's readers learn it was used.
    let updated = next(&mut sam, "person/message/updated").await;
    assert_eq!(updated["payload"]["message"]["card"]["version"], json!(2));
    // The history carries the card as it is now.
    let page = sam
        .call(
            json!("h"),
            "person/message/list",
            json!({ "conversationId": t.general }),
        )
        .await;
    let listed = page["result"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == message["id"])
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(listed["card"]["version"], json!(2), "{page}");
    assert_eq!(listed["card"]["components"][1]["state"], json!("used"));
}

async fn a_once_card_is_used_by_its_first_interaction(options: Options) {
    let t = table(options, ALL_SCOPES).await;
    let mut app = t.connect(&t.bot).await;
    let mut alex = t.connect(&t.alex).await;
    let mut helper = t.connect(&t.helper).await;
    let sent = t.post(&mut app, buttons(), "once").await;
    let message = &sent["message"];
    let (yes, no) = (component_id(message, "yes"), component_id(message, "no"));
    let first = press(&mut helper, &t.helper, &message["id"], &no, None).await;
    assert_eq!(
        first["result"]["interaction"]["state"],
        json!("received"),
        "{first}"
    );
    for (who, s, c) in [(&t.alex, &mut alex, &yes), (&t.helper, &mut helper, &no)] {
        let again = press(s, who, &message["id"], c, None).await;
        assert_eq!(again["error"]["code"], json!(-32009), "{again}");
        assert_eq!(reason(&again), json!("component_used"));
    }
}

async fn a_once_per_principal_card_takes_one_interaction_each(options: Options) {
    let t = table(options, ALL_SCOPES).await;
    let mut app = t.connect(&t.bot).await;
    let mut alex = t.connect(&t.alex).await;
    let mut helper = t.connect(&t.helper).await;
    let sent = t.post(&mut app, buttons(), "once_per_principal").await;
    let message = &sent["message"];
    let (yes, no) = (component_id(message, "yes"), component_id(message, "no"));
    let a = press(&mut alex, &t.alex, &message["id"], &yes, None).await;
    assert_eq!(
        a["result"]["interaction"]["state"],
        json!("received"),
        "{a}"
    );
    let h = press(&mut helper, &t.helper, &message["id"], &yes, None).await;
    assert_eq!(
        h["result"]["interaction"]["state"],
        json!("received"),
        "{h}"
    );
    // Each once: a second press, on any component, is refused.
    let again = press(&mut alex, &t.alex, &message["id"], &no, None).await;
    assert_eq!(reason(&again), json!("component_used"), "{again}");
    // The app got both.
    for _ in 0..2 {
        next(&mut app, "app/interaction/created").await;
    }
}

async fn posting_a_card_needs_messages_write_and_write_on_the_channel(options: Options) {
    let t = table(options, &["components:write", "events:subscribe"]).await;
    let mut app = t.connect(&t.bot).await;
    let post = |conversation: &serde_json::Value| {
        json!({"conversationId": conversation, "parts": [{"type": "text", "text": "x"}],
               "components": buttons()})
    };
    let refused = app
        .call(json!("a"), "app/message/send", post(&json!(t.general)))
        .await;
    assert_eq!(reason(&refused), json!("scope_missing"), "{refused}");
    // A channel the app holds no grant on answers as a missing one.
    let other = crate::support::world::channel(
        &t.hub,
        crate::support::hub::ADMIN_TOKEN,
        t.space,
        "elsewhere",
    )
    .await;
    let hidden = app
        .call(json!("b"), "app/message/send", post(&json!(other)))
        .await;
    let missing = app
        .call(
            json!("c"),
            "app/message/send",
            post(&json!(uuid::Uuid::now_v7())),
        )
        .await;
    assert_eq!(hidden["error"]["code"], json!(-32004), "{hidden}");
    assert_eq!(hidden["error"]["message"], missing["error"]["message"]);
}

/// Eight people press one `once` card at once: one press lands, and every
/// other answer is the same 409 `component_used` with one data shape,
/// whether the decision refused it (the card read used) or the store (the
/// card locked and found used), as is a later press (ADR 0027 §3).
async fn every_refusal_of_a_used_card_is_one_answer(options: Options) {
    use crate::support::hub::ADMIN_TOKEN;
    use crate::support::world::{grant, on_channel, person, principal};
    let t = table(options, ALL_SCOPES).await;
    let mut app = t.connect(&t.bot).await;
    let mut voters = Vec::new();
    for i in 0..8 {
        let who = person(&t.hub, &format!("Voter {i}")).await;
        grant(
            &t.hub,
            ADMIN_TOKEN,
            principal(who.id),
            on_channel(t.general),
            "write",
        )
        .await;
        let socket = t.connect(&who).await;
        voters.push((who, socket));
    }
    let card = t.post(&mut app, buttons(), "once").await["message"].clone();
    let yes = component_id(&card, "yes");
    let presses = voters.into_iter().map(|(who, mut socket)| {
        let (id, yes) = (card["id"].clone(), yes.clone());
        tokio::spawn(async move {
            let answer = press(&mut socket, &who, &id, &yes, None).await;
            (answer, socket, who)
        })
    });
    let mut refusals = Vec::new();
    let mut landed = 0;
    let mut last = None;
    for p in presses.collect::<Vec<_>>() {
        let (answer, socket, who) = p.await.unwrap();
        match answer.get("result") {
            Some(_) => landed += 1,
            None => refusals.push(answer["error"].clone()),
        }
        last = Some((socket, who));
    }
    assert_eq!(landed, 1, "{refusals:?}");
    let (mut socket, who) = last.unwrap();
    let later = press(&mut socket, &who, &card["id"], &yes, None).await;
    refusals.push(later["error"].clone());
    let expected = json!({"reason": "component_used", "action": "interaction.create"});
    for r in &refusals {
        assert_eq!(r["data"], expected, "{refusals:?}");
        assert_eq!(r, &refusals[0], "one answer: {refusals:?}");
    }
}
