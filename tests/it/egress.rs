//! The egress client against a real HTTPS receiver on loopback: scripted
//! answers come back as the named outcomes, and every SSRF rule decides
//! before a connection is attempted. Names resolve only through the test's
//! scripted resolver, so no request leaves loopback.

use std::net::SocketAddr;
use std::time::Duration;

use switchboard::webhooks::egress::Outcome;
use switchboard::webhooks::egress_policy::BlockReason;

use crate::support::receiver::{Receiver, ScriptedResolver};

const PATIENT: Duration = Duration::from_secs(20);
/// For the answers that never finish: any deadline ends them the same way,
/// and this one leaves a loaded machine ample time to deliver the request.
const HASTY: Duration = Duration::from_millis(1500);

fn blocked(reason: BlockReason) -> Outcome {
    Outcome::Blocked { reason }
}

/// `receiver.test` resolves to the receiver and is allowlisted with the
/// private override (it is on loopback).
async fn setup(
    timeout: Duration,
) -> (
    Receiver,
    std::sync::Arc<ScriptedResolver>,
    switchboard::webhooks::egress::EgressClient,
) {
    let receiver = Receiver::start().await;
    let resolver = ScriptedResolver::new().map("receiver.test", &[&["127.0.0.1"]]);
    let entry = format!("receiver.test:{}", receiver.port());
    let client = receiver.client(resolver.clone(), &[&entry], &[&entry], timeout);
    (receiver, resolver, client)
}

#[tokio::test]
async fn scripted_answers_come_back_as_named_outcomes() {
    let (receiver, resolver, client) = setup(PATIENT).await;
    let url = |path: &str| receiver.url("receiver.test", path);
    let post = |path: &str| {
        let url = url(path);
        let client = &client;
        async move {
            client
                .post(
                    &url,
                    &[("content-type", "application/json")],
                    b"{}".to_vec(),
                )
                .await
        }
    };

    assert_eq!(
        post("/ok").await,
        Outcome::Ok {
            status: 200,
            body: br#"{"received":true}"#.to_vec()
        }
    );
    assert_eq!(
        post("/accepted").await,
        Outcome::Ok {
            status: 202,
            body: Vec::new()
        }
    );
    assert_eq!(
        post("/error").await,
        Outcome::Ok {
            status: 500,
            body: br#"{"error":"scripted"}"#.to_vec()
        }
    );
    // The client carries bytes; judging them is the caller's business.
    assert_eq!(
        post("/invalid-json").await,
        Outcome::Ok {
            status: 200,
            body: b"{not json".to_vec()
        }
    );
    assert_eq!(
        post("/big").await,
        Outcome::TooLarge,
        "a declared length over the cap"
    );
    assert_eq!(
        post("/big-chunked").await,
        Outcome::TooLarge,
        "chunks past the cap"
    );

    assert_eq!(
        post("/hangup").await,
        Outcome::Transport { stage: "request" },
        "connected, then no answer"
    );
    // A redirect to an allowed host is an outcome, not followed.
    assert_eq!(post("/redirect").await, Outcome::Redirect { status: 302 });
    let paths: Vec<String> = receiver.received().into_iter().map(|r| r.path).collect();
    assert_eq!(
        paths,
        [
            "/ok",
            "/accepted",
            "/error",
            "/invalid-json",
            "/big",
            "/big-chunked",
            "/hangup",
            "/redirect"
        ],
        "the redirect's target was never requested"
    );
    assert_eq!(resolver.lookups(), 8, "one lookup per request");
}

#[tokio::test]
async fn deadlines_end_a_silent_server_and_a_slow_body() {
    let (receiver, _, client) = setup(HASTY).await;
    for path in ["/delay", "/slow-body"] {
        let outcome = client
            .post(&receiver.url("receiver.test", path), &[], b"{}".to_vec())
            .await;
        assert_eq!(outcome, Outcome::Timeout, "{path}");
    }
    receiver.wait_for(2).await;
}

