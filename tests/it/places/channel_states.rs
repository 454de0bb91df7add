//! Channel states bind every principal (ADR 0020 §6 `places::channel_states`):
//! read-only lets only an admin write, archived nobody, and `PATCH` reopens.

use serde_json::json;

use super::effective_levels::set_state;
use super::{list_as, ok, refused, send_as};
use crate::support::hub::ADMIN_TOKEN;
use crate::support::world::{grant, on_channel, principal, world};
use crate::support::TestHub;

#[tokio::test]
async fn read_only_lets_admins_write_and_archived_lets_nobody() {
    let w = world(TestHub::fast_options()).await;
    let general = w.general;
    // Writers of general besides Alex (admin on Support): Sam, Alex's agent
    // `helper` and the bot (its grant).
    for who in [w.sam.id, w.helper.id] {
        grant(
            &w.hub,
            &w.alex.key,
            principal(who),
            on_channel(general),
            "write",
        )
        .await;
    }
    let writers = [&w.sam, &w.helper, &w.bot];
    let mut sockets = Vec::new();
    for who in writers {
        sockets.push(w.connect(who).await);
    }
    let mut alex = w.connect(&w.alex).await;
    for (s, who) in sockets.iter_mut().zip(writers) {
        ok(&send_as(s, who, general, "open", json!({})).await);
    }

    set_state(&w.hub, &w.alex.key, general, "read_only", 200).await;
    for (s, who) in sockets.iter_mut().zip(writers) {
        let frame = send_as(s, who, general, "read only", json!({})).await;
        assert_eq!(refused(&frame, "ForbiddenError"), "channel_read_only");
        // Reading is no write: still allowed (apps have no history call).
        if who.id != w.bot.id {
            ok(&list_as(s, who, json!({ "conversationId": general })).await);
        }
    }
    ok(&send_as(&mut alex, &w.alex, general, "the admin writes", json!({})).await);
    let typing = alex
        .call(
            json!("t"),
            "person/typing/send",
            json!({ "conversationId": general }),
        )
        .await;
    ok(&typing);

    set_state(&w.hub, &w.alex.key, general, "archived", 200).await;
    for (s, who) in sockets.iter_mut().zip(writers) {
        let frame = send_as(s, who, general, "archived", json!({})).await;
        assert_eq!(refused(&frame, "ForbiddenError"), "channel_archived");
    }
    let frame = send_as(&mut alex, &w.alex, general, "archived", json!({})).await;
    assert_eq!(refused(&frame, "ForbiddenError"), "channel_archived");
    // Management works in every state: a reader may not, an admin may.
    set_state(&w.hub, &w.sam.key, general, "open", 403).await;
    set_state(&w.hub, ADMIN_TOKEN, general, "open", 200).await;
    for (s, who) in sockets.iter_mut().zip(writers) {
        ok(&send_as(s, who, general, "reopened", json!({})).await);
    }
    // The history holds every accepted message, none refused.
    let page = list_as(&mut alex, &w.alex, json!({ "conversationId": general })).await;
    let texts: Vec<String> = ok(&page)["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["parts"][0]["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        texts,
        [
            "open",
            "open",
            "open",
            "the admin writes",
            "reopened",
            "reopened",
            "reopened"
        ]
    );
}
