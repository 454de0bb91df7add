//! Part 2, the answers that work: seed TestAppPersonalEventsReachApp_
//! InteractionsURL and TestAppInteractionViaInteractionsURL. The stored
//! event goes to the URL once, signed `v1a`, `webhook-id` its id, with the
//! `syncEpoch`; a 200's reply is written as the app in the right thread; a
//! 202 leaves the interaction `dispatched` until the app answers over
//! REST. No agent hears an invocation.

use reqwest::Method;
use serde_json::{json, Value};

use super::{
    assert_log_free_of, assert_signed_and_bare, both, jobs_done, script, setup, url_lines,
};
use crate::support::hub::Options;
use crate::support::world::{expect, grant, on_channel, principal, text};
use crate::support::RawSocket;

both!(
    app_personal_events_reach_app_interactions_url,
    app_interaction_via_interactions_url,
);

fn body(r: &crate::support::receiver::Received) -> Value {
    serde_json::from_slice(&r.body).unwrap()
}

async fn app_personal_events_reach_app_interactions_url(options: Options) {
    let s = setup(options).await;
    let hub = s.hub();
    let alex = s.w.alex.key.clone();
    grant(
        hub,
        &alex,
        principal(s.w.helper.id),
        on_channel(s.w.general),
        "write",
    )
    .await;
    let mut helper = RawSocket::connect_agent(&hub.ws_url(), &s.w.helper.key).await;
    let (t, _) = s.checked_tracker(&script("good", "reply"), 1).await;
    let root = s.root("the printer").await;
    let title = "printer-on-fire-7f3a";
    let invoked = s.invoke_in(&t, title, Some(&root)).await;
    assert_eq!(invoked["accepted"], true, "{invoked}");
    let got = s.fake.wait_on(&t.path, 3).await;
    let delivery = &got[2];
    assert_eq!(
        delivery.verified,
        Ok(()),
        "verifies with the published keys"
    );
    assert_signed_and_bare(std::slice::from_ref(delivery));
    let event = body(delivery);
    assert_eq!(event["type"], "app/command/invoked");
    assert_eq!(delivery.header("webhook-id"), event["id"].as_str());
    assert!(
        event["seq"].is_u64() && event["syncEpoch"].is_string(),
        "{event}"
    );
    let invocation = &event["payload"]["invocation"];
    assert_eq!(invocation["invocationId"], invoked["invocationId"]);
    assert_eq!(invocation["options"]["title"], title);
    jobs_done(hub, "app_command_dispatch", 1).await;
    let main = s.general_messages().await;
    assert!(
        main.iter().all(|m| m["senderId"] != json!(t.app.id)),
        "{main:?}"
    );
    let replies: Vec<Value> = s
        .thread_messages(Some(&root))
        .await
        .into_iter()
        .filter(|m| m["senderId"] == json!(t.app.id))
        .collect();
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert_eq!(replies[0]["origin"], "app");
    assert_eq!(
        replies[0]["threadId"], root["id"],
        "in the invocation's thread"
    );
    assert_eq!(replies[0]["parts"], text("ticket filed"));
    let answered = format!("app=\"{}\",kind=\"command\",outcome=\"answered\"", t.app.id);
    assert_eq!(
        hub.metric("switchboard_interaction_deliveries_total", &answered)
            .await,
        1.0
    );
    // The agent reading general hears the reply as a message, and nothing
    // of the invocation: a marker after it comes next.
    let marker = s.root("marker").await;
    loop {
        let f = helper.recv().await;
        if f.get("method").is_none() || f.get("id").is_some() {
            continue;
        }
        let text = f.to_string();
        assert!(
            !text.contains(title) && !text.contains(invoked["invocationId"].as_str().unwrap()),
            "{f}"
        );
        assert_eq!(f["method"], "agent/message/received", "{f}");
        let m = &f["params"]["payload"]["message"];
        if m["id"] == marker["id"] {
            break;
        }
        assert!(
            m["id"] == root["id"] || m["senderId"] == json!(t.app.id),
            "{f}"
        );
    }
    // A 202: deferred, no message.
    let (quiet, _) = s.checked_tracker(&script("good", "accepted"), 2).await;
    s.invoke(&quiet, "later").await;
    s.fake.wait_on(&quiet.path, 3).await;
    jobs_done(hub, "app_command_dispatch", 2).await;
    let written = s.general_messages().await;
    assert!(
        written.iter().all(|m| m["senderId"] != json!(quiet.app.id)),
        "{written:?}"
    );
    let deferred = format!(
        "app=\"{}\",kind=\"command\",outcome=\"deferred\"",
        quiet.app.id
    );
    assert_eq!(
        hub.metric("switchboard_interaction_deliveries_total", &deferred)
            .await,
        1.0
    );
    assert_log_free_of(hub, &[title, "/app/good", "ticket filed"]);
    assert_eq!(url_lines(hub).len(), 4, "one line per request");
}

async fn app_interaction_via_interactions_url(options: Options) {
    let s = setup(options).await;
    let hub = s.hub();
    // 202: dispatched, then the app answers over REST.
    let (later, _) = s.checked_tracker(&script("good", "accepted"), 1).await;
    let card = s.card(&later).await;
    let pressed = s.press(&card).await;
    let id = pressed["interactionId"].clone();
    let got = s.fake.wait_on(&later.path, 3).await;
    let event = body(&got[2]);
    assert_eq!(event["type"], "app/interaction/created");
    assert_eq!(event["payload"]["interaction"]["interactionId"], id);
    assert_eq!(got[2].header("webhook-id"), event["id"].as_str());
    assert_signed_and_bare(&got);
    jobs_done(hub, "app_interaction_dispatch", 1).await;
    assert_eq!(s.interaction(&id).await, ("dispatched".to_string(), None));
    let path = format!("/api/v1/interactions/{}/response", id.as_str().unwrap());
    let answer = json!({"state": "acknowledged", "reply": {"parts": text("closed later")}});
    let answered = expect(hub, Method::POST, &path, &later.app.key, Some(answer), 200).await;
    assert_eq!(
        answered["interaction"]["state"], "acknowledged",
        "{answered}"
    );
    assert_eq!(s.interaction(&id).await.0, "acknowledged");

    // 200 with a reply: acknowledged, the reply in the card's thread.
    let (replying, _) = s.checked_tracker(&script("good", "reply"), 2).await;
    let root = s.root("the ticket").await;
    let card = s.card_in(&replying, Some(&root)).await;
    let pressed = s.press(&card).await;
    let id = pressed["interactionId"].clone();
    jobs_done(hub, "app_interaction_dispatch", 2).await;
    assert_eq!(s.interaction(&id).await, ("acknowledged".to_string(), None));
    let replies: Vec<Value> = s
        .thread_messages(Some(&root))
        .await
        .into_iter()
        .filter(|m| m["replyToInteraction"] == id)
        .collect();
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert_eq!(replies[0]["senderId"], json!(replying.app.id));
    assert_eq!(replies[0]["origin"], "app");
    assert_eq!(replies[0]["threadId"], root["id"]);
    // The app's later respond finds the end state: the job wrote it.
    let path = format!("/api/v1/interactions/{}/response", id.as_str().unwrap());
    let again = json!({"state": "rejected"});
    let refused = expect(
        hub,
        Method::POST,
        &path,
        &replying.app.key,
        Some(again),
        409,
    )
    .await;
    assert_eq!(refused["error"]["code"], "conflict", "{refused}");
    assert_eq!(s.interaction(&id).await.0, "acknowledged");
}
