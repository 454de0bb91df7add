//! A live run until it ends (ADR 0031 §3): the wall-time deadline, the
//! memory samples, the output cap, stops (this process's and other
//! processes' through the row, read with each heartbeat), and the hub's
//! shutdown, each ending the run
//! with its own reason; then the log and the end are stored. The live
//! copy of the log is written by `run_log::LiveLog`'s own task, told of
//! the log's growth on each control tick.

use std::sync::Arc;
use std::time::Duration;

use tokio::process::Child;
use tokio::time::{interval, sleep_until, Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::broker::Broker;
use super::child::{kill_group, resident_bytes};
use super::run_log::{reader, LiveLog, Log};
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
    let log = Log::new(cfg.output_max_bytes as usize);
    let live_log = LiveLog::start(hub.clone(), live.run, log.clone(), cfg.live_log_bytes());
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
    let ending = wait(
        &hub,
        &mut live.child,
        live.run,
        pid,
        (&log, &live_log),
        &live.stop,
    )
    .await;
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
    // Before the end is written: a live write after it would replace the
    // whole log with its tail.
    live_log.stop().await;
    finish(&hub, live.run, status, &log.take_all()).await
}

async fn wait(
    hub: &Hub,
    child: &mut Child,
    run: Uuid,
    pid: u32,
    (log, live_log): (&Log, &LiveLog),
    stop: &CancellationToken,
) -> Ending {
    let cfg = &hub.config.hosted;
    let deadline = Instant::now() + Duration::from_millis(cfg.wall_time_ms);
    let mut memory = interval(Duration::from_millis(cfg.memory_sample_ms));
    memory.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut control = interval(Duration::from_millis(cfg.control_interval_ms));
    control.set_missed_tick_behavior(MissedTickBehavior::Delay);
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
                Ok(Some(false)) => live_log.grew(log.len()),
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
