//! `switchboard app ...` and `switchboard audit actions`: the operator's
//! app commands, straight on the store (ADR 0023 §3-§5). The installation
//! commands go through `hub::installations` as the REST routes do; a
//! running hub applies their socket effects (4012, 4018) at its next
//! revocation sweep (`gateway.revocation_check_interval_ms`).

use std::path::{Path, PathBuf};

use clap::Subcommand;
use uuid::Uuid;

use super::{describe, revoke, rotate};
use crate::config::Config;
use crate::domain::event::rfc3339;
use crate::domain::installation::{Actor, Scope, ScopeSet, Transition};
use crate::domain::PrincipalKind;
use crate::hub::installations::{Lifecycle, LifecycleError};
use crate::identity;
use crate::store::{ActionFilter, InstallationRecord};

/// A comma-separated list of scope names (`""` for none).
#[derive(Clone, Debug)]
pub struct ScopeList(Vec<Scope>);

fn parse_scopes(s: &str) -> Result<ScopeList, String> {
    s.split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| {
            Scope::parse(name).ok_or_else(|| {
                format!("{name:?} is not a scope (messages:write, commands:write, components:write, events:subscribe)")
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(ScopeList)
}

#[derive(Subcommand)]
pub enum AppCommand {
    /// Register an app from a manifest file and print its id and key (shown
    /// once); installed at once unless registration.install = "pending".
    Register {
        /// The manifest: a JSON file (examples/werewolf.manifest.json).
        #[arg(long)]
        manifest: PathBuf,
    },
    /// The apps by id, one line each: id, name, created, installation
    /// state and effective scopes (or "not installed").
    List {
        /// Apps after this id (the last one printed).
        #[arg(long)]
        after: Option<Uuid>,
        /// At most this many (default audit.page_default, at most audit.page_max).
        #[arg(long)]
        limit: Option<u32>,
    },
    /// Issue a new key and revoke the old ones.
    RotateKey {
        /// The app's id (`switchboard app list`).
        #[arg(long)]
        id: Uuid,
    },
    /// Revoke every key of the app.
    RevokeKey {
        /// The app's id (`switchboard app list`).
        #[arg(long)]
        id: Uuid,
    },
    /// Install an app that has no installation (pending, or uninstalled),
    /// granted --scopes (default: all its manifest requests). Prints a new
    /// key when the app has none.
    Install {
        /// The app's id (`switchboard app list`).
        #[arg(long)]
        id: Uuid,
        /// Comma-separated scope names.
        #[arg(long, value_parser = parse_scopes)]
        scopes: Option<ScopeList>,
    },
    /// Replace the granted scopes ("" for none).
    SetScopes {
        /// The app's id (`switchboard app list`).
        #[arg(long)]
        id: Uuid,
        /// Comma-separated scope names ("" for none).
        #[arg(long, value_parser = parse_scopes)]
        scopes: ScopeList,
    },
    /// Suspend the app: its sockets close (4012), its gates fail closed.
    Suspend {
        /// The app's id (`switchboard app list`).
        #[arg(long)]
        id: Uuid,
    },
    /// Resume a suspended app.
    Resume {
        /// The app's id (`switchboard app list`).
        #[arg(long)]
        id: Uuid,
    },
    /// Uninstall the app: keys revoked, grants deleted, open tasks failed.
    Uninstall {
        /// The app's id (`switchboard app list`).
        #[arg(long)]
        id: Uuid,
    },
    /// Send the connected app one synthetic call per `hook` gate, through
    /// the running hub (POST /api/v1/apps/{id}/check with admin.token), and
    /// print each gate's outcome, latency and decoding. Exit code 0 only
    /// when every gate answered well in time; else the worst gate's: 2
    /// bad_result, 3 remote_error, 4 late, 5 timeout, 6 disconnected, 7
    /// unavailable, 8 inactive (1: the check did not run).
    Check {
        /// The app's id.
        id: Uuid,
        /// The running hub's base URL (default: http:// and server.listen,
        /// loopback for an unspecified address).
        #[arg(long, env = "SWITCHBOARD_HUB_URL")]
        hub: Option<String>,
        /// Check as the app itself, with its own key (its own id only),
        /// instead of with the operator token. Prefer the variable: a
        /// process list shows the command line.
        #[arg(long, env = "SWITCHBOARD_APP_KEY", hide_env_values = true)]
        app_key: Option<String>,
    },
    /// Replace the app's manifest from a file, validated as at registration.
    Upgrade {
        /// The app's id (`switchboard app list`).
        #[arg(long)]
        id: Uuid,
        /// The new manifest: a JSON file.
        #[arg(long)]
        manifest: PathBuf,
    },
    /// Run an installed App Card (by id, or its package directory) under a
    /// capability broker, in this process; prints its log and its end.
    Run {
        /// A card id, or a package directory of an installed card.
        target: String,
    },
    /// The hosted runs, newest first.
    Runs {
        /// Only this card's runs.
        #[arg(long)]
        card: Option<String>,
        /// Show this run with its log.
        #[arg(long)]
        log: Option<Uuid>,
    },
    /// Stop a live hosted run (the process running it ends it).
    Stop {
        /// The run's id (`switchboard app runs`).
        #[arg(long)]
        run: Uuid,
    },
    /// Check the app's interactionsUrl again, through the running hub
    /// (POST /api/v1/apps/{id}/interactions-url/verify with admin.token):
    /// a signed ping whose nonce it must echo, and a request with a bad
    /// signature it must refuse with 401. Prints the state; exit code 0
    /// only when verified, 2 when unverified (1: the check did not run).
    VerifyUrl {
        /// The app's id.
        id: Uuid,
        /// The running hub's base URL (default: http:// and server.listen,
        /// loopback for an unspecified address).
        #[arg(long, env = "SWITCHBOARD_HUB_URL")]
        hub: Option<String>,
    },
}

fn read_manifest(path: &Path) -> anyhow::Result<serde_json::Value> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{} is not valid JSON: {e}", path.display()))
}

fn names(scopes: ScopeSet) -> String {
    scopes.to_stored()
}

fn print_installation(i: &InstallationRecord) {
    println!(
        "installation: {} ({}, scopes: {})",
        i.id,
        i.state.as_str(),
        names(i.effective())
    );
}

fn lifecycle_error(id: Uuid, e: LifecycleError) -> anyhow::Error {
    match e {
        LifecycleError::AppNotFound => anyhow::anyhow!("no app with id {id}"),
        LifecycleError::NotInstalled => anyhow::anyhow!("app {id} has no installation"),
        LifecycleError::Conflict { message, state } => match state {
            Some(state) => anyhow::anyhow!(
                "conflict: {message} (the installation is {})",
                state.as_str()
            ),
            None => anyhow::anyhow!("conflict: {message}"),
        },
        LifecycleError::Invalid(problems) => describe(identity::IdentityError::Invalid(problems)),
        LifecycleError::CommandConflict(p) => {
            anyhow::anyhow!("conflict: {}: {}", p.pointer, p.message)
        }
        other => anyhow::anyhow!("{other}"),
    }
}

async fn register(
    manifest: &Path,
    cfg: &Config,
    store: &dyn crate::store::Store,
) -> anyhow::Result<()> {
    let doc = read_manifest(manifest)?;
    let install = (cfg.registration.install, identity::Registrant::Operator);
    let app = identity::register_app(store, &doc, &cfg.manifest_bounds(), install, None)
        .await
        .map_err(describe)?;
    println!("app id:  {}", app.registered.id);
    println!("app key: {}", app.registered.key.plaintext);
    match &app.installation {
        Some(i) => print_installation(i),
        None => println!(
            "installation: none yet (registration.install = \"pending\"): `switchboard app install --id {}`",
            app.registered.id
        ),
    }
    if app.manifest.delivery.interactions_url.is_some() {
        println!("interactionsUrl: unverified (the running hub checks it now; `switchboard app verify-url {}`)", app.registered.id);
    }
    println!("The key is shown only once; store it now.");
    Ok(())
}

/// `switchboard app`: the operator's app commands. The check goes through
/// the running hub, the runs through `cli::runs`; the others straight to
/// the store.
pub async fn app(command: AppCommand, cfg: Config) -> anyhow::Result<()> {
    match command {
        AppCommand::Check { id, hub, app_key } => super::check::check(id, hub, app_key, &cfg).await,
        AppCommand::Run { target } => super::runs::run(&target, cfg).await,
        AppCommand::Runs { card, log } => super::runs::list(card, log, cfg).await,
        AppCommand::Stop { run } => super::runs::stop(run, cfg).await,
        AppCommand::VerifyUrl { id, hub } => super::check::verify_url(id, hub, &cfg).await,
        other => on_store(other, cfg).await,
    }
}

async fn on_store(command: AppCommand, cfg: Config) -> anyhow::Result<()> {
    let store = crate::store::open_existing(&cfg).await?;
    let life = Lifecycle::offline(store.as_ref(), &cfg);
    let op = Actor::Operator;
    match command {
        AppCommand::Register { manifest } => register(&manifest, &cfg, store.as_ref()).await,
        AppCommand::List { after, limit } => {
            super::list::list(store.as_ref(), PrincipalKind::App, (after, limit), &cfg).await
        }
        AppCommand::RotateKey { id } => rotate(store.as_ref(), id, PrincipalKind::App).await,
        AppCommand::RevokeKey { id } => revoke(store.as_ref(), id, PrincipalKind::App).await,
        AppCommand::Install { id, scopes } => {
            let scopes = scopes.map(|s| s.0);
            let installed = life
                .install(id, scopes.as_deref(), op, None)
                .await
                .map_err(|e| lifecycle_error(id, e))?;
            print_installation(&installed.installation);
            if let Some(key) = installed.key {
                println!("app key: {}", key.plaintext);
                println!("The key is shown only once; store it now.");
            }
            Ok(())
        }
        AppCommand::SetScopes { id, scopes } => {
            let i = life.set_scopes(id, &scopes.0, op).await;
            print_installation(&i.map_err(|e| lifecycle_error(id, e))?);
            Ok(())
        }
        AppCommand::Suspend { id } => transition(life, id, Transition::Suspend).await,
        AppCommand::Resume { id } => transition(life, id, Transition::Resume).await,
        AppCommand::Uninstall { id } => {
            life.uninstall(id, op)
                .await
                .map_err(|e| lifecycle_error(id, e))?;
            println!(
                "app {id} uninstalled: its keys revoked, its grants deleted, its open tasks failed"
            );
            Ok(())
        }
        AppCommand::Check { id, hub, app_key } => super::check::check(id, hub, app_key, &cfg).await,
        AppCommand::Upgrade { id, manifest } => {
            let doc = read_manifest(&manifest)?;
            let up = life
                .upgrade(id, &doc, op)
                .await
                .map_err(|e| lifecycle_error(id, e))?;
            println!("changed: {}", up.changed.join(","));
            println!("requested: {}", names(up.requested));
            println!("granted: {}", names(up.granted));
            println!("awaiting consent: {}", names(up.awaiting_consent()));
            if let Some(url) = &up.interactions_url {
                println!(
                    "interactionsUrl: {}",
                    url["state"].as_str().unwrap_or("unverified")
                );
            }
            Ok(())
        }
        AppCommand::Run { .. }
        | AppCommand::Runs { .. }
        | AppCommand::Stop { .. }
        | AppCommand::VerifyUrl { .. } => {
            unreachable!("served above")
        }
    }
}

async fn transition(life: Lifecycle<'_>, id: Uuid, t: Transition) -> anyhow::Result<()> {
    let i = life.transition(id, t, Actor::Operator).await;
    print_installation(&i.map_err(|e| lifecycle_error(id, e))?);
    Ok(())
}

/// `switchboard audit actions`: the owner actions on apps, oldest first,
/// one line each: id, time, actor kind and id (`-` for the operator),
/// action, app, granted scopes before and after, state before and after
/// (`-` where there is none).
pub async fn audit_actions(
    app: Option<Uuid>,
    after: Option<Uuid>,
    limit: Option<u32>,
    config: Config,
) -> anyhow::Result<()> {
    let max = config.audit.page_max;
    let limit = limit.unwrap_or(config.audit.page_default);
    if !(1..=max).contains(&limit) {
        anyhow::bail!("--limit must be from 1 to {max} (audit.page_max)");
    }
    let store = crate::store::open_existing(&config).await?;
    let dash = |s: Option<String>| s.unwrap_or_else(|| "-".into());
    for r in store.actions(ActionFilter { app }, after, limit).await? {
        println!(
            "{} {} {} {} {} {} {} {} {} {}",
            r.id,
            rfc3339(r.at),
            r.actor.kind_str(),
            dash(r.actor.id().map(|id| id.to_string())),
            r.action.as_str(),
            r.app_id,
            dash(r.scopes_before.map(names)),
            dash(r.scopes_after.map(names)),
            dash(r.state_before.map(|s| s.as_str().to_string())),
            dash(r.state_after.map(|s| s.as_str().to_string())),
        );
    }
    Ok(())
}
