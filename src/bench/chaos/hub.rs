//! The chaos run's hub: `switchboard serve` as a child process on one
//! database, SIGKILLed and started again on it. Clients learn where it
//! listens from a watch channel, `None` while it is down, so a reconnect
//! waits for the next start instead of guessing a port.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::watch;

/// How long a start may take before the run fails.
const START_DEADLINE: Duration = Duration::from_secs(60);

/// Where the hub listens now and how often it was started.
#[derive(Clone, Debug)]
pub struct Incarnation {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// 0 for the first start, then one more per restart.
    pub generation: usize,
}

impl Incarnation {
    pub fn ws_url(&self) -> String {
        format!("{}/ws", self.base.replace("http://", "ws://"))
    }
}

/// The child process and what its clients watch.
pub struct HubProcess {
    child: Mutex<Option<Child>>,
    data_dir: PathBuf,
    log: PathBuf,
    database_url: Option<String>,
    queue_capacity: u32,
    current: watch::Sender<Option<Incarnation>>,
    /// When each restart's kill was sent, by generation (index 0 unused).
    killed_at: Mutex<Vec<Instant>>,
}

impl HubProcess {
    /// Starts the first hub on `dir` (its SQLite file lives there) or on
    /// `database_url`.
    pub async fn start(
        dir: &Path,
        database_url: Option<String>,
        queue_capacity: u32,
    ) -> anyhow::Result<HubProcess> {
        let (current, _) = watch::channel(None);
        let hub = HubProcess {
            child: Mutex::new(None),
            data_dir: dir.join("data"),
            log: dir.join("hub.log"),
            database_url,
            queue_capacity,
            current,
            killed_at: Mutex::new(vec![Instant::now()]),
        };
        hub.spawn(0).await?;
        Ok(hub)
    }

    pub fn watch(&self) -> watch::Receiver<Option<Incarnation>> {
        self.current.subscribe()
    }

    /// The hub now, waiting while it is down.
    pub async fn up(rx: &mut watch::Receiver<Option<Incarnation>>) -> anyhow::Result<Incarnation> {
        loop {
            if let Some(i) = rx.borrow_and_update().clone() {
                return Ok(i);
            }
            rx.changed()
                .await
                .map_err(|_| anyhow::anyhow!("the hub controller is gone"))?;
        }
    }

    /// SIGKILL, wait for the exit, start again on the same database.
    /// Returns the new generation.
    pub async fn kill_and_restart(&self) -> anyhow::Result<usize> {
        let generation = self.current.borrow().as_ref().map_or(0, |i| i.generation) + 1;
        let child = self.child.lock().expect("child lock").take();
        let Some(mut child) = child else {
            anyhow::bail!("no hub to kill");
        };
        let pid = child
            .id()
            .ok_or_else(|| anyhow::anyhow!("hub already exited"))?;
        self.current.send_replace(None);
        // SAFETY: kill(2) on the pid of our own child, not yet reaped.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        self.killed_at
            .lock()
            .expect("kill times")
            .push(Instant::now());
        tokio::time::timeout(START_DEADLINE, child.wait())
            .await
            .map_err(|_| anyhow::anyhow!("the SIGKILLed hub {pid} did not exit"))??;
        self.spawn(generation).await?;
        Ok(generation)
    }

    /// When the kill that began `generation` was sent.
    pub fn killed_at(&self, generation: usize) -> Option<Instant> {
        let times = self.killed_at.lock().expect("kill times");
        (generation > 0)
            .then(|| times.get(generation).copied())
            .flatten()
    }

    /// Stops the hub for good (SIGKILL: the run is over, nothing to drain).
    pub async fn stop(&self) {
        self.current.send_replace(None);
        let child = self.child.lock().expect("child lock").take();
        if let Some(mut child) = child {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    async fn spawn(&self, generation: usize) -> anyhow::Result<()> {
        let mut command = self.command()?;
        let mut child = command.spawn()?;
        let stdout = child.stdout.take().expect("piped stdout");
        *self.child.lock().expect("child lock") = Some(child);
        let mut lines = BufReader::new(stdout).lines();
        let base = tokio::time::timeout(START_DEADLINE, async {
            while let Some(line) = lines.next_line().await? {
                if let Some(url) = line.strip_prefix("switchboard listening on ") {
                    return Ok(url.to_string());
                }
            }
            anyhow::bail!(
                "the hub exited before listening; see {}",
                self.log.display()
            )
        })
        .await
        .map_err(|_| anyhow::anyhow!("the hub did not start; see {}", self.log.display()))??;
        // Keep reading: a closed pipe would fail the hub's next line.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        self.current
            .send_replace(Some(Incarnation { base, generation }));
        Ok(())
    }

    /// `switchboard serve` with limits that do not get in the way: every
    /// rate class open, a small outbound queue so the slow consumer is found
    /// early. It dies with the bench (PR_SET_PDEATHSIG), so a bench that is
    /// itself killed leaves no hub behind.
    fn command(&self) -> anyhow::Result<Command> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let mut command = Command::new(std::env::current_exe()?);
        for class in crate::protocol::RateClass::ALL {
            let section = class.as_str().to_uppercase();
            command
                .env(
                    format!("SWITCHBOARD_RATELIMIT__{section}__PER_SECOND"),
                    "10000000",
                )
                .env(
                    format!("SWITCHBOARD_RATELIMIT__{section}__BURST"),
                    "10000000",
                );
        }
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&self.data_dir)
            .env(
                "SWITCHBOARD_GATEWAY__OUTBOUND_QUEUE_CAPACITY",
                self.queue_capacity.to_string(),
            )
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true);
        if let Some(url) = &self.database_url {
            command.arg("--database-url").arg(url);
        }
        // SAFETY: prctl is async-signal-safe; nothing else runs between
        // fork and exec.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Ok(command)
    }
}
