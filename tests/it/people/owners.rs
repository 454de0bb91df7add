//! Agents owned by people: registered with the person's key in every
//! registration mode, listed and revoked by their owner only, moved and
//! cleared by the operator (REST and CLI).

use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

use super::{cli, field, person, with_bearer, Person};
use crate::support::hub::{Options, ADMIN_TOKEN};
use crate::support::{werewolf_manifest, RawSocket, TestHub};
use switchboard::identity::IdentityError;

/// `GET /api/v1/people/me/agents` with `key`: the status and raw body.
async fn my_agents(hub: &TestHub, key: &str) -> (u16, String) {
    with_bearer(hub, Method::GET, "/api/v1/people/me/agents", key, None).await
}

async fn revoke_agent(hub: &TestHub, agent: &str, token: &str) -> (u16, String) {
    let path = format!("/api/v1/agents/{agent}/keys/revoke");
    with_bearer(hub, Method::POST, &path, token, None).await
}

/// The owner's revoke as a whole answer: status, every header but the ones
/// that differ between any two answers (`date`, a request id), and body.
async fn revoke_answer(hub: &TestHub, agent: &str, token: &str) -> (u16, Vec<String>, String) {
    let r = hub
        .http
        .post(format!("{}/api/v1/agents/{agent}/keys/revoke", hub.base))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let mut headers: Vec<String> = r
        .headers()
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "date" | "x-request-id"))
        .map(|(name, value)| format!("{name}: {}", value.to_str().unwrap()))
        .collect();
    headers.sort();
    (status, headers, r.text().await.unwrap())
}

/// `POST /api/v1/agents/register {name}` with `token` as Bearer and no
/// Idempotency-Key: the status and body.
async fn register_with(hub: &TestHub, token: &str, name: &str) -> (u16, Value) {
    let (status, body) = with_bearer(
        hub,
        Method::POST,
        "/api/v1/agents/register",
        token,
        Some(json!({ "name": name })),
    )
    .await;
    (status, serde_json::from_str(&body).unwrap())
}

async fn put_owner(hub: &TestHub, agent: &str, token: &str, owner: Value) -> (u16, String) {
    let path = format!("/api/v1/agents/{agent}/owner");
    with_bearer(
        hub,
        Method::PUT,
        &path,
        token,
        Some(json!({ "ownerId": owner })),
    )
    .await
}

/// Registers `name` with the person's key (and an Idempotency-Key): the
/// status, `Cache-Control` and body.
async fn register_owned(hub: &TestHub, owner: &Person, name: &str) -> (u16, String, Value) {
    let r = hub
        .http
        .post(format!("{}/api/v1/agents/register", hub.base))
        .bearer_auth(&owner.key)
        .header("idempotency-key", format!("register-{name}"))
        .json(&json!({ "name": name }))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let cache = r
        .headers()
        .get("cache-control")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, cache, r.json().await.unwrap())
}

/// A hub where only the operator and people's keys register agents.
async fn closed_hub() -> TestHub {
    let hub =
        TestHub::start_with(Options::default().env("SWITCHBOARD_REGISTRATION__MODE", "closed"))
            .await;
    let (status, _) = hub
        .post("/api/v1/agents/register", &json!({ "name": "x" }))
        .await;
    assert_eq!(status, 403, "registration is closed");
    hub
}

