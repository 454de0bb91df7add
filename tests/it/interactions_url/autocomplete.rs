//! Seed TestAppAutocomplete_InteractionsURL: the request goes to the URL
//! as an ephemeral envelope (`webhook-id` = the request's id); 200 gives
//! its choices; a delay gives none by `command.autocomplete_timeout_ms`; a
//! 202 waits for the app's answer over REST; an invalid answer gives none.

use std::time::Instant;

use reqwest::Method;
use serde_json::{json, Value};

use super::{both, script, setup, Setup, Tracker, AUTOCOMPLETE_MS};
use crate::support::hub::Options;
use crate::support::world::expect;

both!(app_autocomplete_interactions_url);

async fn ask(s: &Setup, t: &Tracker, value: &str) -> Value {
    let command = s.ticket(t).await;
    let path = format!("/api/v1/commands/{command}/autocomplete");
    let body = json!({"conversationId": s.w.general, "option": "queue", "value": value});
    let answer = expect(s.hub(), Method::POST, &path, &s.w.alex.key, Some(body), 200).await;
    answer["choices"].clone()
}

async fn app_autocomplete_interactions_url(options: Options) {
    let s = setup(options).await;
    let (choosing, _) = s.checked_tracker(&script("good", "choices"), 1).await;
    let choices = ask(&s, &choosing, "sup").await;
    assert_eq!(
        choices,
        json!([{"name": "Alpha", "value": "alpha"}, {"name": "Beta", "value": "beta"}])
    );
    let request = s.fake.received_on(&choosing.path)[2].clone();
    assert_eq!(request.verified, Ok(()));
    let event: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(event["type"], "app/command/autocomplete");
    assert_eq!(event["payload"]["value"], "sup");
    assert_eq!(event["payload"]["requestId"], event["id"]);
    assert_eq!(request.header("webhook-id"), event["id"].as_str());
    assert!(
        event.get("seq").is_none() && event["syncEpoch"].is_string(),
        "{event}"
    );

    // The app never answers: only the hub's deadline can end the wait, and
    // it does, as a timeout, with the request still open at the app.
    let (slow, _) = s.checked_tracker(&script("good", "delay"), 2).await;
    let started = Instant::now();
    assert_eq!(ask(&s, &slow, "sup").await, json!([]));
    let waited = started.elapsed().as_millis() as u64;
    assert!(
        waited >= AUTOCOMPLETE_MS - 50,
        "answered before the deadline: {waited} ms"
    );
    assert_eq!(
        s.fake.received_on(&slow.path).len(),
        3,
        "the check's two and one"
    );
    let timed_out = format!(
        "app=\"{}\",kind=\"autocomplete\",outcome=\"failed\",reason=\"timeout\"",
        slow.app.id
    );
    assert_eq!(
        s.hub()
            .metric("switchboard_interaction_deliveries_total", &timed_out)
            .await,
        1.0
    );

    let (later, _) = s.checked_tracker(&script("good", "accepted"), 3).await;
    let answering = async {
        let request = s.fake.wait_on(&later.path, 3).await[2].clone();
        let event: Value = serde_json::from_slice(&request.body).unwrap();
        let id = event["payload"]["requestId"].as_str().unwrap().to_string();
        let path = format!("/api/v1/autocomplete/{id}/answer");
        let body = json!({"choices": [{"name": "Gamma", "value": "gamma"}]});
        expect(
            s.hub(),
            Method::POST,
            &path,
            &later.app.key,
            Some(body),
            200,
        )
        .await
    };
    let (choices, accepted) = tokio::join!(ask(&s, &later, "ga"), answering);
    assert_eq!(accepted, json!({"accepted": true}));
    assert_eq!(choices, json!([{"name": "Gamma", "value": "gamma"}]));

    let (bad, _) = s.checked_tracker(&script("good", "bad-choices"), 4).await;
    assert_eq!(ask(&s, &bad, "x").await, json!([]));
    let invalid = format!(
        "app=\"{}\",kind=\"autocomplete\",outcome=\"failed\",reason=\"invalid_reply\"",
        bad.app.id
    );
    assert_eq!(
        s.hub()
            .metric("switchboard_interaction_deliveries_total", &invalid)
            .await,
        1.0
    );
}
