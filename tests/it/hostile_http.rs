//! What a hostile HTTP client tries: holding connections open, slow heads
//! and bodies, cross-site form posts, ambiguous JSON, borrowed idempotency
//! keys. Each test fails on a hub without the matching defence.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::support::{RawSocket, TestHub};

fn hub_addr(hub: &TestHub) -> SocketAddr {
    hub.base
        .trim_start_matches("http://")
        .parse()
        .expect("hub address")
}

/// A TCP connection from another loopback address (all of 127/8 is local).
async fn connect_from(source: Ipv4Addr, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(SocketAddr::new(source.into(), 0))
        .expect("bind source");
    socket.connect(to).await.expect("connect")
}

/// What the hub sent before it closed the connection, if it closed it
/// within `within`.
async fn closed_by_hub(stream: &mut TcpStream, within: Duration) -> Option<Vec<u8>> {
    let mut sent = Vec::new();
    let mut buf = [0u8; 1024];
    tokio::time::timeout(within, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => sent.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .ok()?;
    Some(sent)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_idle_connections_do_not_starve_real_clients() {
    let hub = TestHub::start_with(crate::support::hub::Options {
        nofile: Some(256),
        ..TestHub::fast_options()
            .env("SWITCHBOARD_SERVER__MAX_CONNECTIONS", 120)
            .env("SWITCHBOARD_SERVER__MAX_CONNECTIONS_PER_ADDRESS", 24)
            .env("SWITCHBOARD_SERVER__HEADER_READ_TIMEOUT_MS", 2_000)
            .env("SWITCHBOARD_SERVER__BODY_READ_TIMEOUT_MS", 2_000)
    })
    .await;
    let (_, key) = hub.register_agent("real").await;
    let addr = hub_addr(&hub);

    // 320 attacking connections from four addresses: idle, half a request
    // head, or a body that stops after 2 of 100 bytes. More than the hub's
    // descriptor limit allows.
    let mut held = Vec::new();
    for a in 0..4u8 {
        let source = Ipv4Addr::new(127, 0, 0, 2 + a);
        for i in 0..80 {
            let mut s = connect_from(source, addr).await;
            let sent = match i % 3 {
                0 => Ok(()),
                1 => s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await,
                _ => {
                    s.write_all(
                        b"POST /api/v1/agents/register HTTP/1.1\r\nHost: x\r\n\
                          Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"",
                    )
                    .await
                }
            };
            // The hub may already have refused this one.
            let _ = sent;
            held.push((i % 3, s));
        }
    }
    assert!(held.len() >= 300);

    // Real clients are served within a second each, while all that is held.
    let started = Instant::now();
    let fresh = reqwest::Client::new();
    let health = tokio::time::timeout(
        Duration::from_secs(1),
        fresh.get(format!("{}/healthz", hub.base)).send(),
    )
    .await
    .expect("healthz within a second under attack")
    .expect("healthz");
    assert_eq!(health.status().as_u16(), 200);
    let mut ws = tokio::time::timeout(
        Duration::from_secs(1),
        RawSocket::connect_agent(&hub.ws_url(), &key),
    )
    .await
    .expect("a WebSocket connect within a second under attack");
    assert!(started.elapsed() < Duration::from_secs(2));

    // The hub lets go of every attacking connection: refused ones at once,
    // slow and idle ones at their timeouts.
    let mut timed_out_bodies = 0;
    for (kind, s) in held.iter_mut() {
        let sent = closed_by_hub(s, Duration::from_secs(15))
            .await
            .expect("a slow connection was still open");
        let sent = String::from_utf8_lossy(&sent);
        // Refused at once (503), a body that never came (408), or closed
        // without a word (idle, half a head).
        let status = sent.get(..12).unwrap_or("");
        assert!(
            sent.is_empty() || status == "HTTP/1.1 503" || status == "HTTP/1.1 408",
            "{sent}"
        );
        if status == "HTTP/1.1 408" {
            assert_eq!(*kind, 2, "only the slow bodies time out: {sent}");
            assert!(sent.contains("request_timeout"), "{sent}");
            timed_out_bodies += 1;
        }
    }
    assert!(timed_out_bodies > 0, "no slow body was answered 408");
    // The established WebSocket is unaffected.
    let r = ws
        .call(json!(2), "agent/network/connect", json!({"agentKey": key}))
        .await;
    assert!(r.get("error").is_some(), "already connected: {r}");
    let log = hub.log();
    assert!(!log.contains("Too many open files"), "{log}");
}

/// POSTs `body` as is, with the given Content-Type (none when `None`).
async fn post_raw(
    client: &reqwest::Client,
    url: String,
    content_type: Option<&str>,
    body: &str,
    admin: bool,
) -> (u16, serde_json::Value) {
    let mut req = client.post(url).body(body.to_string());
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    if admin {
        req = req.bearer_auth(crate::support::hub::ADMIN_TOKEN);
    }
    let r = req.send().await.expect("POST");
    let status = r.status().as_u16();
    let text = r.text().await.expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
    )
}

#[tokio::test]
async fn json_routes_require_application_json() {
    let hub = TestHub::start().await;
    let routes = [
        ("/api/v1/agents/register", r#"{"name": "x"}"#, false),
        (
            "/api/v1/apps/register",
            r#"{"manifest": {"name": "x"}}"#,
            false,
        ),
        ("/api/v1/cards", r#"{"card": {}}"#, true),
        (
            "/api/v1/webhooks/test",
            r#"{"url": "https://x.example"}"#,
            true,
        ),
    ];
    for (path, body, admin) in routes {
        for ct in [
            None,
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
        ] {
            let (status, answer) =
                post_raw(&hub.http, format!("{}{path}", hub.base), ct, body, admin).await;
            assert_eq!(status, 415, "{path} with {ct:?}: {answer}");
            assert_eq!(answer["error"]["code"], json!("unsupported_media_type"));
            assert!(
                answer["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("application/json"),
                "{answer}"
            );
        }
    }
    let (status, answer) = post_raw(
        &hub.http,
        format!("{}/api/v1/agents/register", hub.base),
        Some("application/json; charset=utf-8"),
        r#"{"name": "x"}"#,
        false,
    )
    .await;
    assert_eq!(status, 201, "{answer}");
}

#[tokio::test]
async fn duplicate_keys_in_rest_bodies_are_refused_with_their_path() {
    let hub = TestHub::start().await;
    let cases = [
        (
            "/api/v1/agents/register",
            r#"{"name": "a", "name": "b"}"#,
            "/name",
            false,
        ),
        (
            "/api/v1/apps/register",
            r#"{"manifest": {"name": "A", "description": "d", "name": "B"}}"#,
            "/manifest/name",
            false,
        ),
        (
            "/api/v1/webhooks/test",
            r#"{"url": "https://a.example", "url": "https://b.example"}"#,
            "/url",
            true,
        ),
        (
            "/api/v1/cards",
            r#"{"card": {"x": [1, {"k": 1, "k": 2}]}}"#,
            "/card/x/1/k",
            true,
        ),
    ];
    for (path, body, pointer, admin) in cases {
        let (status, answer) = post_raw(
            &hub.http,
            format!("{}{path}", hub.base),
            Some("application/json"),
            body,
            admin,
        )
        .await;
        assert_eq!(status, 400, "{path}: {answer}");
        assert_eq!(answer["error"]["code"], json!("duplicate_key"), "{answer}");
        assert_eq!(
            answer["error"]["details"][0]["pointer"],
            json!(pointer),
            "{answer}"
        );
    }
}

#[tokio::test]
async fn an_idempotency_key_never_answers_another_clients_request() {
    let hub = TestHub::start().await;
    let register = |client: reqwest::Client| {
        let url = format!("{}/api/v1/agents/register", hub.base);
        async move {
            let r = client
                .post(url)
                .header("idempotency-key", "shared-key-1")
                .json(&json!({"name": "twin"}))
                .send()
                .await
                .unwrap();
            let replayed = r.headers().contains_key("idempotent-replayed");
            let status = r.status().as_u16();
            (
                status,
                replayed,
                r.json::<serde_json::Value>().await.unwrap(),
            )
        }
    };
    let here = reqwest::Client::new();
    let elsewhere = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from(Ipv4Addr::new(127, 0, 0, 2)))
        .build()
        .unwrap();
    let (status, replayed, first) = register(here.clone()).await;
    assert_eq!((status, replayed), (201, false), "{first}");
    // The same client retrying gets its own answer back.
    let (_, replayed, retry) = register(here).await;
    assert!(replayed);
    assert_eq!(retry["agentId"], first["agentId"]);
    // Another client with the same key gets an agent of its own.
    let (status, replayed, other) = register(elsewhere).await;
    assert_eq!((status, replayed), (201, false), "{other}");
    assert_ne!(other["agentId"], first["agentId"]);
    assert!(other["agentKey"].is_string(), "{other}");
}

#[tokio::test]
async fn a_405_says_which_methods_the_route_allows() {
    let hub = TestHub::start().await;
    let r = hub
        .http
        .delete(format!("{}/healthz", hub.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 405);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], json!("method_not_allowed"));
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("DELETE") && message.contains("GET"),
        "{body}"
    );
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive() {
    let hub = TestHub::start().await;
    let (_, key) = hub.register_agent("casual").await;
    let r = hub
        .http
        .post(format!("{}/api/v1/keys/rotate", hub.base))
        .header("authorization", format!("bearer {key}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let missing = "00000000-0000-0000-0000-000000000000";
    let r = hub
        .http
        .post(format!("{}/api/v1/apps/{missing}/ping", hub.base))
        .header(
            "authorization",
            format!("BEARER {}", crate::support::hub::ADMIN_TOKEN),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404, "the operator token was accepted");
}

#[tokio::test]
async fn query_string_errors_name_the_parameter_in_our_words() {
    let hub = TestHub::start().await;
    let missing = "00000000-0000-0000-0000-000000000000";
    for (query, field) in [
        ("timeoutMs=abc", "timeoutMs"),
        ("bogus=1", "bogus"),
        // Both values are in bounds: taking either would be a guess.
        ("timeoutMs=1000&timeoutMs=2000", "timeoutMs"),
    ] {
        let r = hub
            .http
            .post(format!("{}/api/v1/apps/{missing}/ping?{query}", hub.base))
            .bearer_auth(crate::support::hub::ADMIN_TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 400);
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], json!("invalid_query"), "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(field) && !message.contains("Failed to deserialize"),
            "{body}"
        );
        assert_eq!(
            body["error"]["details"][0]["pointer"],
            json!(format!("/{field}")),
            "{body}"
        );
    }
}

#[tokio::test]
async fn the_webhook_test_checks_the_url_before_the_signing_key() {
    let hub = TestHub::start().await;
    let r = hub
        .http
        .post(format!("{}/api/v1/webhooks/test", hub.base))
        .bearer_auth(crate::support::hub::ADMIN_TOKEN)
        .json(&json!({"url": "not a url"}))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], json!("invalid_url"), "{body}");
    assert_eq!(body["error"]["details"][0]["pointer"], json!("/url"));
}

