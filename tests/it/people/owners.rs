//! Agents owned by people: registered with the person's key in every
//! registration mode, listed and revoked by their owner only, moved and
//! cleared by the operator (REST and CLI).

use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

use super::{cli, field, person, with_bearer, Person};
use crate::support::hub::{Options, ADMIN_TOKEN};
use crate::support::{RawSocket, TestHub};

/// `GET /api/v1/people/me/agents` with `key`: the status and raw body.
async fn my_agents(hub: &TestHub, key: &str) -> (u16, String) {
    with_bearer(hub, Method::GET, "/api/v1/people/me/agents", key, None).await
}

async fn revoke_agent(hub: &TestHub, agent: &str, token: &str) -> (u16, String) {
    let path = format!("/api/v1/agents/{agent}/keys/revoke");
    with_bearer(hub, Method::POST, &path, token, None).await
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
    let hidden = revoke_agent(&hub, &agent_id, &q.key).await;
    let missing = revoke_agent(&hub, &Uuid::new_v4().to_string(), &q.key).await;
    assert_eq!(hidden.0, 404);
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
