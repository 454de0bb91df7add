//! The scenario's app without a socket (ADR 0032): Pat invokes its command
//! with an option value canary, which goes to the app's `interactionsUrl`
//! (the scripted fake app) and nowhere else; the app's 200 answers with a
//! reply text canary, which reaches the channel's readers only. The app
//! also subscribes its `app/command/invoked` events (ADR 0033) with a `v1`
//! secret to a URL whose path is a canary: the event body (the option
//! value), the path and the `whsec_` secret reach the receiver alone.

use reqwest::Method;
use serde_json::{json, Value};

use super::{field, register, rest, Canaries, Cast, REGISTRATION_SECRET, TOKEN};
use crate::interactions_url::{jobs_done, metric_reaches};
use crate::support::receiver::Receiver;
use crate::support::TestHub;

pub const OPTION: &str = "interactions_url option value";
pub const REPLY: &str = "interactions_url reply text";
/// The path of the app's webhook subscription URL (ADR 0033): the app's
/// own, never in a log, a metric or the audit.
pub const HOOK_PATH: &str = "a webhook subscription's URL path";
/// What the subscription's `v1` secret is called among the secrets.
const HOOK_SECRET: &str = "a webhook subscription's v1 secret";

/// The hub's settings that reach `fake` (and wait briefly for it).
pub fn env(fake: &Receiver, ca: &std::path::Path) -> Vec<(String, String)> {
    let entry = format!("[\"localhost:{}\"]", fake.port());
    [
        ("SWITCHBOARD_EGRESS__ALLOWLIST", entry.clone()),
        ("SWITCHBOARD_EGRESS__PRIVATE_OVERRIDE", entry),
        (
            "SWITCHBOARD_EGRESS__EXTRA_CA_FILE",
            ca.display().to_string(),
        ),
        (
            "SWITCHBOARD_APP__INTERACTION_TIMEOUT_MS",
            "2000".to_string(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Registers the app, waits for its URL's check, lets Pat invoke its
/// command in a channel both write in, and waits for the delivery and the
/// reply. Answers every request the fake app received, as text.
pub async fn invoke(hub: &TestHub, cast: &mut Cast, c: &mut Canaries, fake: &Receiver) -> String {
    let (_, keys) = rest(hub, Method::GET, "/api/v1/webhooks/keys", "", None).await;
    let keys: Value = serde_json::from_str(&keys).unwrap();
    let keys = keys["keys"].as_array().unwrap().iter().map(|k| {
        switchboard::client::webhooks::VerificationKey::parse(k["publicKey"].as_str().unwrap())
            .unwrap()
    });
    fake.trust_keys(keys.collect());
    fake.set_reply_text(c.get(REPLY));
    let path = "/app/good/reply";
    let mut m = crate::support::werewolf_manifest();
    m["name"] = json!("Relay");
    m["hooks"] = json!({"dispatch_authorize": {"kind": "grant"},
                        "message_authorize": {"kind": "forwardAllExceptSender"},
                        "task_create": {"kind": "accept"}});
    m["scopes"] = json!(["messages:write", "commands:write", "events:subscribe"]);
    m["commands"] = json!([{"name": "relay", "description": "Relay a note", "requiredLevel": "write",
        "options": [{"name": "text", "type": "string", "description": "The note", "required": true}]}]);
    m["delivery"] =
        json!({"mode": "interactions_url", "interactionsUrl": fake.url("localhost", path)});
    let body = json!({ "manifest": m });
    let (status, text) = register(hub, "/api/v1/apps/register", REGISTRATION_SECRET, body).await;
    assert_eq!(status, 201, "{text}");
    let app = field(&text, "/appId");
    let hook = subscribe(hub, c, fake, &field(&text, "/appKey")).await;
    jobs_done(hub, "app_url_verify", 1).await;
    let body = Some(json!({"name": "desk"}));
    let (_, text) = rest(hub, Method::POST, "/api/v1/spaces", TOKEN, body).await;
    let space = field(&text, "/space/spaceId");
    let path_channels = format!("/api/v1/spaces/{space}/channels");
    let body = Some(json!({"name": "front"}));
    let (_, text) = rest(hub, Method::POST, &path_channels, TOKEN, body).await;
    let channel = field(&text, "/channel/id");
    let pat = cast
        .pat
        .call(json!("me2"), "person/identity/get", json!({}))
        .await["result"]["principalId"]
        .clone();
    for who in [pat, json!(app)] {
        let body = json!({"subject": {"principalId": who}, "place": {"channelId": channel}, "level": "write"});
        let (status, text) = rest(hub, Method::POST, "/api/v1/grants", TOKEN, Some(body)).await;
        assert_eq!(status, 201, "{text}");
    }
    let listed = format!("/api/v1/conversations/{channel}/commands");
    let (_, text) = rest(hub, Method::GET, &listed, &cast.keys.pat, None).await;
    let command = field(&text, "/commands/0/commandId");
    let params = json!({"commandId": command, "conversationId": channel,
        "options": {"text": c.get(OPTION)}});
    let r = cast
        .pat
        .call(json!("url"), "person/command/invoke", params)
        .await;
    assert_eq!(r["result"]["accepted"], json!(true), "{r}");
    let got = fake.wait_on(path, 3).await;
    assert!(
        String::from_utf8_lossy(&got[2].body).contains(c.get(OPTION)),
        "the app got the option"
    );
    // The scenario's other command was invoked once before this one.
    jobs_done(hub, "app_command_dispatch", 2).await;
    let hooked = fake.wait_on(&hook, 1).await;
    assert!(String::from_utf8_lossy(&hooked[0].body).contains(c.get(OPTION)));
    delivered(hub).await;
    got.iter()
        .chain(&hooked)
        .map(|r| format!("{:?} {}", r.headers, String::from_utf8_lossy(&r.body)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The app's subscription of its invocations, with a `v1` secret, to a
/// path that is a canary; the secret joins the secrets. Its path.
async fn subscribe(hub: &TestHub, c: &mut Canaries, fake: &Receiver, key: &str) -> String {
    let path = format!("/ok/{}", c.get(HOOK_PATH));
    let body = json!({"url": fake.url("localhost", &path),
        "eventTypes": ["app/command/invoked"], "hmac": true});
    let (status, text) = rest(
        hub,
        Method::POST,
        "/api/v1/webhooks/subscriptions",
        key,
        Some(body),
    )
    .await;
    assert_eq!(status, 201, "{text}");
    c.secret(HOOK_SECRET, &field(&text, "/secret"));
    path
}

/// The webhook attempt is recorded (and logged) before the scan.
async fn delivered(hub: &TestHub) {
    let delivered = "outcome=\"delivered\"";
    let what = "the webhook was recorded";
    metric_reaches(
        hub,
        "switchboard_webhook_attempts_total",
        delivered,
        1.0,
        what,
    )
    .await;
}