#[tokio::test]
async fn url_rules_decide_before_any_lookup_or_connection() {
    let (receiver, resolver, client) = setup(PATIENT).await;
    let port = receiver.port();
    let cases = [
        (
            format!("http://receiver.test:{port}/ok"),
            BlockReason::NotHttps,
        ),
        (
            format!("https://user:pw@receiver.test:{port}/ok"),
            BlockReason::UserInfo,
        ),
        (
            format!("https://user@receiver.test:{port}/ok"),
            BlockReason::UserInfo,
        ),
        (
            format!("https://127.0.0.1:{port}/ok"),
            BlockReason::IpLiteral,
        ),
        (format!("https://[::1]:{port}/ok"), BlockReason::IpLiteral),
        (
            format!("https://[::ffff:127.0.0.1]:{port}/ok"),
            BlockReason::IpLiteral,
        ),
        (
            format!("https://2130706433:{port}/ok"),
            BlockReason::IpLiteral,
        ),
        (format!("https://0x7f.1:{port}/ok"), BlockReason::IpLiteral),
        (
            format!("https://other.test:{port}/ok"),
            BlockReason::NotAllowed,
        ),
        (
            "https://receiver.test/ok".to_string(),
            BlockReason::NotAllowed,
        ),
        (
            format!("https://receiver.test:{}/ok", port.wrapping_add(1)),
            BlockReason::NotAllowed,
        ),
        ("not a url".to_string(), BlockReason::BadUrl),
    ];
    for (url, reason) in cases {
        assert_eq!(
            client.post(&url, &[], Vec::new()).await,
            blocked(reason.clone()),
            "{url}"
        );
        assert_eq!(client.vet(&url).await, Err(blocked(reason)), "{url}");
    }
    assert_eq!(
        resolver.lookups(),
        0,
        "no lookup for a URL the rules refuse"
    );
    assert_eq!(receiver.connections(), 0, "no connection attempted");
}

#[tokio::test]
async fn names_resolving_to_non_public_addresses_are_blocked_before_connecting() {
    let receiver = Receiver::start().await;
    let port = receiver.port();
    let non_public: &[&str] = &[
        "127.0.0.1",
        "127.8.9.10",
        "::1",
        "::ffff:127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "::ffff:192.168.1.1",
        "169.254.169.254",
        "::ffff:169.254.169.254",
        "fe80::1",
        "fc00::1",
        "fd12:3456::1",
        "100.64.0.1",
        "0.0.0.0",
        "::",
        "224.0.0.1",
        "ff02::1",
        "192.0.2.1",
        "2001:db8::1",
        "64:ff9b::a00:1",
        "2002:a00:1::",
    ];
    let resolver = ScriptedResolver::new();
    let mut allow = Vec::new();
    for (i, ip) in non_public.iter().enumerate() {
        resolver.map(&format!("h{i}.test"), &[&[ip]]);
        allow.push(format!("h{i}.test:{port}"));
    }
    // One public and one private address: the private one blocks the name.
    resolver.map("mixed.test", &[&["93.184.216.34", "127.0.0.1"]]);
    allow.push(format!("mixed.test:{port}"));
    resolver.map("empty.test", &[&[]]);
    allow.push(format!("empty.test:{port}"));
    let allow: Vec<&str> = allow.iter().map(String::as_str).collect();
    let client = receiver.client(resolver.clone(), &allow, &[], PATIENT);

    for (i, ip) in non_public.iter().enumerate() {
        let url = receiver.url(&format!("h{i}.test"), "/ok");
        assert_eq!(
            client.post(&url, &[], Vec::new()).await,
            blocked(BlockReason::PrivateAddress),
            "{ip}"
        );
    }
    assert_eq!(
        client
            .post(&receiver.url("mixed.test", "/ok"), &[], Vec::new())
            .await,
        blocked(BlockReason::PrivateAddress)
    );
    assert_eq!(
        client
            .post(&receiver.url("empty.test", "/ok"), &[], Vec::new())
            .await,
        blocked(BlockReason::NoAddress)
    );
    assert_eq!(
        client
            .post(&receiver.url("unknown.test", "/ok"), &[], Vec::new())
            .await,
        blocked(BlockReason::NotAllowed)
    );
    assert_eq!(
        receiver.connections(),
        0,
        "loopback answers never reached the receiver"
    );
}

