//! A person's keys: of one kind only, within its audience, rotated,
//! revoked and disabled with 4003.

use serde_json::{json, Value};
use uuid::Uuid;

use super::{cli, connect_person, field, person, refused_connect};
use switchboard::client::AgentClient;

use crate::support::agents::{agent, direct, send};
use crate::support::hub::{Options, ADMIN_TOKEN};
use crate::support::{RawSocket, TestHub};

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

/// The agent's send into `conversation`: how many it was forwarded to.
async fn forwarded_to(sender: &AgentClient, conversation: Uuid) -> u64 {
    let sent = send(sender, conversation, "anyone there?").await;
    let delivery = serde_json::to_value(sent.delivery).unwrap();
    delivery["recipients"].as_u64().unwrap()
}

/// A disabled person is out of every fan-out (ADR 0020 §1), whether the
/// operator disabled it over REST (this process forgets its cached
/// memberships at once) or with the CLI (the revocation sweep does).
#[tokio::test]
async fn a_disabled_person_receives_nothing_more() {
    let hub = TestHub::start_with(
        Options::default().env("SWITCHBOARD_GATEWAY__REVOCATION_CHECK_INTERVAL_MS", 100),
    )
    .await;
    let (p, q) = (person(&hub, "pat").await, person(&hub, "quinn").await);
    let a = agent(&hub, "ada").await;
    let ca = AgentClient::connect(&hub.base, &a.key).await.unwrap();
    let (with_p, with_q) = (direct(&ca, p.id).await, direct(&ca, q.id).await);
    assert_eq!(forwarded_to(&ca, with_p).await, 1);
    assert_eq!(forwarded_to(&ca, with_q).await, 1);

    let r = hub
        .http
        .post(format!("{}/api/v1/people/{}/disable", hub.base, p.id))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(forwarded_to(&ca, with_p).await, 0);

    let (mut s, _) = connect_person(&hub, &q.key).await;
    cli(
        &hub.dir.path().join("data"),
        &["person", "disable", "--id", &q.id.to_string()],
    );
    assert_eq!(s.closed().await.map(|c| c.0), Some(4003));
    assert_eq!(forwarded_to(&ca, with_q).await, 0);
    // A disabled person is no new participant either.
    let err = ca
        .call::<switchboard::protocol::conversations::AgentConversationCreate>(
            switchboard::protocol::conversations::ConversationCreateParams {
                kind: switchboard::protocol::conversations::NewConversationKind::Group,
                participants: vec![q.id],
                name: None,
            },
        )
        .await
        .unwrap_err();
    assert!(format!("{err:?}").contains("NotFound"), "{err:?}");
}

/// A person with no active key disabled by the CLI revokes no key row:
/// the sweep still learns it (ADR 0020 §1). The CLI's revoke-key makes
/// the sweep drop the cache, the next send refills it with the person
/// active; after the disable, sends reach nobody once the sweep has run.
#[tokio::test]
async fn a_person_disabled_without_a_key_by_the_cli_leaves_every_fan_out() {
    let hub = TestHub::start_with(
        Options::default().env("SWITCHBOARD_GATEWAY__REVOCATION_CHECK_INTERVAL_MS", 100),
    )
    .await;
    let data = hub.dir.path().join("data");
    let q = person(&hub, "quinn").await;
    let a = agent(&hub, "ada").await;
    let ca = AgentClient::connect(&hub.base, &a.key).await.unwrap();
    let with_q = direct(&ca, q.id).await;
    let (mut s, _) = connect_person(&hub, &q.key).await;
    cli(&data, &["person", "revoke-key", "--id", &q.id.to_string()]);
    // The sweep has run once it closed the socket: the cache it dropped
    // refills with quinn active on the next send.
    assert_eq!(s.closed().await.map(|c| c.0), Some(4003));
    assert_eq!(forwarded_to(&ca, with_q).await, 1);

    let out = cli(&data, &["person", "disable", "--id", &q.id.to_string()]);
    assert!(out.contains("revoked 0 key(s)"), "{out}");
    // Many sweep intervals: a send before the sweep may still count quinn,
    // one after it must not.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if forwarded_to(&ca, with_q).await == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "a person disabled elsewhere is still a recipient after many sweeps"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
