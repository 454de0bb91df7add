//! The scenario's command (ADR 0027 §10): Pat invokes the app's command in
//! a channel with an option value canary, which may reach the app alone
//! (its frames and its catch-up); a refused invoke's value reaches nobody,
//! its error naming the option only.

use reqwest::Method;
use serde_json::{json, Value};

use super::{field, rest, Canaries, Cast, TOKEN};
use crate::support::TestHub;

pub const OPTION: &str = "command option value";

/// The app's manifest gains a command (and the scope to offer it).
pub fn declare(m: &mut Value) {
    m["scopes"] = json!(["commands:write", "events:subscribe"]);
    m["commands"] = json!([{"name": "note", "description": "Take a note",
        "requiredLevel": "write",
        "options": [{"name": "text", "type": "string", "description": "The note", "required": true}]}]);
}

/// A channel where Pat and the app hold write, Pat's invokes there (one
/// accepted, two refused); the error bodies.
pub async fn invoke(hub: &TestHub, cast: &mut Cast, c: &Canaries) -> String {
    let body = Some(json!({"name": "notes"}));
    let (status, text) = rest(hub, Method::POST, "/api/v1/spaces", TOKEN, body).await;
    assert_eq!(status, 201, "{text}");
    let space = field(&text, "/space/spaceId");
    let body = Some(json!({"name": "board"}));
    let path = format!("/api/v1/spaces/{space}/channels");
    let (status, text) = rest(hub, Method::POST, &path, TOKEN, body).await;
    assert_eq!(status, 201, "{text}");
    let channel = field(&text, "/channel/id");
    let pat_id = {
        let r = cast
            .pat
            .call(json!("me"), "person/identity/get", json!({}))
            .await;
        r["result"]["principalId"].as_str().unwrap().to_string()
    };
    for who in [&pat_id, &cast.app_id] {
        let body = json!({"subject": {"principalId": who}, "place": {"channelId": channel}, "level": "write"});
        let (status, text) = rest(hub, Method::POST, "/api/v1/grants", TOKEN, Some(body)).await;
        assert_eq!(status, 201, "{text}");
    }
    let path = format!("/api/v1/conversations/{channel}/commands");
    let (status, text) = rest(hub, Method::GET, &path, &cast.keys.pat, None).await;
    assert_eq!(status, 200, "{text}");
    let command = field(&text, "/commands/0/commandId");
    let params = json!({"commandId": command, "conversationId": channel,
        "options": {"text": c.get(OPTION)}});
    let r = cast
        .pat
        .call(json!("inv"), "person/command/invoke", params)
        .await;
    assert_eq!(r["result"]["accepted"], json!(true), "{r}");
    let refused = c.get("refused command option value");
    let params = json!({"commandId": command, "conversationId": channel,
        "options": {"text": "ok", "nope": refused}});
    let r = cast
        .pat
        .call(json!("bad"), "person/command/invoke", params)
        .await;
    assert_eq!(r["error"]["data"]["field"], json!("options.nope"), "{r}");
    let body = json!({"conversationId": channel, "options": {"text": 5, "other": refused}});
    let path = format!("/api/v1/commands/{command}/invocations");
    let (status, rest_error) = rest(hub, Method::POST, &path, &cast.keys.pat, Some(body)).await;
    assert_eq!(status, 400, "{rest_error}");
    format!("{r}\n{rest_error}")
}