#[tokio::test]
async fn refused_bearer_keys_spend_the_addresss_budget_shared_with_connects() {
    // One refusal back a minute: none comes back while the test runs.
    let hub = TestHub::start_with(
        crate::support::hub::Options::default()
            .env("SWITCHBOARD_GATEWAY__FAILED_CONNECTS_REFILL_PER_MINUTE", 1),
    )
    .await;
    let (_, key) = hub.register_agent("legit").await;
    let events = |client: reqwest::Client, key: String| {
        let url = format!("{}/api/v1/events", hub.base);
        async move {
            let r = client.get(url).bearer_auth(key).send().await.unwrap();
            (
                r.status().as_u16(),
                r.json::<serde_json::Value>().await.unwrap(),
            )
        }
    };
    let wrong =
        "sbk_agent_0000000000000000_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA".to_string();
    for _ in 0..20 {
        let (status, body) = events(hub.http.clone(), wrong.clone()).await;
        assert_eq!(status, 401, "{body}");
    }
    // Spent: even the right key is not looked up from this address now.
    let (status, body) = events(hub.http.clone(), key.clone()).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], json!("rate_limited"));
    assert!(
        body["error"]["retryAfterMs"].as_u64().unwrap() > 0,
        "{body}"
    );
    let mut ws = RawSocket::connect(&hub.ws_url()).await;
    let r = ws
        .call(json!(1), "agent/network/connect", json!({"agentKey": key}))
        .await;
    assert_eq!(
        r["error"]["code"],
        json!(-32029),
        "the budget is shared: {r}"
    );
    // Another address is served.
    let elsewhere = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from(Ipv4Addr::new(127, 0, 0, 3)))
        .build()
        .unwrap();
    let (status, body) = events(elsewhere, key).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn wrong_registration_secrets_and_operator_tokens_spend_the_addresss_budget() {
    // One refusal back a minute: none comes back while the test runs.
    let hub = TestHub::start_with(
        crate::support::hub::Options::default()
            .env("SWITCHBOARD_REGISTRATION__MODE", "secret")
            .env("SWITCHBOARD_REGISTRATION__SECRET", "invite-only-secret-42")
            .env("SWITCHBOARD_GATEWAY__FAILED_CONNECTS_REFILL_PER_MINUTE", 1),
    )
    .await;
    let from = |last: u8| {
        reqwest::Client::builder()
            .local_address(std::net::IpAddr::from(Ipv4Addr::new(127, 0, 0, last)))
            .build()
            .unwrap()
    };
    let register = |client: reqwest::Client, secret: &'static str| {
        let url = format!("{}/api/v1/agents/register", hub.base);
        let request = client
            .post(url)
            .header("x-registration-secret", secret)
            .json(&json!({"name": "guess"}));
        status_and_body(request)
    };
    let guesser = from(2);
    for _ in 0..20 {
        let (status, body) = register(guesser.clone(), "a-wrong-guess-0000").await;
        assert_eq!(status, 401, "{body}");
    }
    let (status, body) = register(guesser.clone(), "invite-only-secret-42").await;
    assert_eq!(status, 429, "spent: the secret is not compared now: {body}");
    assert_eq!(body["error"]["code"], json!("rate_limited"));
    let (status, body) = register(from(3), "invite-only-secret-42").await;
    assert_eq!(status, 201, "another address registers: {body}");

    let test_webhook = |client: reqwest::Client, token: &'static str| {
        let url = format!("{}/api/v1/webhooks/test", hub.base);
        let request = client
            .post(url)
            .bearer_auth(token)
            .json(&json!({"url": "https://receiver.example/hook"}));
        status_and_body(request)
    };
    let guesser = from(4);
    for _ in 0..20 {
        let (status, body) = test_webhook(guesser.clone(), "not-the-operator-token").await;
        assert_eq!(status, 401, "{body}");
    }
    let (status, body) = test_webhook(guesser, crate::support::hub::ADMIN_TOKEN).await;
    assert_eq!(status, 429, "spent: the token is not compared now: {body}");
    assert_eq!(body["error"]["code"], json!("rate_limited"));
    let (status, body) = test_webhook(from(5), crate::support::hub::ADMIN_TOKEN).await;
    assert_ne!(status, 429, "another address is served: {body}");
    assert_ne!(status, 401, "another address is served: {body}");

    // Requests that present no secret and no token (what a web page can
    // send cross-site without a preflight) guess nothing and spend nothing.
    let page = from(6);
    for _ in 0..30 {
        let r = page
            .post(format!("{}/api/v1/agents/register", hub.base))
            .header("content-type", "text/plain")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 401);
        let r = page
            .post(format!("{}/api/v1/webhooks/test", hub.base))
            .header("content-type", "text/plain")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 401);
    }
    let (status, body) = register(page.clone(), "invite-only-secret-42").await;
    assert_eq!(status, 201, "the address's budget is whole: {body}");
    let (status, body) = test_webhook(page, crate::support::hub::ADMIN_TOKEN).await;
    assert_ne!(status, 429, "the address's budget is whole: {body}");
}

