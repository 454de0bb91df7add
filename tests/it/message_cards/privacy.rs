//! ADR 0027 §10's canaries for cards: a form value and a reply text, each
//! unique, reach only the actor's answer and the app's event (the value),
//! and the app's answer and the card's readers (the reply); never the
//! hub's log (at debug), `/metrics`, the audit, an error body or another
//! principal's frames.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;

use super::{both, component_id, next, press, table, ALL_SCOPES};
use crate::installations::call;
use crate::support::event_reader::rest_events;
use crate::support::hub::{Options, ADMIN_TOKEN};

both!(form_values_and_reply_texts_reach_only_where_they_may);

const VALUE: &str = "canary-form-value-7e1d0c";
const BAD_VALUE: &str = "canary-bad-form-value-3b9a";
const REPLY: &str = "canary-reply-text-51f2aa";

async fn form_values_and_reply_texts_reach_only_where_they_may(options: Options) {
    let options = options
        .env("RUST_LOG", "debug")
        .env("SWITCHBOARD_AUDIT__FLUSH_INTERVAL_MS", 100);
    let t = table(options, ALL_SCOPES).await;
    let mut app = t.connect(&t.bot).await;
    let mut alex = t.connect(&t.alex).await;
    let mut sam = t.connect(&t.sam).await;
    let form = json!([{"kind": "form", "customId": "report", "title": "Report", "fields": [
        {"name": "note", "label": "Note", "type": "string", "required": true},
        {"name": "count", "label": "Count", "type": "integer"}
    ]}]);
    let card = t.post(&mut app, form, "once").await["message"].clone();
    let report = component_id(&card, "report");
    // A bad value is named, never echoed.
    let bad = press(
        &mut alex,
        &t.alex,
        &card["id"],
        &report,
        Some(json!({"note": "x", "count": BAD_VALUE})),
    )
    .await;
    assert_eq!(
        bad["error"]["data"]["field"],
        json!("values.count"),
        "{bad}"
    );
    assert!(!bad.to_string().contains(BAD_VALUE), "{bad}");
    // A denied one (Sam reads only) is audited without it.
    let denied = press(
        &mut sam,
        &t.sam,
        &card["id"],
        &report,
        Some(json!({"note": VALUE})),
    )
    .await;
    assert!(!denied.to_string().contains(VALUE), "{denied}");
    let pressed = press(
        &mut alex,
        &t.alex,
        &card["id"],
        &report,
        Some(json!({"note": VALUE})),
    )
    .await;
    assert_eq!(
        pressed["result"]["interaction"]["values"]["note"],
        json!(VALUE),
        "{pressed}"
    );
    let event = next(&mut app, "app/interaction/created").await;
    assert_eq!(
        event["payload"]["interaction"]["values"]["note"],
        json!(VALUE)
    );
    let id = &pressed["result"]["interaction"]["interactionId"];
    let answer = json!({"interactionId": id, "state": "acknowledged",
                        "reply": {"parts": [{"type": "text", "text": REPLY}]}});
    let replied = app
        .call(json!("r"), "app/interaction/respond", answer)
        .await;
    assert!(replied.to_string().contains(REPLY), "{replied}");
    // Sam reads the channel: the reply reaches Sam, the value does not.
    let mut frames = String::new();
    loop {
        let frame = sam.recv().await;
        frames.push_str(&frame.to_string());
        if frame["params"]["payload"]["message"]["replyToInteraction"] == *id {
            break;
        }
    }
    assert!(frames.contains(REPLY));
    assert!(!frames.contains(VALUE), "a reader got the value: {frames}");
    for key in [&t.sam.key, &t.helper.key] {
        let (status, page) = rest_events(&t.hub, key, "after=0").await;
        assert_eq!(status, 200, "{page}");
        // A stream that holds the reply (so it was read), not the value.
        let text = page.to_string();
        assert!(
            text.contains(REPLY),
            "a reader's stream lacks the reply: {page}"
        );
        assert!(!text.contains(VALUE), "{page}");
    }
    // The audit has Sam's denial, and no canary.
    let deadline = Instant::now() + Duration::from_secs(20);
    let audit = loop {
        let (_, body) = call(&t.hub, Method::GET, "/api/v1/audit", ADMIN_TOKEN, None).await;
        let text = body.to_string();
        if text.contains("interaction.create") {
            break text;
        }
        assert!(Instant::now() < deadline, "no audit record: {text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (_, metrics) = call(&t.hub, Method::GET, "/metrics", "", None).await;
    let log = t.hub.log();
    assert!(log.contains("DEBUG"), "the hub logged at debug level");
    for (output, text) in [
        ("audit", audit),
        ("metrics", metrics.to_string()),
        ("log", log),
    ] {
        for canary in [VALUE, BAD_VALUE, REPLY] {
            assert!(!text.contains(canary), "{canary} in the {output}");
        }
    }
}
