//! `v1` HMAC beside `v1a`: verified here by an independent Standard
//! Webhooks check (the `hmac` and `sha2` crates, not switchboard's code),
//! pinned to the specification's published vector; the secret is shown
//! once and, with a canary in the URL, never reaches the log or the
//! delivery log.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use reqwest::Method;
use serde_json::json;
use sha2::Sha256;

use super::{World, CHANGED, SUBSCRIPTIONS};
use crate::installations::call;
use crate::support::TestHub;

// The Standard Webhooks specification's example (standard-webhooks.com;
// the reference libraries' tests use it).
const SPEC_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const SPEC_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const SPEC_TIMESTAMP: &str = "1614265330";
const SPEC_BODY: &str = r#"{"test": 2432232314}"#;
const SPEC_SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

/// Standard Webhooks `v1`: HMAC-SHA256 over `{id}.{timestamp}.{body}` with
/// the base64 key after `whsec_`, compared against each listed `v1,`
/// signature.
fn v1_verifies(secret: &str, id: &str, timestamp: &str, body: &[u8], header: &str) -> bool {
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").unwrap())
        .unwrap();
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    let expected = format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()));
    header.split(' ').any(|s| s == expected)
}

#[test]
fn the_independent_check_agrees_with_the_specification() {
    assert!(v1_verifies(
        SPEC_SECRET,
        SPEC_ID,
        SPEC_TIMESTAMP,
        SPEC_BODY.as_bytes(),
        SPEC_SIGNATURE
    ));
    assert!(!v1_verifies(
        SPEC_SECRET,
        SPEC_ID,
        SPEC_TIMESTAMP,
        br#"{"test": 2432232315}"#,
        SPEC_SIGNATURE
    ));
}

#[tokio::test]
async fn v1_signatures_verify_and_the_secret_is_shown_once() {
    let mut w = World::new(TestHub::fast_options()).await;
    let canary = "canary-7f3a9c1e-url";
    let url = format!("{}?token={canary}", w.url("/ok"));
    let (status, created) = w
        .subscribe(json!({"url": url, "eventTypes": [CHANGED], "hmac": true}))
        .await;
    assert_eq!(status, 201, "{created}");
    let secret = created["secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("whsec_"), "{created}");
    let sub = created["subscription"]["id"].as_str().unwrap().to_string();
    assert_eq!(created["subscription"]["hmac"], json!(true));

    let event = w.event().await;
    let got = w.receiver.wait_on("/ok", 1).await;
    let r = &got[0];
    assert_eq!(r.header("webhook-id"), Some(event.as_str()));
    let header = r.header("webhook-signature").unwrap();
    assert!(header.contains("v1a,"), "v1a as well: {header}");
    assert_eq!(r.verified, Ok(()), "v1a with the published keys");
    assert!(v1_verifies(
        &secret,
        r.header("webhook-id").unwrap(),
        r.header("webhook-timestamp").unwrap(),
        &r.body,
        header
    ));
    assert!(r.header("authorization").is_none() && r.header("cookie").is_none());

    // Shown once: neither the reads nor the list carry it.
    let read = w.subscription(&sub).await;
    let (_, listed) = call(&w.hub, Method::GET, SUBSCRIPTIONS, &w.key, None).await;
    let log = w.attempts(&sub, 1).await;
    for text in [read.to_string(), listed.to_string()] {
        assert!(!text.contains(&secret[6..]), "{text}");
    }
    let log = serde_json::to_string(&log).unwrap();
    assert!(
        !log.contains(canary) && !log.contains(&secret[6..]),
        "{log}"
    );
    let (_, out, _) = w.cli(&["webhooks", "list", "--id", &sub]);
    assert!(out.contains("delivered") && out.contains("v1a+v1"), "{out}");
    assert!(
        !out.contains(canary) && !out.contains(&secret[6..]),
        "{out}"
    );
    let hub_log = w.hub.log();
    assert!(hub_log.contains("webhook attempt"), "the attempt is logged");
    assert!(!hub_log.contains(canary), "no URL query or path in the log");
    assert!(!hub_log.contains(&secret[6..]), "no secret in the log");
    let metrics = w
        .hub
        .http
        .get(format!("{}/metrics", w.hub.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!metrics.contains(canary));
}
