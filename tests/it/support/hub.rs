//! A real `switchboard serve` child process on 127.0.0.1 port 0.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub const ADMIN_TOKEN: &str = "test-operator-token-0123456789";

pub struct TestHub {
    pub base: String,
    pub child: Child,
    pub dir: TempDir,
    pub http: reqwest::Client,
}

/// How a hub that did not start exited.
#[derive(Debug)]
pub struct Refused {
    pub status: std::process::ExitStatus,
    pub log: String,
}

#[derive(Default)]
pub struct Options {
    pub env: Vec<(String, String)>,
    pub database_url: Option<String>,
    /// Reuse this directory (and so its SQLite file) instead of a new one.
    pub dir: Option<std::path::PathBuf>,
    /// Run the hub with this open-file limit (soft and hard).
    pub nofile: Option<u64>,
}

impl Options {
    pub fn env(mut self, key: &str, value: impl ToString) -> Self {
        self.env.push((key.to_string(), value.to_string()));
        self
    }
}

impl TestHub {
    pub async fn start() -> TestHub {
        Self::start_with(Options::default()).await
    }

    pub async fn start_with(options: Options) -> TestHub {
        match Self::try_start_with(options).await {
            Ok(hub) => hub,
            Err(refused) => panic!(
                "switchboard serve exited before listening ({}); log:\n{}",
                refused.status, refused.log
            ),
        }
    }

    /// Starts a hub, or returns how it exited when it stopped before
    /// listening (a start the hub refuses).
    pub async fn try_start_with(options: Options) -> Result<TestHub, Refused> {
        let dir = tempfile::tempdir().expect("tempdir");
        let data_dir = options
            .dir
            .clone()
            .unwrap_or_else(|| dir.path().join("data"));
        let log = std::fs::File::create(dir.path().join("hub.log")).expect("log file");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchboard"));
        cmd.arg("serve")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--data-dir")
            .arg(&data_dir)
            .env("SWITCHBOARD_ADMIN__TOKEN", ADMIN_TOKEN)
            .env("RUST_LOG", "switchboard=debug,info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true);
        if let Some(url) = &options.database_url {
            cmd.arg("--database-url").arg(url);
        }
        for (k, v) in &options.env {
            cmd.env(k, v);
        }
        if let Some(n) = options.nofile {
            // SAFETY: setrlimit is async-signal-safe; nothing else runs
            // between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    let lim = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().expect("spawn switchboard serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let base = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await.expect("read stdout") {
                if let Some(url) = line.strip_prefix("switchboard listening on ") {
                    return Some(url.to_string());
                }
            }
            None
        })
        .await
        .unwrap_or_else(|_| {
            panic!(
                "switchboard serve did not start; log:\n{}",
                read_log(dir.path().join("hub.log"))
            )
        });
        let Some(base) = base else {
            let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
                .await
                .expect("a hub that closed its stdout exits")
                .expect("wait");
            return Err(Refused {
                status,
                log: read_log(dir.path().join("hub.log")),
            });
        };
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(TestHub {
            base,
            child,
            dir,
            http: reqwest::Client::new(),
        })
    }

    /// Test-friendly limits: a high rate limit in every class so bulk
    /// calls are not refused.
    pub fn fast_options() -> Options {
        let mut o = Options::default();
        for class in switchboard::protocol::RateClass::ALL {
            let section = class.as_str().to_uppercase();
            o = o
                .env(
                    &format!("SWITCHBOARD_RATELIMIT__{section}__PER_SECOND"),
                    1_000_000,
                )
                .env(
                    &format!("SWITCHBOARD_RATELIMIT__{section}__BURST"),
                    1_000_000,
                );
        }
        o
    }

    pub fn ws_url(&self) -> String {
        format!("{}/ws", self.base.replace("http://", "ws://"))
    }

    pub fn log(&self) -> String {
        read_log(self.dir.path().join("hub.log"))
    }

    /// The log written after byte `from`, and where it ends now: a test
    /// reads only what one step of it made the hub write.
    pub fn log_since(&self, from: usize) -> (String, usize) {
        let bytes = std::fs::read(self.dir.path().join("hub.log")).unwrap_or_default();
        let start = from.min(bytes.len());
        (
            String::from_utf8_lossy(&bytes[start..]).into_owned(),
            bytes.len(),
        )
    }

    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .json(body)
            .send()
            .await
            .expect("POST");
        let status = r.status().as_u16();
        let text = r.text().await.expect("body");
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// What `/readyz` answers: its status and its text.
    pub async fn readyz(&self) -> (u16, String) {
        let r = self
            .http
            .get(format!("{}/readyz", self.base))
            .send()
            .await
            .expect("GET /readyz");
        (r.status().as_u16(), r.text().await.expect("readyz body"))
    }

    pub async fn register_agent(&self, name: &str) -> (String, String) {
        let (status, body) = self
            .post(
                "/api/v1/agents/register",
                &serde_json::json!({ "name": name }),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        (
            body["agentId"].as_str().unwrap().to_string(),
            body["agentKey"].as_str().unwrap().to_string(),
        )
    }

    pub async fn register_app(&self, manifest: &Value) -> (String, String) {
        let (status, body) = self
            .post(
                "/api/v1/apps/register",
                &serde_json::json!({ "manifest": manifest }),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        (
            body["appId"].as_str().unwrap().to_string(),
            body["appKey"].as_str().unwrap().to_string(),
        )
    }

    /// Asks the hub to ping the app through its callback path.
    pub async fn ping_app(&self, app_id: &str, timeout_ms: u64) -> Value {
        let r = self
            .http
            .post(format!(
                "{}/api/v1/apps/{app_id}/ping?timeoutMs={timeout_ms}",
                self.base
            ))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .expect("ping");
        assert_eq!(r.status().as_u16(), 200);
        r.json().await.expect("ping body")
    }

    /// The value of a Prometheus counter (summed over matching label sets).
    pub async fn metric(&self, name: &str, label_filter: &str) -> f64 {
        let text = self
            .http
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics body");
        text.lines()
            .filter(|l| l.starts_with(name) && l.contains(label_filter))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    pub fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    pub fn signal(&self, signal: i32) {
        let rc = unsafe { libc::kill(self.pid() as i32, signal) };
        assert_eq!(rc, 0, "kill failed");
    }

    pub async fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        tokio::time::timeout(within, self.child.wait())
            .await
            .expect("hub did not exit in time")
            .expect("wait")
    }
}

fn read_log(path: PathBuf) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}
