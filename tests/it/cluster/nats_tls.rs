//! NATS over TLS (ADR 0034, 2026-12-02): a throwaway CA and a server
//! certificate for 127.0.0.1, made in the test with rcgen (as the webhook
//! receiver's CA is), and a `nats-server` with `tls { cert_file, key_file }`
//! on loopback. A node given the CA joins and delivers across nodes; one
//! without it, or with another CA, does not start; a node that requires
//! TLS does not start against a plaintext server.

use std::path::{Path, PathBuf};

use switchboard::client::AgentClient;
use tempfile::TempDir;

use super::harness::{ClusterHarness, Settings};
use crate::support::agents::{agent, direct, next_of, send};
use crate::support::nats::Nats;
use crate::support::TestHub;

const CA_FILE: &str = "SWITCHBOARD_CLUSTER__NATS_TLS_CA_FILE";
const TLS_REQUIRED: &str = "SWITCHBOARD_CLUSTER__NATS_TLS_REQUIRED";

/// The files one test's TLS needs, in a directory that lives as long as
/// the test.
struct Pki {
    _dir: TempDir,
    ca: PathBuf,
    /// A CA that signed nothing the server shows.
    other_ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

fn self_signed_ca(name: &str) -> (rcgen::Certificate, rcgen::KeyPair) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    (params.self_signed(&key).unwrap(), key)
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let (ca, ca_key) = self_signed_ca("switchboard NATS test CA");
        let (other, _) = self_signed_ca("another test CA");
        let server_key = rcgen::KeyPair::generate().unwrap();
        let server =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
                .unwrap()
                .signed_by(&server_key, &ca, &ca_key)
                .unwrap();
        Pki {
            ca: write(dir.path(), "ca.pem", &ca.pem()),
            other_ca: write(dir.path(), "other-ca.pem", &other.pem()),
            cert: write(dir.path(), "server.pem", &server.pem()),
            key: write(dir.path(), "server-key.pem", &server_key.serialize_pem()),
            _dir: dir,
        }
    }

    /// A nats-server that speaks TLS only.
    async fn server(&self) -> Nats {
        Nats::start_with_config(&format!(
            "tls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n  timeout: 5\n}}\n",
            self.cert.display(),
            self.key.display()
        ))
        .await
    }
}

fn with_env(settings: Settings, env: &[(&str, String)]) -> Settings {
    let mut settings = settings;
    for (k, v) in env {
        settings.env.push((k.to_string(), v.clone()));
    }
    settings
}

/// Node `n`'s options with `key` removed, or set to `value`.
fn options_with(
    nodes: &ClusterHarness,
    n: usize,
    key: &str,
    value: Option<&str>,
) -> crate::support::hub::Options {
    let mut options = nodes.options(n);
    options.env.retain(|(k, _)| k != key);
    match value {
        Some(v) => options.env(key, v),
        None => options,
    }
}

/// A node that must not serve: its exit and log.
async fn refused_start(options: crate::support::hub::Options) -> String {
    let refused = TestHub::try_start_with(options)
        .await
        .err()
        .expect("the node must not serve");
    assert!(!refused.status.success(), "{}", refused.log);
    refused.log
}

#[tokio::test]
async fn a_node_with_the_ca_joins_over_tls_and_delivers_across_nodes() {
    let pki = Pki::new();
    let nats = pki.server().await;
    assert!(
        nats.log().contains("TLS required for client connections"),
        "{}",
        nats.log()
    );
    let settings = Settings {
        // Slower than next_of's deadline: only wake-ups over TLS deliver.
        poll_interval_ms: 600_000,
        ..Settings::default()
    };
    let settings = with_env(
        settings,
        &[
            (CA_FILE, pki.ca.display().to_string()),
            (TLS_REQUIRED, "true".to_string()),
        ],
    );
    let nodes = ClusterHarness::start_on(2, settings, nats).await;
    let sender = agent(nodes.node(1), "tls-sender").await;
    let reader = agent(nodes.node(2), "tls-reader").await;
    let on_two = AgentClient::connect(&nodes.node(2).base, &reader.key)
        .await
        .unwrap();
    let mut events = on_two.connection.notifications().unwrap();
    let on_one = AgentClient::connect(&nodes.node(1).base, &sender.key)
        .await
        .unwrap();
    let conversation = direct(&on_one, reader.id).await;
    send(&on_one, conversation, "over TLS").await;
    let received = next_of(&mut events, "agent/message/received").await;
    assert_eq!(
        received["payload"]["message"]["parts"][0]["text"],
        serde_json::json!("over TLS")
    );
    let wakes = nodes
        .node(2)
        .metric(
            "switchboard_cluster_messages_total",
            "direction=\"received\",kind=\"wake\"",
        )
        .await;
    assert!(wakes > 0.0, "node 2 took its wake-ups over TLS");
}

#[tokio::test]
async fn a_node_without_the_ca_or_with_another_ca_does_not_start() {
    let pki = Pki::new();
    let nats = pki.server().await;
    let settings = with_env(
        Settings::default(),
        &[(CA_FILE, pki.ca.display().to_string())],
    );
    let nodes = ClusterHarness::start_on(1, settings, nats).await;
    let other_ca = pki.other_ca.display().to_string();
    for (what, ca) in [("no CA", None), ("another CA", Some(other_ca.as_str()))] {
        let log = refused_start(options_with(&nodes, 2, CA_FILE, ca)).await;
        assert!(
            log.contains("NATS refused this node: the TLS handshake failed"),
            "{what}: {log}"
        );
        assert!(log.contains("cluster.nats_tls_ca_file"), "{what}: {log}");
    }
    // The node with the CA was never disturbed.
    let (status, body) = nodes.readyz(1).await;
    assert_eq!(status, 200);
    assert!(body.contains("cluster: nats connected"), "{body}");
}

#[tokio::test]
async fn a_node_that_requires_tls_does_not_start_against_a_plaintext_server() {
    let nodes = ClusterHarness::start_on(1, Settings::default(), Nats::start().await).await;
    let log = refused_start(options_with(&nodes, 2, TLS_REQUIRED, Some("true"))).await;
    assert!(log.contains("NATS refused this node"), "{log}");
    assert!(log.contains("TLS"), "{log}");
}
