//! People on the gateway, REST and CLI (ADR 0020 §1): created by the
//! operator, connected with `person/network/connect`, talking with agents
//! through the `person/...` twins, their events named for them, keys
//! rotated, revoked and disabled (4003), agents owned and their keys
//! revoked by their owner only.

mod conversations;
mod keys;
mod owners;

use std::path::Path;

use serde_json::{json, Value};

use crate::support::hub::ADMIN_TOKEN;
use crate::support::{RawSocket, TestHub};

/// `POST /api/v1/people` as the operator: the status, the `Cache-Control`
/// header and the body.
pub(super) async fn post_person(
    hub: &TestHub,
    body: &Value,
    idem: Option<&str>,
) -> (u16, String, Value) {
    let mut request = hub
        .http
        .post(format!("{}/api/v1/people", hub.base))
        .bearer_auth(ADMIN_TOKEN)
        .json(body);
    if let Some(key) = idem {
        request = request.header("idempotency-key", key);
    }
    let r = request.send().await.unwrap();
    let status = r.status().as_u16();
    let cache = r
        .headers()
        .get("cache-control")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, cache, r.json().await.unwrap())
}

pub(super) struct Person {
    pub id: uuid::Uuid,
    pub key: String,
}

pub(super) async fn person(hub: &TestHub, name: &str) -> Person {
    let (status, _, body) = post_person(hub, &json!({ "name": name }), None).await;
    assert_eq!(status, 201, "{body}");
    Person {
        id: body["personId"].as_str().unwrap().parse().unwrap(),
        key: body["personKey"].as_str().unwrap().to_string(),
    }
}

/// A socket connected as the person, with the connect answer.
pub(super) async fn connect_person(hub: &TestHub, key: &str) -> (RawSocket, Value) {
    let mut s = RawSocket::connect(&hub.ws_url()).await;
    let r = s
        .call(
            json!("c"),
            "person/network/connect",
            json!({ "personKey": key }),
        )
        .await;
    assert!(r.get("result").is_some(), "{r}");
    (s, r["result"].clone())
}

/// The next notification of `method` on a raw socket, skipping others.
pub(super) async fn next_raw(s: &mut RawSocket, method: &str) -> Value {
    loop {
        let frame = s.recv().await;
        if frame["method"] == json!(method) {
            return frame["params"].clone();
        }
        assert!(
            !frame["method"]
                .as_str()
                .is_some_and(|m| m.starts_with("agent/")),
            "a person received an agent's event: {frame}"
        );
    }
}

pub(super) async fn call_ok(s: &mut RawSocket, id: &str, method: &str, params: Value) -> Value {
    let r = s.call(json!(id), method, params).await;
    assert!(r.get("result").is_some(), "{method}: {r}");
    r["result"].clone()
}

pub(super) fn cli(data: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

pub(super) fn field(out: &str, label: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(label))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| panic!("{label} missing in {out}"))
}

/// The bad-key answer of a connect method for `key`.
pub(super) async fn refused_connect(hub: &TestHub, method: &str, field: &str, key: &str) -> Value {
    let mut s = RawSocket::connect(&hub.ws_url()).await;
    let r = s.call(json!(1), method, json!({ field: key })).await;
    assert!(r.get("error").is_some(), "{r}");
    r
}

/// `method path` with `token` as Bearer: the status and the raw body.
pub(super) async fn with_bearer(
    hub: &TestHub,
    method: reqwest::Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, String) {
    let mut request = hub
        .http
        .request(method, format!("{}{path}", hub.base))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let r = request.send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}
