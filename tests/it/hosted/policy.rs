//! `reply_policy` (ADR 0031 §9), signed with the card: `metered` is refused
//! at install (CLI and REST), and `members` refuses a stranger's task
//! request and accepts a room member's.

use serde_json::json;
use switchboard::client::AgentClient;
use switchboard::protocol::tasks::{AgentTaskRequest, TaskRequestParams};

use super::runs::{admin, ended, install_body, install_over_rest, start};
use super::{card_with, cli_sync};
use crate::support::agents::agent;
use crate::support::TestHub;

const QUIET: &str = "pass\n";

#[tokio::test]
async fn a_metered_card_is_refused_at_install() {
    let c = card_with(
        "toll",
        &["whoami"],
        QUIET,
        &[],
        json!({"reply_policy": "metered"}),
        None,
    );
    crate::support::migrate(&c.data(), None);
    let (ok, out, err) = cli_sync(&[
        "card",
        "install",
        c.dir().to_str().unwrap(),
        "--data-dir",
        c.data().to_str().unwrap(),
    ]);
    assert!(!ok, "{out}{err}");
    assert!(
        err.contains("reply_policy_not_defined") && err.contains("not defined yet"),
        "{err}"
    );
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let (status, body) = admin(
        &hub,
        reqwest::Method::POST,
        "/api/v1/cards",
        Some(install_body(&c)),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "reply_policy_not_defined", "{body}");
    // A card that is not refused for its policy installs (the same shape).
    let open = card_with(
        "toll",
        &["whoami"],
        QUIET,
        &[],
        json!({"reply_policy": "all"}),
        None,
    );
    install_over_rest(&hub, &open).await;
}

#[tokio::test]
async fn members_refuses_a_stranger_and_accepts_a_room_member() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let v1 = card_with("door", &["whoami"], QUIET, &[], json!({}), None);
    install_over_rest(&hub, &v1).await;
    let first = start(&hub, "door").await;
    ended(&hub, first["runId"].as_str().unwrap()).await;
    let app_id: uuid::Uuid = first["appId"].as_str().unwrap().parse().unwrap();
    let (alice, bob, carol) = (
        agent(&hub, "alice").await,
        agent(&hub, "bob").await,
        agent(&hub, "carol").await,
    );
    let request = |invited: Vec<uuid::Uuid>| TaskRequestParams {
        app_id,
        invited_agent_ids: invited,
        initial_conversation: None,
    };
    let a = AgentClient::connect(&hub.base, &alice.key).await.unwrap();
    // Open door: alice's task makes alice and bob members of a room.
    a.call::<AgentTaskRequest>(request(vec![bob.id]))
        .await
        .unwrap();

    // The author closes the door in the next version, signed with the
    // same key; the next run records it.
    let key = v1.root.path().join("author.key");
    let v2 = card_with(
        "door",
        &["whoami"],
        QUIET,
        &[],
        json!({"version": "1.1.0", "reply_policy": "members"}),
        Some(&key),
    );
    install_over_rest(&hub, &v2).await;
    let second = start(&hub, "door").await;
    assert_eq!(second["version"], "1.1.0");
    ended(&hub, second["runId"].as_str().unwrap()).await;

    let c = AgentClient::connect(&hub.base, &carol.key).await.unwrap();
    let refused = c
        .call::<AgentTaskRequest>(request(vec![alice.id]))
        .await
        .expect_err("a stranger is refused");
    let refused = format!("{refused:?}");
    assert!(refused.contains("not_a_member"), "{refused}");
    let b = AgentClient::connect(&hub.base, &bob.key).await.unwrap();
    let accepted = b
        .call::<AgentTaskRequest>(request(vec![carol.id]))
        .await
        .expect("a room member is accepted");
    assert_eq!(accepted.task.app_id, app_id);
    // Now carol shares a room with the app too.
    c.call::<AgentTaskRequest>(request(vec![]))
        .await
        .expect("carol is a member now");
}