#[tokio::test]
async fn a_name_that_turns_private_is_blocked_and_lookups_are_never_repeated() {
    let receiver = Receiver::start().await;
    let port = receiver.port();
    // Rebinding: public at the first lookup, private from then on. Each
    // request is vetted on its own lookup, so the turn is caught.
    let resolver = ScriptedResolver::new()
        .map("rebind.test", &[&["93.184.216.34"], &["127.0.0.1"]])
        // Pinning: 127.0.0.1 (the receiver) first, then 127.0.0.2 (nothing
        // listens). Both pass the private override.
        .map("pin.test", &[&["127.0.0.1"], &["127.0.0.2"]]);
    let rebind = format!("rebind.test:{port}");
    let pin = format!("pin.test:{port}");
    let client = receiver.client(resolver.clone(), &[&rebind, &pin], &[&pin], PATIENT);

    let url = receiver.url("rebind.test", "/ok");
    assert_eq!(
        client.vet(&url).await,
        Ok(vec![SocketAddr::new(
            "93.184.216.34".parse().unwrap(),
            port
        )])
    );
    assert_eq!(
        client.post(&url, &[], Vec::new()).await,
        blocked(BlockReason::PrivateAddress)
    );
    assert_eq!(receiver.connections(), 0);

    // The request connects to the address its own lookup vetted, with
    // exactly one lookup: the HTTP layer has no resolver of its own.
    let before = resolver.lookups();
    let url = receiver.url("pin.test", "/ok");
    assert!(matches!(
        client.post(&url, &[], Vec::new()).await,
        Outcome::Ok { status: 200, .. }
    ));
    assert_eq!(
        resolver.lookups() - before,
        1,
        "exactly one lookup for the request"
    );
    assert_eq!(receiver.connections(), 1);
    // The next request looks up again, pins the new answer and goes there.
    assert_eq!(
        client.post(&url, &[], Vec::new()).await,
        Outcome::Transport { stage: "connect" }
    );
    assert_eq!(receiver.received().len(), 1);
}

#[tokio::test]
async fn tls_is_verified_against_the_trusted_roots_and_the_name() {
    let receiver = Receiver::start().await;
    let port = receiver.port();
    let resolver = ScriptedResolver::new()
        .map("receiver.test", &[&["127.0.0.1"]])
        .map("stranger.test", &[&["127.0.0.1"]]);
    let allow = [
        format!("receiver.test:{port}"),
        format!("stranger.test:{port}"),
    ];
    let allow: Vec<&str> = allow.iter().map(String::as_str).collect();
    let client = receiver.client(resolver.clone(), &allow, &allow, PATIENT);
    // The certificate does not name stranger.test.
    assert_eq!(
        client
            .post(&receiver.url("stranger.test", "/ok"), &[], Vec::new())
            .await,
        Outcome::Transport { stage: "connect" }
    );
    // A client that trusts another CA refuses this one.
    let other = Receiver::start().await;
    let untrusting = other.client(resolver, &allow, &allow, PATIENT);
    assert_eq!(
        untrusting
            .post(&receiver.url("receiver.test", "/ok"), &[], Vec::new())
            .await,
        Outcome::Transport { stage: "connect" }
    );
    assert!(
        receiver.received().is_empty(),
        "no request passed the handshake"
    );
}

#[tokio::test]
async fn every_spelling_of_a_host_is_one_pinned_target() {
    let (receiver, resolver, client) = setup(PATIENT).await;
    let port = receiver.port();
    for host in [
        "receiver.test",
        "receiver.test.",
        "RECEIVER.Test",
        "receiver.test.",
        "Receiver.TEST.",
    ] {
        let url = format!("https://{host}:{port}/ok");
        assert!(
            matches!(
                client.post(&url, &[], Vec::new()).await,
                Outcome::Ok { status: 200, .. }
            ),
            "{url}"
        );
    }
    assert_eq!(resolver.lookups(), 5);
    assert_eq!(receiver.received().len(), 5);
}
