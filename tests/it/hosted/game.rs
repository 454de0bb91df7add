//! The sample game (`examples/rps`, issue 18): its package, carrying the
//! `switchboard_app` SDK, signed with a new author key, installed over REST
//! and run by the hub; two agents play a round through the broker alone.

use std::path::Path;

use serde_json::json;
use switchboard::client::AgentClient;
use switchboard::protocol::tasks::{AgentTaskRequest, TaskRequestParams};
use uuid::Uuid;

use super::runs::{ended, install_over_rest, start};
use super::{cli_sync, Card};
use crate::support::agents::{agent, next_of, send};
use crate::support::TestHub;

/// `examples/rps` with the SDK beside it, signed as its author would.
fn example_package() -> Card {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = tempfile::tempdir().expect("tempdir");
    let pkg = root.path().join("pkg");
    std::fs::create_dir_all(pkg.join("switchboard_app")).unwrap();
    for name in ["app.json", "main.py", "README.md"] {
        std::fs::copy(repo.join("examples/rps").join(name), pkg.join(name)).unwrap();
    }
    std::fs::copy(
        repo.join("sdk/python/switchboard_app/__init__.py"),
        pkg.join("switchboard_app/__init__.py"),
    )
    .unwrap();
    let key = root.path().join("author.key");
    let (ok, _, err) = cli_sync(&["card", "keygen", "--out", key.to_str().unwrap()]);
    assert!(ok, "{err}");
    let (ok, out, err) = cli_sync(&[
        "card",
        "sign",
        pkg.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ]);
    assert!(ok, "{out}{err}");
    Card { root }
}

/// The next message the app wrote that `rx`'s agent received.
async fn from_app(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<switchboard::client::Notification>,
    app: Uuid,
) -> String {
    loop {
        let got = next_of(rx, "agent/message/received").await;
        let m = &got["payload"]["message"];
        if m["senderId"] == json!(app) {
            return m["parts"][0]["text"].as_str().unwrap().to_string();
        }
    }
}

#[tokio::test]
async fn two_agents_play_a_round_of_the_sample_game_through_the_broker() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let c = example_package();
    install_over_rest(&hub, &c).await;
    let run = start(&hub, "rock-paper-scissors").await;
    let app: Uuid = run["appId"].as_str().unwrap().parse().unwrap();
    let (alice, bob) = (agent(&hub, "alice").await, agent(&hub, "bob").await);
    let a = AgentClient::connect(&hub.base, &alice.key).await.unwrap();
    let b = AgentClient::connect(&hub.base, &bob.key).await.unwrap();
    let mut a_rx = a.connection.notifications().expect("notifications");
    let mut b_rx = b.connection.notifications().expect("notifications");
    a.call::<AgentTaskRequest>(TaskRequestParams {
        app_id: app,
        invited_agent_ids: vec![bob.id],
        initial_conversation: None,
    })
    .await
    .unwrap();
    let created = next_of(&mut b_rx, "agent/conversation/created").await;
    let room: Uuid = created["payload"]["conversation"]["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let asked = "Round 1: reply rock, paper or scissors";
    assert_eq!(from_app(&mut a_rx, app).await, asked);
    assert_eq!(from_app(&mut b_rx, app).await, asked);

    send(&b, room, "a lizard").await;
    assert_eq!(
        from_app(&mut b_rx, app).await,
        "Say rock, paper or scissors"
    );
    send(&a, room, "Rock").await;
    send(&b, room, "scissors").await;
    let result = format!(
        "{} played rock, {} played scissors: {} wins",
        alice.id, bob.id, alice.id
    );
    let (mut to_alice, mut to_bob) = (
        from_app(&mut a_rx, app).await,
        from_app(&mut b_rx, app).await,
    );
    // alice also received bob's retry prompt.
    if to_alice != result {
        to_alice = from_app(&mut a_rx, app).await;
    }
    if to_bob != result {
        to_bob = from_app(&mut b_rx, app).await;
    }
    assert_eq!(
        (to_alice.as_str(), to_bob.as_str()),
        (result.as_str(), result.as_str())
    );
    let end = ended(&hub, run["runId"].as_str().unwrap()).await;
    assert_eq!(
        (end["state"].clone(), end["exitCode"].clone()),
        (json!("exited"), json!(0)),
        "{end}"
    );
}
