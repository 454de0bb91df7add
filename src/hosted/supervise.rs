//! A live run until it ends (ADR 0031 §3): the wall-time deadline, the
//! memory samples, the output cap, stops (this process's and other
//! processes' through the row, read with each heartbeat), and the hub's
//! shutdown, each ending the run
//! with its own reason; then the log and the end are stored.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::Child;
use tokio::task::JoinHandle;
use tokio::time::{interval, sleep_until, Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::broker::Broker;
use super::child::{kill_group, resident_bytes};
use crate::domain::hosted::{EndReason, RunState};
use crate::hub::Hub;
use crate::store::{RunEnd, RunRecord};

/// How long the log readers may go on after the child ended (a grandchild
/// that left the process group could hold the pipes open forever).
const DRAIN: Duration = Duration::from_millis(500);

pub struct Live {
    pub hub: Arc<Hub>,
    pub run: Uuid,
    pub child: Child,
    pub broker: Broker,
    pub channel: std::os::unix::net::UnixStream,
    pub stop: CancellationToken,
    /// The fresh copy, removed when the run ends.
    pub dir: tempfile::TempDir,
}

/// The capped per-run log, shared by the stdout and stderr readers.
struct Log {
    bytes: Mutex<Vec<u8>>,
    cap: usize,
    over: CancellationToken,
}

impl Log {
    /// The log when it grew past `stored` bytes (what the row holds), and
    /// its new length in `stored`.
    fn grown(&self, stored: &mut usize) -> Option<Vec<u8>> {
        let bytes = self.bytes.lock().expect("log lock");
        if bytes.len() == *stored {
            return None;
        }
        *stored = bytes.len();
        Some(bytes.clone())
    }

    fn take(&self, chunk: &[u8]) {
        let mut bytes = self.bytes.lock().expect("log lock");
        let room = self.cap.saturating_sub(bytes.len());
        bytes.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if chunk.len() > room {
            self.over.cancel();
        }
    }
}

fn reader(
    log: Arc<Log>,
    pipe: Option<impl AsyncReadExt + Unpin + Send + 'static>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let Some(mut pipe) = pipe else { return };
        let mut buf = vec![0u8; 8192];
        while let Ok(n) = pipe.read(&mut buf).await {
            if n == 0 {
                return;
            }
            log.take(&buf[..n]);
        }
    })
}

/// How the wait ended.
enum Ending {
    Exit(std::process::ExitStatus),
    Runner(EndReason),
}

/// Supervises the run to its end and answers its final row.
pub async fn supervise(mut live: Live) -> Option<RunRecord> {
    let hub = live.hub.clone();
    let cfg = hub.config.hosted.clone();
    let pid = live.child.id().unwrap_or(0);
    let log = Arc::new(Log {
        bytes: Mutex::new(Vec::new()),
        cap: cfg.output_max_bytes as usize,
        over: CancellationToken::new(),
    });
    let readers = [
        reader(log.clone(), live.child.stdout.take()),
        reader(log.clone(), live.child.stderr.take()),
    ];
    let broker = match live
        .channel
        .set_nonblocking(true)
        .and_then(|()| tokio::net::UnixStream::from_std(live.channel))
    {
        Ok(stream) => Some(tokio::spawn(live.broker.serve(stream))),
        Err(e) => {
            tracing::error!(run = %live.run, error = %e, "hosted run: no broker channel");
            None
        }
    };
    let ending = wait(&hub, &mut live.child, live.run, pid, &log, &live.stop).await;
    kill_group(pid);
    let status = match ending {
        Ending::Exit(s) => Ok(s),
        Ending::Runner(reason) => {
            let _ = live.child.wait().await;
            Err(reason)
        }
    };
    if let Some(b) = broker {
        b.abort();
    }
    for r in readers {
        let abort = r.abort_handle();
        if tokio::time::timeout(DRAIN, r).await.is_err() {
            abort.abort();
        }
    }
    drop(live.dir);
    let bytes = std::mem::take(&mut *log.bytes.lock().expect("log lock"));
    finish(&hub, live.run, status, &bytes).await
}

