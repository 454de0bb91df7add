//! A node id is held by one process at a time (ADR 0034, 2026-12-02): a
//! second process configured with a live node's id refuses to start, and
//! the id is free again once the first one's presence lease lapsed.

use std::time::Duration;

use tokio::time::Instant;

use super::harness::ClusterHarness;
use super::hook_nodes::with_env;
use crate::support::TestHub;

#[tokio::test]
async fn a_second_process_with_a_live_nodes_id_refuses_to_start() {
    let mut nodes = ClusterHarness::start_with(
        1,
        with_env(&[
            ("SWITCHBOARD_CLUSTER__PRESENCE_LEASE_MS", "2000"),
            ("SWITCHBOARD_CLUSTER__PRESENCE_RENEW_MS", "300"),
        ]),
    )
    .await;
    let refused = TestHub::try_start_with(nodes.options(1))
        .await
        .err()
        .expect("a second node-1 must not serve");
    assert!(!refused.status.success(), "{}", refused.status);
    assert!(
        refused
            .log
            .contains("cluster.node_id \"node-1\" is held by another live node"),
        "{}",
        refused.log
    );
    let (status, body) = nodes.readyz(1).await;
    assert_eq!(status, 200, "the first node-1 still serves: {body}");

    nodes.kill(1).await;
    let killed = Instant::now();
    // Its lease is still live: refused until it lapses, then it starts.
    let deadline = killed + Duration::from_secs(30);
    let hub = loop {
        match TestHub::try_start_with(nodes.options(1)).await {
            Ok(hub) => break hub,
            Err(refused) => {
                assert!(
                    refused.log.contains("is held by another live node"),
                    "{}",
                    refused.log
                );
                assert!(Instant::now() < deadline, "node-1 never started again");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert!(
        killed.elapsed() >= Duration::from_millis(1_000),
        "the killed node's lease (2 s, renewed every 300 ms) kept its id for a while"
    );
    let body = hub.readyz().await.1;
    assert!(body.contains("node: node-1"), "{body}");
}
