//! What NATS itself limits and checks (ADR 0034, 2026-12-02): an answer
//! larger than the server's `max_payload` is `bad_result`, not a wait
//! ending in `timeout`; a server that requires an nkey user takes the
//! node with the seed and refuses, at start, the node without it.

use serde_json::json;

use super::harness::{ClusterHarness, Settings};
use super::hooks::{answer_one, failure, setup};
use crate::support::nats::Nats;
use crate::support::{RawSocket, TestHub};

const MAX_PAYLOAD: usize = 16 * 1024;

#[tokio::test]
async fn an_answer_over_max_payload_is_bad_result() {
    let nats = Nats::start_with_config(&format!("max_payload: {MAX_PAYLOAD}\n")).await;
    let nodes = ClusterHarness::start_on(3, Settings::default(), nats).await;
    let s = setup(&nodes, 3_000).await;
    let mut raw = RawSocket::connect_app(&nodes.node(3).ws_url(), &s.app_key).await;
    let large = json!({"result": {
        "verdict": {"decision": "Accept"},
        "note": "x".repeat(MAX_PAYLOAD * 3),
    }});
    let (result, ()) = tokio::join!(s.request(), answer_one(&mut raw, &large));
    assert_eq!(
        failure(result).1,
        json!("invalid_answer"),
        "the answer was too large for NATS: bad_result, not timeout"
    );
    assert_eq!(
        nodes
            .node(3)
            .metric(
                "switchboard_cluster_hook_relays_total",
                "outcome=\"answer_too_large\""
            )
            .await,
        1.0
    );
    // A small answer still travels.
    let small = json!({"result": {"verdict": {"decision": "Accept"}}});
    let (result, ()) = tokio::join!(s.request(), answer_one(&mut raw, &small));
    assert!(result.is_ok(), "{result:?}");
}

#[tokio::test]
async fn a_node_with_the_nkey_seed_joins_and_one_without_it_does_not_start() {
    let user = nkeys::KeyPair::new_user();
    let nats = Nats::start_with_config(&format!(
        "authorization {{\n  users = [ {{ nkey: {} }} ]\n}}\n",
        user.public_key()
    ))
    .await;
    let seed_file = nats.dir().join("node.nk");
    std::fs::write(&seed_file, format!("{}\n", user.seed().unwrap())).unwrap();
    let settings = Settings {
        env: vec![(
            "SWITCHBOARD_CLUSTER__NATS_NKEY_SEED_FILE".to_string(),
            seed_file.display().to_string(),
        )],
        ..Settings::default()
    };
    let nodes = ClusterHarness::start_on(1, settings, nats).await;
    let (status, body) = nodes.readyz(1).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("cluster: nats connected"), "{body}");

    let mut without = nodes.options(2);
    without
        .env
        .retain(|(k, _)| k != "SWITCHBOARD_CLUSTER__NATS_NKEY_SEED_FILE");
    let refused = TestHub::try_start_with(without)
        .await
        .err()
        .expect("a node without the seed must not serve");
    assert!(!refused.status.success());
    assert!(
        refused.log.contains("NATS refused this node"),
        "{}",
        refused.log
    );
    assert!(
        !refused.log.contains(&user.seed().unwrap()),
        "no seed in the log"
    );
}
