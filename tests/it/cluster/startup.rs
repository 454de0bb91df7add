//! Starting in cluster mode: node ids in `/readyz`, SQLite refused.

use std::time::Duration;

use super::harness::ClusterHarness;
use crate::support::TestHub;

#[tokio::test]
async fn every_node_reports_its_id_and_its_link_in_readyz() {
    let cluster = ClusterHarness::start(3).await;
    for n in 1..=3 {
        let (status, body) = cluster.readyz(n).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            body,
            format!(
                "ready\nnode: {}\ncluster: nats connected\n",
                ClusterHarness::node_id(n)
            )
        );
    }
}

#[tokio::test]
async fn a_single_node_gets_a_random_id() {
    let (a, b) = (TestHub::start().await, TestHub::start().await);
    let mut ids = Vec::new();
    for hub in [&a, &b] {
        let body = hub.readyz().await.1;
        let lines: Vec<&str> = body.lines().collect();
        assert_eq!(lines[0], "ready");
        assert_eq!(lines[2], "cluster: single");
        let id = lines[1].strip_prefix("node: ").expect("a node line");
        assert_eq!(id.len(), 12, "{id}");
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
        ids.push(id.to_string());
    }
    assert_ne!(ids[0], ids[1]);
}

#[tokio::test]
async fn nats_mode_on_sqlite_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .arg("serve")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--data-dir")
            .arg(dir.path())
            .env("SWITCHBOARD_CLUSTER__MODE", "nats")
            .env("SWITCHBOARD_CLUSTER__NATS_URL", "nats://127.0.0.1:9")
            .stdin(std::process::Stdio::null())
            .output(),
    )
    .await
    .expect("serve exits")
    .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cluster.mode = \"nats\" needs PostgreSQL"),
        "{stderr}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("listening"),
        "it must not serve"
    );
}

/// A node outlives NATS and NATS outlives a node: each comes back and the
/// link is made again, on NATS's same port.
#[tokio::test]
async fn nodes_rejoin_after_nats_and_nodes_come_back() {
    let mut cluster = ClusterHarness::start(2).await;
    cluster.stop_nats().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = cluster.readyz(1).await;
        assert_eq!(status, 200, "a node without NATS still serves: {body}");
        if body.contains("cluster: nats disconnected") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{body}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    cluster.start_nats().await;
    cluster.kill(2).await;
    cluster.restart(2).await;
    assert!(cluster.stop(1).await.success());
    cluster.restart(1).await;
    for n in 1..=2 {
        assert!(cluster.readyz(n).await.1.contains("nats connected"));
    }
}