#[tokio::test]
async fn owners_list_and_revoke_their_agents_keys_and_nobody_else_does() {
    let hub = closed_hub().await;
    let (p, q) = (person(&hub, "pat").await, person(&hub, "quinn").await);
    let (status, cache, registered) = register_owned(&hub, &p, "helper").await;
    assert_eq!((status, cache.as_str()), (201, "no-store"), "{registered}");
    assert_eq!(registered["ownerId"], json!(p.id));
    let agent_id = registered["agentId"].as_str().unwrap().to_string();
    let agent_key = registered["agentKey"].as_str().unwrap().to_string();
    let (_, _, replay) = register_owned(&hub, &p, "helper").await;
    assert_eq!(
        replay,
        json!({ "agentId": agent_id, "ownerId": p.id, "keyWithheld": true })
    );

    // The owner lists the agent with its key id, never a hash.
    let (status, listed) = my_agents(&hub, &p.key).await;
    assert_eq!(status, 200, "{listed}");
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let key_id = switchboard::domain::keys::parse(&agent_key).unwrap().key_id;
    assert_eq!(
        listed,
        json!({ "agents": [{ "agentId": agent_id, "name": "helper",
            "createdAt": listed["agents"][0]["createdAt"],
            "keys": [{ "keyId": key_id, "createdAt": listed["agents"][0]["keys"][0]["createdAt"] }] }] })
    );
    assert!(listed["agents"][0]["keys"][0]["createdAt"].is_string());
    assert_eq!(my_agents(&hub, &q.key).await.1, r#"{"agents":[]}"#);
    assert_eq!(
        my_agents(&hub, &agent_key).await.0,
        403,
        "an agent owns nothing"
    );

    // Another person's revoke is the unknown agent's answer, byte for byte;
    // the agent's own key is no owner's.
    let hidden = revoke_answer(&hub, &agent_id, &q.key).await;
    let missing = revoke_answer(&hub, &Uuid::new_v4().to_string(), &q.key).await;
    assert_eq!(hidden.0, 404);
    assert!(
        hidden.1.iter().any(|h| h.starts_with("content-type: ")),
        "{:?}",
        hidden.1
    );
    assert_eq!(hidden, missing);
    assert_eq!(revoke_agent(&hub, &agent_id, &agent_key).await.0, 403);

    // The owner revokes: the agent's socket closes with 4003.
    let mut socket = RawSocket::connect_agent(&hub.ws_url(), &agent_key).await;
    let revoked = revoke_agent(&hub, &agent_id, &p.key).await;
    assert_eq!(revoked.0, 204, "{}", revoked.1);
    assert_eq!(socket.closed().await.map(|c| c.0), Some(4003));
    let listed: Value = serde_json::from_str(&my_agents(&hub, &p.key).await.1).unwrap();
    assert!(
        listed["agents"][0]["keys"][0]["revokedAt"].is_string(),
        "{listed}"
    );
}

#[tokio::test]
async fn the_operator_sets_and_clears_owners_over_rest_and_cli() {
    let hub = closed_hub().await;
    let (p, q) = (person(&hub, "pat").await, person(&hub, "quinn").await);
    let (_, _, registered) = register_owned(&hub, &p, "helper").await;
    let agent_id = registered["agentId"].as_str().unwrap().to_string();

    let moved = put_owner(&hub, &agent_id, ADMIN_TOKEN, json!(q.id)).await;
    assert_eq!(moved.0, 200, "{}", moved.1);
    assert!(my_agents(&hub, &q.key).await.1.contains(&agent_id));
    assert_eq!(my_agents(&hub, &p.key).await.1, r#"{"agents":[]}"#);
    let by_person = put_owner(&hub, &agent_id, &p.key, json!(p.id)).await;
    assert_eq!(by_person.0, 401, "only the operator sets owners");
    let not_a_person = put_owner(&hub, &agent_id, ADMIN_TOKEN, json!(agent_id)).await;
    assert_eq!(not_a_person.0, 400);
    assert!(not_a_person.1.contains("/ownerId"), "{}", not_a_person.1);
    let unknown = put_owner(&hub, &Uuid::new_v4().to_string(), ADMIN_TOKEN, json!(q.id)).await;
    assert_eq!(unknown.0, 404);
    let path = format!("/api/v1/agents/{agent_id}/owner");
    let cleared = with_bearer(&hub, Method::DELETE, &path, ADMIN_TOKEN, None).await;
    assert_eq!(cleared.0, 204);
    assert_eq!(my_agents(&hub, &q.key).await.1, r#"{"agents":[]}"#);
    // The operator revokes any agent's keys.
    assert_eq!(revoke_agent(&hub, &agent_id, ADMIN_TOKEN).await.0, 204);

    // The CLI registers an owned agent and clears its owner.
    let data = hub.dir.path().join("data");
    let owner = p.id.to_string();
    let out = cli(
        &data,
        &[
            "agent",
            "register",
            "--name",
            "cli-helper",
            "--owner",
            &owner,
        ],
    );
    let cli_agent = field(&out, "agent id:");
    assert!(my_agents(&hub, &p.key).await.1.contains(&cli_agent));
    cli(&data, &["agent", "set-owner", "--id", &cli_agent, "--none"]);
    assert!(!my_agents(&hub, &p.key).await.1.contains(&cli_agent));
    cli(
        &data,
        &["agent", "set-owner", "--id", &cli_agent, "--owner", &owner],
    );
    assert!(my_agents(&hub, &p.key).await.1.contains(&cli_agent));
}

/// A person's key registers an owned agent in `open` and `secret` modes
/// too (no secret asked of it); an agent's or an app's key registers
/// nothing (403), whatever the mode.
#[tokio::test]
async fn a_persons_key_registers_in_every_mode_and_no_other_key_does() {
    let open = TestHub::start().await;
    let secret = TestHub::start_with(
        Options::default()
            .env("SWITCHBOARD_REGISTRATION__MODE", "secret")
            .env("SWITCHBOARD_REGISTRATION__SECRET", "invite-only-secret-42"),
    )
    .await;
    for hub in [&open, &secret] {
        let p = person(hub, "pat").await;
        let (status, body) = register_with(hub, &p.key, "helper").await;
        assert_eq!(status, 201, "{body}");
        assert_eq!(body["ownerId"], json!(p.id));
        let agent_id = body["agentId"].as_str().unwrap();
        assert!(my_agents(hub, &p.key).await.1.contains(agent_id));
    }
    let (status, body) = secret
        .post("/api/v1/agents/register", &json!({ "name": "anonymous" }))
        .await;
    assert_eq!(status, 401, "no secret, no key: {body}");

    let (_, agent_key) = open.register_agent("ada").await;
    let (_, app_key) = open.register_app(&werewolf_manifest()).await;
    for key in [&agent_key, &app_key] {
        let (status, body) = register_with(&open, key, "spawned").await;
        assert_eq!(status, 403, "{body}");
        assert_eq!(body["error"]["code"], "forbidden", "{body}");
    }
}

/// An owner disabled between its key check and the insert: on the Bearer
/// path that is the bad key it has become (401), never a refused
/// `ownerId` the body has not; the operator's `--owner` is refused as such.
#[tokio::test]
async fn an_owner_disabled_before_the_insert_is_a_bad_key_on_the_bearer_path() {
    let (store, _dir) = crate::store_contract::sqlite().await;
    let p = switchboard::identity::create_person(store.as_ref(), &json!({ "name": "pat" }), None)
        .await
        .unwrap();
    switchboard::identity::disable_person(store.as_ref(), p.id)
        .await
        .unwrap();
    let doc = json!({ "name": "helper" });
    let by_key =
        switchboard::identity::register_owned_agent(store.as_ref(), &doc, Some(p.id), None).await;
    assert!(matches!(by_key, Err(IdentityError::BadKey)), "{by_key:?}");
    let named =
        switchboard::identity::register_agent_owned_by(store.as_ref(), &doc, Some(p.id), None)
            .await;
    assert!(
        matches!(named, Err(IdentityError::OwnerRefused)),
        "{named:?}"
    );
    assert!(store.owned_agents(p.id).await.unwrap().is_empty());
}
