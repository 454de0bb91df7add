//! A throwaway `nats-server` on a random loopback port, the way the suite
//! starts PostgreSQL: `-p -1` picks the port, which the server's
//! "Listening for client connections on" line tells (read before its
//! "Server is ready"); the server is stopped by its PID on drop. It can be stopped and
//! started again on the same port (the NATS-lost tests). A missing binary
//! fails the test with an install hint; nothing is skipped.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

/// How long a start may take before the test fails.
const START_WITHIN: Duration = Duration::from_secs(30);

pub struct Nats {
    /// `nats://127.0.0.1:PORT`.
    pub url: String,
    port: u16,
    child: Option<Child>,
    dir: TempDir,
    starts: u32,
    /// A configuration file the server runs with (`-c`), if any.
    config: Option<PathBuf>,
}

impl Nats {
    /// A new server on a free loopback port.
    pub async fn start() -> Nats {
        Self::start_inner(None).await
    }

    /// A new server that also reads `config` (nats-server's configuration
    /// syntax: limits, `authorization`, `tls`); the port stays random.
    pub async fn start_with_config(config: &str) -> Nats {
        Self::start_inner(Some(config)).await
    }

    async fn start_inner(config: Option<&str>) -> Nats {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = config.map(|text| {
            let path = dir.path().join("nats.conf");
            std::fs::write(&path, text).expect("nats config");
            path
        });
        let (child, port) = spawn(&dir, config.as_deref(), None, 1).await;
        Nats {
            url: format!("nats://127.0.0.1:{port}"),
            port,
            child: Some(child),
            dir,
            starts: 1,
            config,
        }
    }

    /// A directory that lives as long as the server (for key files).
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Whether the server runs now.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Stops the server (SIGKILL by PID: it goes away as a crashed broker
    /// would, without telling its clients) and waits for it to exit.
    pub async fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = child.start_kill();
        let _ = child.wait().await;
    }

    /// Starts it again on the port it had, so the nodes' clients find it.
    pub async fn restart(&mut self) {
        assert!(self.child.is_none(), "nats-server is still running");
        self.starts += 1;
        let (child, port) = spawn(
            &self.dir,
            self.config.as_deref(),
            Some(self.port),
            self.starts,
        )
        .await;
        assert_eq!(port, self.port, "nats-server came back on another port");
        self.child = Some(child);
    }

    /// The server's log so far (every start's).
    pub fn log(&self) -> String {
        let mut all = String::new();
        for n in 1..=self.starts {
            all.push_str(&std::fs::read_to_string(log_path(&self.dir, n)).unwrap_or_default());
        }
        all
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.start_kill();
        }
    }
}

fn log_path(dir: &TempDir, start: u32) -> PathBuf {
    dir.path().join(format!("nats-server-{start}.log"))
}

/// Spawns `nats-server` and waits for its "Server is ready" line, with the
/// port it listens on; its stderr goes on into a log file.
async fn spawn(
    dir: &TempDir,
    config: Option<&std::path::Path>,
    port: Option<u16>,
    start: u32,
) -> (Child, u16) {
    let port = port.map_or("-1".to_string(), |p| p.to_string());
    let mut cmd = Command::new(binary());
    if let Some(config) = config {
        cmd.arg("-c").arg(config);
    }
    let mut child = cmd
        .args(["-a", "127.0.0.1", "-p", &port])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start nats-server: {e}. {INSTALL_HINT}"));
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let mut log = tokio::fs::File::create(log_path(dir, start))
        .await
        .expect("nats log file");
    let ready = tokio::time::timeout(START_WITHIN, async {
        let mut port = None;
        while let Ok(Some(line)) = lines.next_line().await {
            log.write_all(format!("{line}\n").as_bytes()).await.ok();
            if let Some((_, addr)) = line.split_once("Listening for client connections on ") {
                port = addr.trim().rsplit(':').next().and_then(|p| p.parse().ok());
            }
            if line.contains("Server is ready") {
                return port;
            }
        }
        None
    })
    .await;
    let Ok(Some(port)) = ready else {
        let _ = child.start_kill();
        panic!(
            "nats-server did not become ready; log:\n{}",
            std::fs::read_to_string(log_path(dir, start)).unwrap_or_default()
        );
    };
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            if log.write_all(format!("{line}\n").as_bytes()).await.is_err() {
                break;
            }
        }
    });
    (child, port)
}

const INSTALL_HINT: &str =
    "The cluster tests need nats-server: on Debian, apt-get install nats-server";

fn binary() -> PathBuf {
    for dir in std::env::var("PATH").unwrap_or_default().split(':') {
        let candidate = PathBuf::from(dir).join("nats-server");
        if candidate.is_file() {
            return candidate;
        }
    }
    let debian = PathBuf::from("/usr/sbin/nats-server");
    if debian.is_file() {
        return debian;
    }
    panic!("nats-server not found on PATH nor in /usr/sbin. {INSTALL_HINT}");
}
