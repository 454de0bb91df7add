//! People on the gateway, REST and CLI (ADR 0020 §1): created by the
//! operator, connected with `person/network/connect`, talking with agents
//! through the `person/...` twins, their events named for them, keys
//! rotated, revoked and disabled (4003), agents owned and their keys
//! revoked by their owner only.

use std::path::Path;

use serde_json::{json, Value};
use switchboard::client::AgentClient;
use uuid::Uuid;

use crate::support::agents::{agent, direct, next_of, send, text};
use crate::support::event_reader::rest_events;
use crate::support::hub::{Options, ADMIN_TOKEN};
use crate::support::{pg, RawSocket, TestHub};

/// `POST /api/v1/people` as the operator: the status, the `Cache-Control`
/// header and the body.
async fn post_person(hub: &TestHub, body: &Value, idem: Option<&str>) -> (u16, String, Value) {
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

struct Person {
    id: Uuid,
    key: String,
}

async fn person(hub: &TestHub, name: &str) -> Person {
    let (status, _, body) = post_person(hub, &json!({ "name": name }), None).await;
    assert_eq!(status, 201, "{body}");
    Person {
        id: body["personId"].as_str().unwrap().parse().unwrap(),
        key: body["personKey"].as_str().unwrap().to_string(),
    }
}

/// A socket connected as the person, with the connect answer.
async fn connect_person(hub: &TestHub, key: &str) -> (RawSocket, Value) {
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
async fn next_raw(s: &mut RawSocket, method: &str) -> Value {
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

async fn call_ok(s: &mut RawSocket, id: &str, method: &str, params: Value) -> Value {
    let r = s.call(json!(id), method, params).await;
    assert!(r.get("result").is_some(), "{method}: {r}");
    r["result"].clone()
}

fn cli(data: &Path, args: &[&str]) -> String {
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

fn field(out: &str, label: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(label))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| panic!("{label} missing in {out}"))
}

#[tokio::test]
async fn people_are_created_by_rest_and_cli_with_their_key_shown_once() {
    let hub = TestHub::start().await;
    let anonymous = hub.post("/api/v1/people", &json!({ "name": "alex" })).await;
    assert_eq!(anonymous.0, 401, "{}", anonymous.1);
    let (status, _, body) = post_person(&hub, &json!({ "name": "" }), None).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["details"][0]["pointer"], "/name", "{body}");

    let (status, cache, first) = post_person(&hub, &json!({ "name": "alex" }), Some("k1")).await;
    assert_eq!(status, 201, "{first}");
    assert_eq!(cache, "no-store");
    assert!(first["personKey"]
        .as_str()
        .unwrap()
        .starts_with("sbk_person_"));
    // A retry with the same Idempotency-Key names the same person and
    // withholds the key.
    let (status, _, again) = post_person(&hub, &json!({ "name": "alex" }), Some("k1")).await;
    assert_eq!(status, 201);
    assert_eq!(again["personId"], first["personId"]);
    assert!(again.get("personKey").is_none(), "{again}");
    assert_eq!(again["keyWithheld"], true);
    let (_, result) = connect_person(&hub, first["personKey"].as_str().unwrap()).await;
    assert_eq!(result["personId"], first["personId"]);

    // The operator CLI writes the hub's database; the hub serves the key.
    let out = cli(
        &hub.dir.path().join("data"),
        &[
            "person",
            "create",
            "--name",
            "robin",
            "--description",
            "ops",
        ],
    );
    let key = field(&out, "person key:");
    let (mut s, result) = connect_person(&hub, &key).await;
    assert_eq!(
        result["personId"].as_str().unwrap(),
        field(&out, "person id:")
    );
    let me = call_ok(&mut s, "i", "person/identity/get", json!({})).await;
    assert_eq!(me["principalId"], result["personId"]);
    assert_eq!(me["name"], "robin");
    assert_eq!(me["description"], "ops");
    assert!(me.get("agentId").is_none(), "{me}");
}

/// A direct conversation both ways and a mixed group, on one backend.
async fn people_and_agents_talk(hub: &TestHub) {
    let p = person(hub, "pat").await;
    let q = person(hub, "quinn").await;
    let a = agent(hub, "ada").await;
    let b = agent(hub, "bob").await;
    let ca = AgentClient::connect(&hub.base, &a.key).await.unwrap();
    let mut ra = ca.connection.notifications().unwrap();
    let cb = AgentClient::connect(&hub.base, &b.key).await.unwrap();
    let mut rb = cb.connection.notifications().unwrap();
    let (mut sp, _) = connect_person(hub, &p.key).await;
    let (mut sq, _) = connect_person(hub, &q.key).await;

    // The person opens a direct conversation with the agent.
    let created = call_ok(
        &mut sp,
        "1",
        "person/conversation/create",
        json!({ "kind": "direct", "participants": [a.id] }),
    )
    .await;
    let direct = created["conversation"]["id"].clone();
    let announced = next_of(&mut ra, "agent/conversation/created").await;
    assert_eq!(announced["payload"]["conversation"]["id"], direct);

    // Agent to person: the person's copy is `person/message/received`.
    let sent = switchboard::protocol::conversations::MessageSendParams {
        conversation_id: direct.as_str().unwrap().parse().unwrap(),
        parts: text("hello pat"),
        client_msg_id: None,
        reply_to: None,
    };
    ca.call::<switchboard::protocol::conversations::AgentMessageSend>(sent)
        .await
        .unwrap();
    let got = next_raw(&mut sp, "person/message/received").await;
    assert_eq!(got["payload"]["message"]["parts"][0]["text"], "hello pat");
    assert_eq!(got["payload"]["message"]["senderId"], json!(a.id));

    // Person to agent, and typing both ways.
    call_ok(
        &mut sp,
        "2",
        "person/message/send",
        json!({ "conversationId": direct, "parts": [{ "type": "text", "text": "hi ada" }] }),
    )
    .await;
    let got = next_of(&mut ra, "agent/message/received").await;
    assert_eq!(got["payload"]["message"]["senderId"], json!(p.id));
    assert_eq!(got["payload"]["message"]["origin"], "person");
    call_ok(
        &mut sp,
        "3",
        "person/typing/send",
        json!({ "conversationId": direct }),
    )
    .await;
    let typing = next_of(&mut ra, "agent/typing/received").await;
    assert_eq!(typing["payload"]["principalId"], json!(p.id));
    assert!(typing["payload"].get("agentId").is_none(), "{typing}");
    ca.call::<switchboard::protocol::conversations::AgentTypingSend>(
        switchboard::protocol::conversations::TypingSendParams {
            conversation_id: direct.as_str().unwrap().parse().unwrap(),
        },
    )
    .await
    .unwrap();
    let typing = next_raw(&mut sp, "person/typing/received").await;
    assert_eq!(typing["payload"]["principalId"], json!(a.id));
    assert_eq!(typing["payload"]["agentId"], json!(a.id));

    // The person's history and list hold the conversation and both messages.
    let history = call_ok(
        &mut sp,
        "4",
        "person/message/list",
        json!({ "conversationId": direct }),
    )
    .await;
    assert_eq!(
        history["messages"].as_array().unwrap().len(),
        2,
        "{history}"
    );
    let list = call_ok(&mut sp, "5", "person/conversation/list", json!({})).await;
    assert_eq!(list["conversations"][0]["id"], direct);
    let get = call_ok(
        &mut sp,
        "6",
        "person/conversation/get",
        json!({ "conversationId": direct }),
    )
    .await;
    assert_eq!(
        get["conversation"]["participants"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // A group of two agents and two people: one send, an event per kind,
    // each kind's copies sharing one id.
    let group = call_ok(
        &mut sp,
        "7",
        "person/conversation/create",
        json!({ "kind": "group", "participants": [a.id, b.id, q.id], "name": "mixed" }),
    )
    .await;
    let group = group["conversation"]["id"].clone();
    let created_q = next_raw(&mut sq, "person/conversation/created").await;
    assert_eq!(created_q["payload"]["conversation"]["id"], group);
    next_of(&mut rb, "agent/conversation/created").await;
    ca.call::<switchboard::protocol::conversations::AgentMessageSend>(
        switchboard::protocol::conversations::MessageSendParams {
            conversation_id: group.as_str().unwrap().parse().unwrap(),
            parts: text("to all"),
            client_msg_id: None,
            reply_to: None,
        },
    )
    .await
    .unwrap();
    let to_b = next_of(&mut rb, "agent/message/received").await;
    let to_p = next_raw(&mut sp, "person/message/received").await;
    let to_q = next_raw(&mut sq, "person/message/received").await;
    let message = &to_b["payload"]["message"]["id"];
    assert_eq!(&to_p["payload"]["message"]["id"], message);
    assert_eq!(&to_q["payload"]["message"]["id"], message);
    assert_eq!(to_p["id"], to_q["id"], "the people's copies are one event");
    assert_ne!(to_p["id"], to_b["id"], "each kind has its own event");
    assert_eq!(to_p["type"], "person/message/received");
    assert_eq!(to_b["type"], "agent/message/received");

    // Apps and unknown ids are no participants.
    let err = sp
        .call(
            json!("8"),
            "person/conversation/create",
            json!({ "kind": "direct", "participants": [Uuid::new_v4()] }),
        )
        .await;
    assert_eq!(err["error"]["_tag"], "NotFoundError", "{err}");
    assert!(err["error"]["data"]["principalId"].is_string(), "{err}");
}

#[tokio::test]
async fn a_person_and_agents_talk_on_sqlite() {
    people_and_agents_talk(&TestHub::start_with(TestHub::fast_options()).await).await;
}

#[tokio::test]
async fn a_person_and_agents_talk_on_postgres() {
    let url = pg::fresh_database().await;
    let hub = TestHub::start_with(Options {
        database_url: Some(url),
        ..TestHub::fast_options()
    })
    .await;
    people_and_agents_talk(&hub).await;
}

#[tokio::test]
async fn a_person_resumes_and_catches_up_over_rest() {
    let hub = TestHub::start().await;
    let p = person(&hub, "pat").await;
    let a = agent(&hub, "ada").await;
    let ca = AgentClient::connect(&hub.base, &a.key).await.unwrap();
    let direct = direct(&ca, p.id).await;
    for i in 0..3 {
        send(&ca, direct, &format!("m{i}")).await;
    }
    let (rest_status, page) = rest_events(&hub, &p.key, "after=0").await;
    assert_eq!(rest_status, 200, "{page}");
    let events = page["events"].as_array().unwrap();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "person/conversation/created",
            "person/message/received",
            "person/message/received",
            "person/message/received"
        ]
    );
    // Connected, the person acknowledges seq 2; a new socket resumes there.
    let (mut s, result) = connect_person(&hub, &p.key).await;
    assert_eq!(result["events"]["latestSeq"], 4);
    let epoch = result["events"]["syncEpoch"].as_str().unwrap().to_string();
    call_ok(&mut s, "a", "person/event/ack", json!({ "seq": 2 })).await;
    drop(s);
    let mut s = RawSocket::connect(&hub.ws_url()).await;
    s.send_json(
        &json!({"jsonrpc": "2.0", "id": "c", "method": "person/network/connect",
        "params": { "personKey": p.key, "resume": { "after": 3, "syncEpoch": epoch } }}),
    )
    .await;
    let mut seqs = Vec::new();
    while seqs.is_empty() {
        let frame = s.recv().await;
        if let Some(seq) = frame["params"]["seq"].as_u64() {
            assert_eq!(frame["method"], "person/message/received");
            seqs.push(seq);
        }
    }
    assert_eq!(seqs, [4]);
    // Without resume, delivery starts after the acknowledged seq.
    let mut s = RawSocket::connect(&hub.ws_url()).await;
    s.send_json(
        &json!({"jsonrpc": "2.0", "id": "c", "method": "person/network/connect",
        "params": { "personKey": p.key }}),
    )
    .await;
    let mut seqs = Vec::new();
    while seqs.len() < 2 {
        let frame = s.recv().await;
        if let Some(seq) = frame["params"]["seq"].as_u64() {
            seqs.push(seq);
        }
    }
    assert_eq!(seqs, [3, 4]);
}

#[tokio::test]
async fn a_person_connects_on_postgres() {
    let url = pg::fresh_database().await;
    let hub = TestHub::start_with(Options {
        database_url: Some(url),
        ..Options::default()
    })
    .await;
    let p = person(&hub, "pat").await;
    let (mut s, result) = connect_person(&hub, &p.key).await;
    assert_eq!(result["personId"], json!(p.id));
    let me = call_ok(&mut s, "i", "person/identity/get", json!({})).await;
    assert_eq!(me["principalId"], json!(p.id));
}

/// The bad-key answer of a connect method for `key`.
async fn refused_connect(hub: &TestHub, method: &str, field: &str, key: &str) -> Value {
    let mut s = RawSocket::connect(&hub.ws_url()).await;
    let r = s.call(json!(1), method, json!({ field: key })).await;
    assert!(r.get("error").is_some(), "{r}");
    r
}

#[tokio::test]
async fn keys_of_one_kind_do_not_connect_as_another() {
    let hub = TestHub::start().await;
    let p = person(&hub, "pat").await;
    let a = agent(&hub, "ada").await;
    let random =
        switchboard::domain::keys::mint(switchboard::domain::PrincipalKind::Agent).plaintext;
    let bad = refused_connect(&hub, "agent/network/connect", "agentKey", &random).await;
    assert_eq!(bad["error"]["_tag"], "UnauthorizedError", "{bad}");
    let person_as_agent = refused_connect(&hub, "agent/network/connect", "agentKey", &p.key).await;
    assert_eq!(person_as_agent, bad);
    let agent_as_person =
        refused_connect(&hub, "person/network/connect", "personKey", &a.key).await;
    assert_eq!(agent_as_person, bad);
}

#[tokio::test]
async fn a_person_cannot_call_methods_outside_its_audience() {
    let hub = TestHub::start().await;
    let p = person(&hub, "pat").await;
    let a = agent(&hub, "ada").await;
    let (mut s, _) = connect_person(&hub, &p.key).await;
    let r = s
        .call(
            json!(1),
            "agent/task/request",
            json!({ "appId": Uuid::new_v4(), "taskType": "x", "invitedAgentIds": [], "input": {} }),
        )
        .await;
    assert_eq!(r["error"]["_tag"], "ForbiddenError", "{r}");
    let r = s
        .call(
            json!(2),
            "agent/message/send",
            json!({ "conversationId": Uuid::new_v4(), "parts": [] }),
        )
        .await;
    assert_eq!(r["error"]["_tag"], "ForbiddenError", "{r}");
    // Nor an agent a person's twin.
    let mut sa = RawSocket::connect_agent(&hub.ws_url(), &a.key).await;
    let r = sa
        .call(json!(1), "person/conversation/list", json!({}))
        .await;
    assert_eq!(r["error"]["_tag"], "ForbiddenError", "{r}");
}

#[tokio::test]
async fn rotation_revocation_and_disable_close_a_person_with_4003() {
    let hub = TestHub::start_with(
        Options::default().env("SWITCHBOARD_GATEWAY__REVOCATION_CHECK_INTERVAL_MS", 100),
    )
    .await;
    let p = person(&hub, "pat").await;
    let (mut old, _) = connect_person(&hub, &p.key).await;
    let r = hub
        .http
        .post(format!("{}/api/v1/keys/rotate", hub.base))
        .bearer_auth(&p.key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["cache-control"], "no-store");
    let rotated: Value = r.json().await.unwrap();
    let new_key = rotated["personKey"].as_str().unwrap().to_string();
    assert_eq!(old.closed().await.map(|c| c.0), Some(4003));
    refused_connect(&hub, "person/network/connect", "personKey", &p.key).await;

    let (mut live, _) = connect_person(&hub, &new_key).await;
    let r = hub
        .http
        .post(format!("{}/api/v1/keys/revoke", hub.base))
        .bearer_auth(&new_key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(live.closed().await.map(|c| c.0), Some(4003));

    // The CLI rotates (the sweep closes nothing: no socket is open), then
    // the operator disables: the socket closes, no key connects again.
    let data = hub.dir.path().join("data");
    let out = cli(&data, &["person", "rotate-key", "--id", &p.id.to_string()]);
    let cli_key = field(&out, "person key:");
    let (mut s, _) = connect_person(&hub, &cli_key).await;
    let r = hub
        .http
        .post(format!("{}/api/v1/people/{}/disable", hub.base, p.id))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(s.closed().await.map(|c| c.0), Some(4003));
    refused_connect(&hub, "person/network/connect", "personKey", &cli_key).await;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args([
            "person",
            "rotate-key",
            "--id",
            &p.id.to_string(),
            "--data-dir",
        ])
        .arg(&data)
        .output()
        .unwrap();
    assert!(!out.status.success(), "a disabled person gets no new key");
    let unknown = hub
        .http
        .post(format!(
            "{}/api/v1/people/{}/disable",
            hub.base,
            Uuid::new_v4()
        ))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);

    // A key the CLI revokes while its socket is open: the sweep closes it.
    let q = person(&hub, "quinn").await;
    let (mut s, _) = connect_person(&hub, &q.key).await;
    cli(&data, &["person", "revoke-key", "--id", &q.id.to_string()]);
    assert_eq!(s.closed().await.map(|c| c.0), Some(4003));
}

/// `method path` with `token` as Bearer: the status and the raw body.
async fn with_bearer(
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

#[tokio::test]
async fn owners_list_and_revoke_their_agents_keys_and_nobody_else_does() {
    // Registration is closed: only a person's key (or the operator) registers.
    let hub =
        TestHub::start_with(Options::default().env("SWITCHBOARD_REGISTRATION__MODE", "closed"))
            .await;
    let (status, _) = hub
        .post("/api/v1/agents/register", &json!({ "name": "x" }))
        .await;
    assert_eq!(status, 403);
    let p = person(&hub, "pat").await;
    let q = person(&hub, "quinn").await;
    let register = || {
        hub.http
            .post(format!("{}/api/v1/agents/register", hub.base))
            .bearer_auth(&p.key)
            .header("idempotency-key", "helper-1")
            .json(&json!({ "name": "helper" }))
            .send()
    };
    let r = register().await.unwrap();
    assert_eq!(r.status(), 201);
    assert_eq!(r.headers()["cache-control"], "no-store");
    let registered: Value = r.json().await.unwrap();
    assert_eq!(registered["ownerId"], json!(p.id));
    let agent_id = registered["agentId"].as_str().unwrap().to_string();
    let agent_key = registered["agentKey"].as_str().unwrap().to_string();
    let key_id = switchboard::domain::keys::parse(&agent_key).unwrap().key_id;
    let replay: Value = register().await.unwrap().json().await.unwrap();
    assert_eq!(
        replay,
        json!({ "agentId": agent_id, "ownerId": p.id, "keyWithheld": true })
    );

    let (status, listed) = with_bearer(
        &hub,
        reqwest::Method::GET,
        "/api/v1/people/me/agents",
        &p.key,
        None,
    )
    .await;
    assert_eq!(status, 200, "{listed}");
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed["agents"][0]["agentId"], agent_id);
    assert_eq!(listed["agents"][0]["name"], "helper");
    let key = &listed["agents"][0]["keys"][0];
    assert_eq!(key["keyId"], key_id);
    assert_eq!(
        key.as_object()
            .unwrap()
            .keys()
            .collect::<std::collections::BTreeSet<_>>(),
        ["createdAt", "keyId"]
            .iter()
            .map(|k| k.to_string())
            .collect::<std::collections::BTreeSet<_>>()
            .iter()
            .collect(),
        "no hash, nothing revoked"
    );
    let (_, other) = with_bearer(
        &hub,
        reqwest::Method::GET,
        "/api/v1/people/me/agents",
        &q.key,
        None,
    )
    .await;
    assert_eq!(other, r#"{"agents":[]}"#);
    let (status, _) = with_bearer(
        &hub,
        reqwest::Method::GET,
        "/api/v1/people/me/agents",
        &agent_key,
        None,
    )
    .await;
    assert_eq!(status, 403, "an agent owns nothing");

    // Another person's revoke is the unknown agent's answer, byte for byte.
    let hidden = with_bearer(
        &hub,
        reqwest::Method::POST,
        &format!("/api/v1/agents/{agent_id}/keys/revoke"),
        &q.key,
        None,
    )
    .await;
    let missing = with_bearer(
        &hub,
        reqwest::Method::POST,
        &format!("/api/v1/agents/{}/keys/revoke", Uuid::new_v4()),
        &q.key,
        None,
    )
    .await;
    assert_eq!(hidden.0, 404);
    assert_eq!(hidden, missing);
    // The agent's own key is no owner's either.
    let own = with_bearer(
        &hub,
        reqwest::Method::POST,
        &format!("/api/v1/agents/{agent_id}/keys/revoke"),
        &agent_key,
        None,
    )
    .await;
    assert_eq!(own.0, 403, "{}", own.1);

    // The owner revokes: the agent's socket closes with 4003.
    let mut socket = RawSocket::connect_agent(&hub.ws_url(), &agent_key).await;
    let revoked = with_bearer(
        &hub,
        reqwest::Method::POST,
        &format!("/api/v1/agents/{agent_id}/keys/revoke"),
        &p.key,
        None,
    )
    .await;
    assert_eq!(revoked.0, 204, "{}", revoked.1);
    assert_eq!(socket.closed().await.map(|c| c.0), Some(4003));
    let (_, listed) = with_bearer(
        &hub,
        reqwest::Method::GET,
        "/api/v1/people/me/agents",
        &p.key,
        None,
    )
    .await;
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert!(
        listed["agents"][0]["keys"][0]["revokedAt"].is_string(),
        "{listed}"
    );

    // The operator moves the agent to the other person, then clears it.
    let owner_path = format!("/api/v1/agents/{agent_id}/owner");
    let moved = with_bearer(
        &hub,
        reqwest::Method::PUT,
        &owner_path,
        ADMIN_TOKEN,
        Some(json!({ "ownerId": q.id })),
    )
    .await;
    assert_eq!(moved.0, 200, "{}", moved.1);
    let by_person = with_bearer(
        &hub,
        reqwest::Method::PUT,
        &owner_path,
        &p.key,
        Some(json!({ "ownerId": p.id })),
    )
    .await;
    assert_eq!(by_person.0, 401, "only the operator sets owners");
    let (_, other) = with_bearer(
        &hub,
        reqwest::Method::GET,
        "/api/v1/people/me/agents",
        &q.key,
        None,
    )
    .await;
    assert!(other.contains(&agent_id), "{other}");
    let not_a_person = with_bearer(
        &hub,
        reqwest::Method::PUT,
        &owner_path,
        ADMIN_TOKEN,
        Some(json!({ "ownerId": agent_id })),
    )
    .await;
    assert_eq!(not_a_person.0, 400);
    assert!(not_a_person.1.contains("/ownerId"), "{}", not_a_person.1);
    let cleared = with_bearer(
        &hub,
        reqwest::Method::DELETE,
        &owner_path,
        ADMIN_TOKEN,
        None,
    )
    .await;
    assert_eq!(cleared.0, 204);
    let (_, other) = with_bearer(
        &hub,
        reqwest::Method::GET,
        "/api/v1/people/me/agents",
        &q.key,
        None,
    )
    .await;
    assert_eq!(other, r#"{"agents":[]}"#);

    // The CLI registers an owned agent and clears its owner.
    let data = hub.dir.path().join("data");
    let out = cli(
        &data,
        &[
            "agent",
            "register",
            "--name",
            "cli-helper",
            "--owner",
            &p.id.to_string(),
        ],
    );
    let cli_agent = field(&out, "agent id:");
    let (_, listed) = with_bearer(
        &hub,
        reqwest::Method::GET,
        "/api/v1/people/me/agents",
        &p.key,
        None,
    )
    .await;
    assert!(listed.contains(&cli_agent), "{listed}");
    cli(&data, &["agent", "set-owner", "--id", &cli_agent, "--none"]);
    let (_, listed) = with_bearer(
        &hub,
        reqwest::Method::GET,
        "/api/v1/people/me/agents",
        &p.key,
        None,
    )
    .await;
    assert!(!listed.contains(&cli_agent), "{listed}");
}
