//! N real `switchboard serve` processes in `nats` mode on one throwaway
//! PostgreSQL database and one throwaway `nats-server`, each on 127.0.0.1
//! port 0. Nodes are numbered from 1 (`node-1`, ...), as the issue names
//! them; each can be stopped (SIGTERM, drained), killed (SIGKILL) and
//! started again, and NATS stopped and started again on its port.

use std::time::Duration;

use tokio::time::Instant;

use crate::support::hub::Options;
use crate::support::nats::Nats;
use crate::support::{pg, TestHub};

/// How long a node may take to (re)join NATS before the test fails.
const JOIN_WITHIN: Duration = Duration::from_secs(30);

/// The timings every node runs with.
#[derive(Clone, Debug)]
pub struct Settings {
    pub poll_interval_ms: u64,
    pub control_latency_ms: u64,
    pub revocation_check_interval_ms: u64,
    /// More `SWITCHBOARD_*` variables for every node.
    pub env: Vec<(String, String)>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            poll_interval_ms: 500,
            control_latency_ms: 2_000,
            revocation_check_interval_ms: 1_000,
            env: Vec::new(),
        }
    }
}

pub struct ClusterHarness {
    pub database_url: String,
    pub nats: Nats,
    pub settings: Settings,
    nodes: Vec<Option<TestHub>>,
}

impl ClusterHarness {
    pub async fn start(nodes: usize) -> ClusterHarness {
        Self::start_with(nodes, Settings::default()).await
    }

    /// Starts NATS, then node 1 alone (it migrates the database), then the
    /// others at once, and waits until every node is on NATS.
    pub async fn start_with(nodes: usize, settings: Settings) -> ClusterHarness {
        Self::start_on(nodes, settings, Nats::start().await).await
    }

    /// As [`Self::start_with`], on a NATS server the test started.
    pub async fn start_on(nodes: usize, settings: Settings, nats: Nats) -> ClusterHarness {
        assert!(nodes >= 1);
        let mut cluster = ClusterHarness {
            database_url: pg::fresh_database().await,
            nats,
            settings,
            nodes: (0..nodes).map(|_| None).collect(),
        };
        cluster.nodes[0] = Some(cluster.spawn(1).await);
        let rest = futures_util::future::join_all((2..=nodes).map(|n| cluster.spawn(n))).await;
        for (i, hub) in rest.into_iter().enumerate() {
            cluster.nodes[i + 1] = Some(hub);
        }
        for n in 1..=nodes {
            cluster.wait_joined(n).await;
        }
        cluster
    }

    pub fn node_id(n: usize) -> String {
        format!("node-{n}")
    }

    /// Node `n` (from 1); panics when it is stopped.
    pub fn node(&self, n: usize) -> &TestHub {
        self.nodes[n - 1]
            .as_ref()
            .unwrap_or_else(|| panic!("node {n} is stopped"))
    }

    /// The options node `n` runs with: the suite's fast limits, the shared
    /// database and the cluster settings.
    pub fn options(&self, n: usize) -> Options {
        let s = &self.settings;
        let mut o = Options {
            database_url: Some(self.database_url.clone()),
            ..TestHub::fast_options()
        }
        .env("SWITCHBOARD_CLUSTER__MODE", "nats")
        .env("SWITCHBOARD_CLUSTER__NATS_URL", &self.nats.url)
        .env("SWITCHBOARD_CLUSTER__NODE_ID", Self::node_id(n))
        .env("SWITCHBOARD_CLUSTER__POLL_INTERVAL_MS", s.poll_interval_ms)
        .env(
            "SWITCHBOARD_CLUSTER__CONTROL_LATENCY_MS",
            s.control_latency_ms,
        )
        .env(
            "SWITCHBOARD_GATEWAY__REVOCATION_CHECK_INTERVAL_MS",
            s.revocation_check_interval_ms,
        );
        for (k, v) in &s.env {
            o = o.env(k, v);
        }
        o
    }

    async fn spawn(&self, n: usize) -> TestHub {
        TestHub::start_with(self.options(n)).await
    }

    /// Stops node `n` with SIGTERM and waits for its drain to end.
    pub async fn stop(&mut self, n: usize) -> std::process::ExitStatus {
        self.terminate(n);
        self.wait_stopped(n).await
    }

    /// Sends node `n` SIGTERM without waiting: it drains while the test
    /// goes on (its sockets close as their calls end).
    pub fn terminate(&self, n: usize) {
        self.node(n).signal(libc::SIGTERM);
    }

    /// Waits for node `n`, signalled, to exit.
    pub async fn wait_stopped(&mut self, n: usize) -> std::process::ExitStatus {
        let mut hub = self.nodes[n - 1].take().expect("node runs");
        hub.wait_exit(Duration::from_secs(60)).await
    }

    /// Starts node `n` again once, with its node id, and waits until it is
    /// on NATS: after a SIGTERM its drain released the id's lease, so a
    /// refusal fails the test (unlike [`Self::restart`] after a kill).
    pub async fn start_again(&mut self, n: usize) {
        assert!(self.nodes[n - 1].is_none(), "node {n} still runs");
        match TestHub::try_start_with(self.options(n)).await {
            Ok(hub) => self.nodes[n - 1] = Some(hub),
            Err(refused) => panic!(
                "node {n} was refused its node id after a drain: {}\n{}",
                refused.status, refused.log
            ),
        }
        self.wait_joined(n).await;
    }

    /// Kills node `n` with SIGKILL: no drain, no goodbye to NATS.
    pub async fn kill(&mut self, n: usize) {
        let mut hub = self.nodes[n - 1].take().expect("node runs");
        hub.signal(libc::SIGKILL);
        hub.wait_exit(Duration::from_secs(30)).await;
    }

    /// Starts node `n` again (on a new port) and waits until it is on NATS
    /// (when NATS runs). After a kill the node id's presence lease is
    /// still live, and a start is refused until it lapses: tried again
    /// until it starts, within [`JOIN_WITHIN`].
    pub async fn restart(&mut self, n: usize) {
        assert!(self.nodes[n - 1].is_none(), "node {n} still runs");
        let deadline = Instant::now() + JOIN_WITHIN;
        let hub = loop {
            match TestHub::try_start_with(self.options(n)).await {
                Ok(hub) => break hub,
                Err(refused) => {
                    assert!(
                        refused.log.contains("is held by another live node")
                            && Instant::now() < deadline,
                        "node {n} did not start again: {}\n{}",
                        refused.status,
                        refused.log
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        self.nodes[n - 1] = Some(hub);
        if self.nats.is_running() {
            self.wait_joined(n).await;
        }
    }

    pub async fn stop_nats(&mut self) {
        self.nats.stop().await;
    }

    /// Starts NATS again on its port and waits until every running node
    /// has reconnected.
    pub async fn start_nats(&mut self) {
        self.nats.restart().await;
        for n in 1..=self.nodes.len() {
            if self.nodes[n - 1].is_some() {
                self.wait_joined(n).await;
            }
        }
    }

    /// What node `n`'s `/readyz` answers.
    pub async fn readyz(&self, n: usize) -> (u16, String) {
        self.node(n).readyz().await
    }

    /// Waits until node `n` says it is on NATS, or fails the test.
    pub async fn wait_joined(&self, n: usize) {
        let deadline = Instant::now() + JOIN_WITHIN;
        loop {
            let (status, body) = self.readyz(n).await;
            if status == 200 && body.contains("cluster: nats connected") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "node {n} did not join NATS: {status} {body}; log:\n{}\nNATS log:\n{}",
                self.node(n).log(),
                self.nats.log()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}
