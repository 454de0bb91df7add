//! `switchboard app run|runs|stop` (ADR 0031 §3): a hosted App Card run in
//! this process, and the runs of every process listed and stopped through
//! the store (a hub running the run sees a stop within
//! `hosted.control_interval_ms`).

use std::path::PathBuf;

use uuid::Uuid;

use crate::config::Config;
use crate::domain::event::rfc3339;
use crate::hosted::{self, Source, StartError};
use crate::hub::Hub;
use crate::store::RunRecord;

/// A directory is a package; anything else names an installed card.
fn source_of(target: &str) -> Source {
    let path = PathBuf::from(target);
    if path.is_dir() {
        Source::Dir(path)
    } else {
        Source::Card(target.to_string())
    }
}

fn describe(r: &RunRecord) -> String {
    let mut line = format!(
        "run {} {} {} {} {}",
        r.id,
        r.card_id,
        r.version,
        r.state.as_str(),
        rfc3339(r.created_at)
    );
    if let Some(reason) = &r.reason {
        line.push_str(&format!(" reason={reason}"));
    }
    if let Some(code) = r.exit_code {
        line.push_str(&format!(" exit={code}"));
    }
    if !r.isolated {
        line.push_str(" unisolated");
    }
    line
}

/// `app run CARD_ID|PACKAGE_DIR`: starts the run on a hub of this process
/// (no listener), waits for its end, prints its log and its end; exits 0
/// only for an exit code of 0. Ctrl-C ends the run `hub_shutdown`.
pub async fn run(target: &str, cfg: Config) -> anyhow::Result<()> {
    let store = crate::store::open_existing(&cfg).await?;
    let hub = Hub::new(cfg, store, crate::handlers::router()).await?;
    let started = match hosted::start(&hub, &source_of(target)).await {
        Ok(s) => s,
        Err(StartError::Refused { refusal, .. }) => {
            anyhow::bail!("run refused ({}): {refusal}", refusal.code())
        }
        Err(StartError::Internal(m)) => anyhow::bail!("run failed to start: {m}"),
    };
    eprintln!("{}", describe(&started.run));
    let done = started.done;
    tokio::pin!(done);
    let end = tokio::select! {
        end = &mut done => end,
        _ = tokio::signal::ctrl_c() => {
            hub.shutdown.cancel();
            (&mut done).await
        }
    };
    let end = end
        .map_err(|e| anyhow::anyhow!("the run's supervisor failed: {e}"))?
        .ok_or_else(|| anyhow::anyhow!("the run's end was not stored"))?;
    if let Some(log) = &end.log {
        print!("{}", String::from_utf8_lossy(log));
    }
    eprintln!("{}", describe(&end));
    if end.exit_code == Some(0) && end.reason.is_none() {
        Ok(())
    } else {
        anyhow::bail!("the run did not exit 0")
    }
}

/// `app runs [--card ID] [--log RUN]`.
pub async fn list(card: Option<String>, log: Option<Uuid>, cfg: Config) -> anyhow::Result<()> {
    let store = crate::store::open_existing(&cfg).await?;
    if let Some(id) = log {
        let r = store
            .run(id)
            .await?
            .ok_or_else(|| anyhow::anyhow!("no run {id}"))?;
        println!("{}", describe(&r));
        print!(
            "{}",
            String::from_utf8_lossy(r.log.as_deref().unwrap_or_default())
        );
        return Ok(());
    }
    for r in store.runs(card.as_deref(), 500).await? {
        println!("{}", describe(&r));
    }
    Ok(())
}

/// `app stop --run ID`: asks the process running it to stop it.
pub async fn stop(id: Uuid, cfg: Config) -> anyhow::Result<()> {
    let store = crate::store::open_existing(&cfg).await?;
    if store.request_stop(id).await? {
        println!("run {id}: stop requested");
        Ok(())
    } else {
        match store.run(id).await? {
            Some(r) => anyhow::bail!("run {id} has ended ({})", r.state.as_str()),
            None => anyhow::bail!("no run {id}"),
        }
    }
}