#[tokio::test]
async fn a_closed_or_secret_hub_checks_the_mode_before_reading_the_body() {
    for (mode, status, code) in [
        ("closed", 403, "registration_closed"),
        ("secret", 401, "registration_secret_required"),
    ] {
        let hub = TestHub::start_with(
            crate::support::hub::Options::default()
                .env("SWITCHBOARD_REGISTRATION__MODE", mode)
                .env("SWITCHBOARD_REGISTRATION__SECRET", "invite-only-secret-42"),
        )
        .await;
        // Not JSON, and not even labelled as JSON: a stranger's body is
        // never looked at.
        let r = hub
            .http
            .post(format!("{}/api/v1/agents/register", hub.base))
            .header("content-type", "text/plain")
            .body("{{{ not json")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), status, "{mode}");
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], json!(code), "{mode}: {body}");
    }
}

#[tokio::test]
async fn a_hidden_admin_route_answers_like_a_missing_one_whatever_its_query() {
    let hub = TestHub::start_with(
        crate::support::hub::Options::default().env("SWITCHBOARD_ADMIN__TOKEN", ""),
    )
    .await;
    let answer = |path: String| {
        let http = hub.http.clone();
        async move {
            let r = http.post(path).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let app = uuid::Uuid::now_v7();
    let missing = answer(format!("{}/api/v1/nothing/here", hub.base)).await;
    assert_eq!(missing.0, 404);
    for query in ["", "?timeoutMs=1&timeoutMs=2", "?timeoutMs=abc", "?x=1"] {
        let hidden = answer(format!("{}/api/v1/apps/{app}/ping{query}", hub.base)).await;
        assert_eq!(hidden, missing, "{query}");
    }
}

async fn status_and_body(request: reqwest::RequestBuilder) -> (u16, serde_json::Value) {
    let r = request.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json::<serde_json::Value>().await.unwrap())
}