async fn wait(
    hub: &Hub,
    child: &mut Child,
    run: Uuid,
    pid: u32,
    log: &Log,
    stop: &CancellationToken,
) -> Ending {
    let cfg = &hub.config.hosted;
    let deadline = Instant::now() + Duration::from_millis(cfg.wall_time_ms);
    let mut memory = interval(Duration::from_millis(cfg.memory_sample_ms));
    memory.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut control = interval(Duration::from_millis(cfg.control_interval_ms));
    control.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut stored = 0;
    loop {
        tokio::select! {
            status = child.wait() => match status {
                Ok(s) => return Ending::Exit(s),
                Err(e) => {
                    tracing::error!(run = %run, error = %e, "hosted run: wait failed");
                    return Ending::Runner(EndReason::SpawnFailed);
                }
            },
            _ = sleep_until(deadline) => return Ending::Runner(EndReason::TimeLimit),
            _ = log.over.cancelled() => return Ending::Runner(EndReason::OutputLimit),
            _ = stop.cancelled() => return Ending::Runner(EndReason::Stopped),
            _ = hub.shutdown.cancelled() => return Ending::Runner(EndReason::HubShutdown),
            _ = memory.tick() => {
                if resident_bytes(pid).is_some_and(|b| b > cfg.memory_bytes) {
                    return Ending::Runner(EndReason::MemoryLimit);
                }
            }
            _ = control.tick() => match hub.store.beat_run(run, hub.runs.owner(), crate::domain::now_millis()).await {
                Ok(Some(false)) => store_log(hub, run, log, &mut stored).await,
                Ok(Some(true)) => return Ending::Runner(EndReason::Stopped),
                // Swept as orphaned (this process stalled past
                // hosted.orphan_after_ms): its row is ended, so is the run.
                Ok(None) => return Ending::Runner(EndReason::OwnerLost),
                // A store failure misses one beat; the next tick retries.
                Err(e) => tracing::warn!(run = %run, error = %e, "hosted run: heartbeat failed"),
            }
        }
    }
}

/// The log so far onto the live run's row, when it grew since the last
/// beat: what REST and the CLI read of a running run (any process may
/// serve the read). A failed write is retried by the next beat.
async fn store_log(hub: &Hub, run: Uuid, log: &Log, stored: &mut usize) {
    let before = *stored;
    let Some(bytes) = log.grown(stored) else {
        return;
    };
    if let Err(e) = hub.store.write_run_log(run, hub.runs.owner(), &bytes).await {
        *stored = before;
        tracing::warn!(run = %run, error = %e, "hosted run: the live log was not stored");
    }
}

async fn finish(
    hub: &Hub,
    run: Uuid,
    status: Result<std::process::ExitStatus, EndReason>,
    log: &[u8],
) -> Option<RunRecord> {
    use std::os::unix::process::ExitStatusExt;
    let (state, reason, exit_code) = match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(code), _) => (RunState::Exited, None, Some(i64::from(code))),
            (None, Some(sig)) => (
                RunState::Failed,
                Some(EndReason::Signal.as_str()),
                Some(128 + i64::from(sig)),
            ),
            (None, None) => (RunState::Failed, Some(EndReason::Signal.as_str()), None),
        },
        Err(reason) => (RunState::Failed, Some(reason.as_str()), None),
    };
    let end = RunEnd {
        state,
        reason,
        exit_code,
        log,
        at: crate::domain::now_millis(),
    };
    if let Err(e) = hub.store.finish_run(run, &end).await {
        tracing::error!(run = %run, error = %e, "hosted run: the end was not stored");
    }
    hub.runs.remove(run);
    tracing::info!(run = %run, state = state.as_str(), reason = reason.unwrap_or(""), "hosted run ended");
    hub.store.run(run).await.ok().flatten()
}
