//! Hosted App Cards (ADR 0031): the runner that starts a verified card's
//! entry as an isolated child, and the per-run capability broker through
//! which alone the child reaches the hub. The rules are pure in
//! `domain::hosted`; this module does the processes, files and calls.
//!
//! `package` verifies what runs, `principal` makes the card's app,
//! `child` starts the isolated process, `broker` and `calls` serve the
//! channel, `supervise` enforces the limits and stores the end, and
//! `run_log` keeps the capped log and writes its live copy.

pub mod broker;
mod calls;
pub mod child;
mod invites;
pub mod package;
pub mod principal;
mod profile;
mod rooms;
mod run_log;
mod supervise;
pub mod sweep;
pub mod wake;

use std::path::PathBuf;
use std::sync::Arc;

use rand::RngCore;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::domain::card::primitives::{granted_methods, is_beatless};
use crate::domain::card::AppCard;
use crate::domain::hosted::primitives::ParamBounds;
use crate::domain::hosted::wire::token_text;
use crate::domain::hosted::{EndReason, RunRefusal, RunState};
use crate::hub::Hub;
use crate::store::{RunEnd, RunRecord, StoreError};

pub use package::Source;

/// A run that started: its row as it began, and its end.
pub struct StartedRun {
    pub run: RunRecord,
    pub done: JoinHandle<Option<RunRecord>>,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Refused with a code; `run` is set when the refusal came at spawn
    /// (the run's row then records it as failed).
    #[error("{refusal}")]
    Refused {
        refusal: RunRefusal,
        run: Option<Uuid>,
    },
    #[error("{0}")]
    Internal(String),
}

impl From<RunRefusal> for StartError {
    fn from(refusal: RunRefusal) -> Self {
        StartError::Refused { refusal, run: None }
    }
}

impl From<StoreError> for StartError {
    fn from(e: StoreError) -> Self {
        StartError::Internal(format!("store failure: {e}"))
    }
}

/// Verifies, makes the app, copies, spawns and supervises a run.
pub async fn start(hub: &Arc<Hub>, source: &Source) -> Result<StartedRun, StartError> {
    let verified = package::load(hub.store.as_ref(), source)
        .await
        .map_err(|e| match e {
            package::LoadError::Refused(r) => r.into(),
            package::LoadError::Store(e) => e.into(),
            package::LoadError::Io(m) => StartError::Internal(m),
        })?;
    let card = verified.card;
    let entry = card
        .entry
        .scripts
        .first()
        .cloned()
        .ok_or(RunRefusal::NoEntry)?;
    let (program, args) = command_of(&hub.config.hosted.python, &entry)?;
    let app = principal::ensure(&hub.store, &hub.config, &card)
        .await
        .map_err(|e| match e {
            principal::PrincipalError::Refused(r) => r.into(),
            principal::PrincipalError::Store(e) => e.into(),
            other => StartError::Internal(other.to_string()),
        })?;
    let id = Uuid::now_v7();
    let stop = hub
        .runs
        .admit(id, hub.config.hosted.max_live_runs)
        .ok_or(RunRefusal::TooManyRuns)?;
    let started = launch(
        hub,
        id,
        app,
        &card,
        &verified.files,
        &entry,
        program,
        args,
        stop,
    )
    .await;
    if started.is_err() {
        hub.runs.remove(id);
    }
    started
}

/// A `.py` entry runs under `hosted.python`; any other is executed.
fn command_of(python: &str, entry: &str) -> Result<(PathBuf, Vec<PathBuf>), RunRefusal> {
    if entry.ends_with(".py") {
        let program =
            child::resolve(python).ok_or_else(|| RunRefusal::NoInterpreter(python.to_string()))?;
        Ok((program, vec![PathBuf::from(entry)]))
    } else {
        Ok((PathBuf::from(format!("./{entry}")), Vec::new()))
    }
}

