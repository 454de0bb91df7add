//! A throwaway `nats-server` for `bench --scenario cluster`: started on a
//! free loopback port, stopped when dropped. Missing, it fails the run with
//! an install hint.

use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

/// How long the server may take to accept connections.
const START_DEADLINE: Duration = Duration::from_secs(20);

pub struct ThrowawayNats {
    child: Child,
    pub url: String,
}

impl ThrowawayNats {
    pub async fn start() -> anyhow::Result<ThrowawayNats> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = Command::new(binary()?)
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let nats = ThrowawayNats {
            child,
            url: format!("nats://127.0.0.1:{port}"),
        };
        nats.wait_accepting(port).await?;
        Ok(nats)
    }

    /// Waits until the port takes a TCP connection, or the deadline.
    async fn wait_accepting(&self, port: u16) -> anyhow::Result<()> {
        let started = Instant::now();
        let mut retry = tokio::time::interval(Duration::from_millis(20));
        loop {
            retry.tick().await;
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Ok(());
            }
            anyhow::ensure!(
                started.elapsed() < START_DEADLINE,
                "nats-server did not accept connections on port {port} within {START_DEADLINE:?}"
            );
        }
    }

    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

fn binary() -> anyhow::Result<std::path::PathBuf> {
    for dir in std::env::var("PATH").unwrap_or_default().split(':').chain([
        "/usr/sbin",
        "/usr/bin",
        "/usr/local/bin",
    ]) {
        let candidate = std::path::Path::new(dir).join("nats-server");
        if candidate.exists() {
            return Ok(candidate);
        }
    }
    anyhow::bail!("nats-server not found: on Debian, apt-get install nats-server")
}
