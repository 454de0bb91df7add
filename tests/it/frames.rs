//! Frame-level behaviour of the gateway against exact bytes. The malformed
//! frames and id forms are rows of the bad-input matrix (`bad_input::frames`).

use serde_json::json;

use crate::support::hub::Options;
use crate::support::{RawEvent, RawSocket, TestHub};

fn error_of(frame: &serde_json::Value) -> (i64, String, String) {
    let e = &frame["error"];
    (
        e["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("no error in {frame}")),
        e["_tag"].as_str().unwrap().to_string(),
        e["message"].as_str().unwrap().to_string(),
    )
}

#[tokio::test]
async fn oversized_frames_are_refused_and_huge_ones_close_the_socket() {
    let hub = TestHub::start_with(
        Options::default()
            .env("SWITCHBOARD_GATEWAY__MAX_FRAME_BYTES", 1024)
            .env("SWITCHBOARD_GATEWAY__TRANSPORT_MAX_FRAME_BYTES", 8192),
    )
    .await;
    let (_, key) = hub.register_agent("big").await;
    let mut s = RawSocket::connect_agent(&hub.ws_url(), &key).await;

    let padding = "x".repeat(2000);
    s.send_json(
        &json!({"jsonrpc":"2.0","id":1,"method":"agent/identity/get","params":{"pad": padding}}),
    )
    .await;
    let f = s.recv().await;
    let (code, _, message) = error_of(&f);
    assert_eq!(code, -32600);
    assert!(message.contains("gateway.max_frame_bytes"), "{message}");
    let f = s.call(json!(2), "agent/identity/get", json!({})).await;
    assert_eq!(
        f["result"]["name"],
        json!("big"),
        "the socket survives an oversized frame"
    );

    s.send_text("y".repeat(20_000)).await;
    assert_eq!(s.closed().await.map(|c| c.0), Some(1009));
}

#[tokio::test]
async fn methods_before_connect_are_unauthorized_and_roles_are_enforced() {
    let hub = TestHub::start().await;
    let (_, agent_key) = hub.register_agent("roles").await;
    let mut s = RawSocket::connect(&hub.ws_url()).await;
    let f = s.call(json!(1), "agent/identity/get", json!({})).await;
    let (code, tag, _) = error_of(&f);
    assert_eq!((code, tag.as_str()), (-32001, "UnauthorizedError"));

    let f = s
        .call(
            json!(2),
            "agent/network/connect",
            json!({"agentKey": agent_key}),
        )
        .await;
    assert!(f["result"].is_object());
    let f = s.call(json!(3), "app/identity/get", json!({})).await;
    assert_eq!(error_of(&f).1, "ForbiddenError");
    let f = s
        .call(
            json!(4),
            "agent/network/connect",
            json!({"agentKey": agent_key}),
        )
        .await;
    assert_eq!(error_of(&f).1, "ConflictError");
    let f = s
        .call(json!(5), "agent/identity/get", json!({"unexpected": 1}))
        .await;
    assert_eq!(
        error_of(&f).2,
        "Invalid params: unexpected is not a known member"
    );
    let f = s.call(json!(6), "agent/identity/get", json!({})).await;
    assert_eq!(f["result"]["name"], json!("roles"));
}

#[tokio::test]
async fn connect_negotiates_the_protocol_version_and_reports_limits() {
    let hub = TestHub::start().await;
    let (agent_id, key) = hub.register_agent("versions").await;
    let mut s = RawSocket::connect(&hub.ws_url()).await;
    let f = s
        .call(
            json!(1),
            "agent/network/connect",
            json!({"agentKey": key, "protocol": {"min": 2, "max": 5}}),
        )
        .await;
    let (_, tag, _) = error_of(&f);
    assert_eq!(tag, "UnsupportedVersionError");
    assert_eq!(f["error"]["data"]["supported"], json!({"min": 1, "max": 1}));

    let f = s
        .call(
            json!(2),
            "agent/network/connect",
            json!({"agentKey": key, "protocol": {"min": 1, "max": 3}}),
        )
        .await;
    let r = &f["result"];
    assert_eq!(r["agentId"], json!(agent_id));
    assert_eq!(r["protocolVersion"], json!(1));
    assert_eq!(r["limits"]["maxFrameBytes"], json!(1024 * 1024));
    assert!(r["limits"]["rateLimit"]["perSecond"].as_u64().unwrap() > 0);
    assert!(r["limits"]["heartbeat"]["intervalMs"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn notifications_from_clients_get_no_answer() {
    let hub = TestHub::start().await;
    let (_, key) = hub.register_agent("quiet").await;
    let mut s = RawSocket::connect_agent(&hub.ws_url(), &key).await;
    s.send_json(&json!({"jsonrpc":"2.0","method":"agent/identity/get"}))
        .await;
    // The next frame is the answer to the next request, not to the notification.
    let f = s
        .call(json!("after"), "agent/identity/get", json!({}))
        .await;
    assert_eq!(f["id"], json!("after"));
    s.send_text(r#"{"jsonrpc":"2.0","id":"x","method":"agent/identity/get"}"#)
        .await;
    match s.next_event().await {
        RawEvent::Text(f) => assert_eq!(f["id"], json!("x")),
        other => panic!("{other:?}"),
    }
}

/// A repeated member anywhere in a frame refuses the whole frame with
/// -32600 and the member's JSON pointer; the id is echoed unless it is the
/// repeated member itself. serde_json alone would keep the last value.
#[tokio::test]
async fn frames_with_duplicate_members_are_refused_with_the_path() {
    let hub = TestHub::start().await;
    let (_, key) = hub.register_agent("dups").await;
    let mut s = RawSocket::connect(&hub.ws_url()).await;
    for (text, pointer, id) in [
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"agent/network/connect","params":{"agentKey":"x","agentKey":"y"}}"#,
            "/params/agentKey",
            json!(1),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"m","method":"agent/does/not-exist","method":"agent/identity/get"}"#,
            "/method",
            json!("m"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":3,"id":4,"method":"agent/identity/get"}"#,
            "/id",
            json!(null),
        ),
        (
            r#"{"jsonrpc":"2.0","id":5,"method":"agent/message/send","params":{"parts":[{"type":"text"},{"type":"text","text":"a","text":"b"}]}}"#,
            "/params/parts/1/text",
            json!(5),
        ),
        (
            r#"{"jsonrpc":"2.0","id":6,"method":"x","params":{"a/b":{"~":1,"~":2}}}"#,
            "/params/a~1b/~0",
            json!(6),
        ),
    ] {
        s.send_text(text).await;
        let f = s.recv().await;
        let (code, tag, message) = error_of(&f);
        assert_eq!(
            (code, tag.as_str()),
            (-32600, "InvalidRequestError"),
            "{text}: {f}"
        );
        assert!(message.contains(pointer), "{text}: {message}");
        assert_eq!(f["error"]["data"]["pointer"], json!(pointer), "{text}: {f}");
        assert_eq!(f["id"], id, "{text}: {f}");
    }
    // Refused, not half-read: a duplicated key never connects, and the
    // socket still works for a clean frame.
    let f = s.call(json!(7), "agent/identity/get", json!({})).await;
    assert_eq!(error_of(&f).1, "UnauthorizedError");
    s.send_text(format!(
        r#"{{"jsonrpc":"2.0","id":8,"method":"agent/network/connect","params":{{"agentKey":"{key}"}}}}"#
    ))
    .await;
    assert!(s.recv().await["result"]["agentId"].is_string());
}