#[allow(clippy::too_many_arguments)]
async fn launch(
    hub: &Arc<Hub>,
    id: Uuid,
    app: Uuid,
    card: &AppCard,
    files: &std::collections::BTreeMap<String, Vec<u8>>,
    entry: &str,
    program: PathBuf,
    args: Vec<PathBuf>,
    stop: tokio_util::sync::CancellationToken,
) -> Result<StartedRun, StartError> {
    let cfg = &hub.config.hosted;
    let dir = package::fresh_copy(files, cfg.work_dir.as_deref(), entry, id)
        .map_err(|e| StartError::Internal(format!("cannot copy the package: {e}")))?;
    let mut token = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut token);
    let mut run = RunRecord {
        id,
        card_id: card.id.clone(),
        version: card.version.clone(),
        app_id: app,
        state: RunState::Starting,
        reason: None,
        exit_code: None,
        isolated: false,
        stop_requested: false,
        created_at: crate::domain::now_millis(),
        ended_at: None,
        log: None,
    };
    let alone = is_beatless(&card.primitives);
    if !hub.store.create_run(&run, hub.runs.owner(), alone).await? {
        return Err(RunRefusal::AppBusy.into());
    }
    let spec = child::Spec {
        program: program.clone(),
        args,
        dir: dir.path(),
        env: vec![
            ("PATH", "/usr/local/bin:/usr/bin:/bin".into()),
            ("HOME", dir.path().display().to_string()),
            ("LANG", "C.UTF-8".into()),
            ("PYTHONDONTWRITEBYTECODE", "1".into()),
            // Each print reaches the per-run log as it is made, so the log
            // reads while the run is live.
            ("PYTHONUNBUFFERED", "1".into()),
            ("TMPDIR", dir.path().display().to_string()),
            ("SWITCHBOARD_BROKER_FD", child::BROKER_FD.to_string()),
            ("SWITCHBOARD_RUN_ID", id.to_string()),
            ("SWITCHBOARD_RUN_TOKEN", token_text(&token)),
        ],
        address_space_bytes: cfg.address_space_bytes,
        max_open_files: cfg.max_open_files,
        allow_unisolated: cfg.allow_unisolated,
        read_paths: read_paths(cfg, &program),
    };
    let started = match child::spawn(spec) {
        Ok(s) => s,
        Err(e) => return Err(refuse_at_spawn(hub, id, e).await),
    };
    hub.store.mark_running(id, started.isolated).await?;
    run.state = RunState::Running;
    run.isolated = started.isolated;
    tracing::info!(run = %id, card = %card.id, isolated = started.isolated, "hosted run started");
    let broker = broker::Broker {
        token,
        methods: granted_methods(&card.primitives),
        max_line: cfg.broker_max_line_bytes,
        bounds: ParamBounds {
            key_max_bytes: cfg.memory_key_max_bytes,
            value_max_bytes: cfg.memory_value_max_bytes,
            page_max: hub.config.events.page_max,
            max_wait_seconds: hub.config.events.max_wait_seconds,
            persona_max_bytes: cfg.persona_max_bytes,
            profile_max_bytes: cfg.profile_max_bytes,
            invite_max_uses: cfg.invite_max_uses,
            invite_max_ttl_seconds: cfg.invite_max_ttl_seconds,
            invite_default_uses: cfg.invite_default_uses,
            invite_default_ttl_seconds: cfg.invite_default_ttl_seconds,
        },
        caller: calls::Caller {
            hub: hub.clone(),
            app,
            run: id,
            card_id: card.id.clone(),
            version: card.version.clone(),
            name: card.name.clone(),
            tagline: card.tagline.clone(),
            persona_file: card
                .entry
                .persona
                .as_ref()
                .and_then(|p| files.get(p).cloned()),
        },
    };
    let live = supervise::Live {
        hub: hub.clone(),
        run: id,
        child: started.child,
        broker,
        channel: started.broker,
        stop,
        dir,
    };
    let done = hub.tasks.spawn(supervise::supervise(live));
    Ok(StartedRun { run, done })
}

/// `hosted.read_paths` and the interpreter's install tree (a program
/// outside them, such as a version manager's shim, could not start).
fn read_paths(cfg: &crate::config::HostedConfig, program: &std::path::Path) -> Vec<PathBuf> {
    let mut paths = cfg.read_paths.clone();
    if program.is_absolute() {
        for p in [
            Some(program.to_path_buf()),
            std::fs::canonicalize(program).ok(),
        ]
        .into_iter()
        .flatten()
        {
            if let Some(tree) = p.parent().and_then(|bin| bin.parent()) {
                if !paths.iter().any(|r| tree.starts_with(r)) && tree != std::path::Path::new("/") {
                    paths.push(tree.to_path_buf());
                }
            }
        }
    }
    paths
}

/// A spawn that failed ends the run's row `failed` with its reason.
async fn refuse_at_spawn(hub: &Hub, id: Uuid, e: child::SpawnError) -> StartError {
    let (reason, refusal) = match e {
        child::SpawnError::NoIsolation(errno) => (
            "network_isolation_unavailable",
            Some(RunRefusal::NetworkIsolationUnavailable(errno.to_string())),
        ),
        child::SpawnError::NoFileIsolation(errno) => (
            "file_isolation_unavailable",
            Some(RunRefusal::FileIsolationUnavailable(errno.to_string())),
        ),
        child::SpawnError::Io(_) => (EndReason::SpawnFailed.as_str(), None),
    };
    let end = RunEnd {
        state: RunState::Failed,
        reason: Some(reason),
        exit_code: None,
        log: &[],
        at: crate::domain::now_millis(),
    };
    if let Err(e) = hub.store.finish_run(id, &end).await {
        tracing::error!(run = %id, error = %e, "hosted run: the refusal was not stored");
    }
    match refusal {
        Some(refusal) => StartError::Refused {
            refusal,
            run: Some(id),
        },
        None => StartError::Internal(format!("the entry could not be started ({reason})")),
    }
}

/// Stops a live run: at once when this process runs it, else by asking
/// the process that does through its row. False when it is not live.
pub async fn stop(hub: &Hub, id: Uuid) -> Result<bool, StoreError> {
    let requested = hub.store.request_stop(id).await?;
    Ok(hub.runs.stop(id) || requested)
}
