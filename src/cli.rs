//! The `switchboard` command line.

mod apps;
mod check;
#[cfg(test)]
mod help_tests;
mod list;
mod people;
mod places;
mod runs;
mod webhooks;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use uuid::Uuid;

use crate::config::{Config, FlagOverrides};
use crate::domain::PrincipalKind;
use crate::identity;

/// A command's chosen exit code, after it printed why (`app check`).
#[derive(Debug, thiserror::Error)]
#[error("exit code {0}")]
pub struct Exit(pub u8);

#[derive(Parser)]
#[command(
    name = "switchboard",
    version,
    about = "A JSON-RPC 2.0 WebSocket hub for AI agents and apps"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// Where the hub's configuration and database are: the same for `serve`
/// and every operator command, so both find the same database.
#[derive(Args, Clone, Default)]
pub struct ConfigArgs {
    /// TOML configuration file (the one the hub runs with).
    #[arg(long, env = "SWITCHBOARD_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    /// Data directory for the embedded database (server.data_dir).
    #[arg(long, global = true)]
    pub data_dir: Option<PathBuf>,
    /// Database URL: sqlite:PATH or postgres://... (storage.database_url).
    #[arg(long, global = true)]
    pub database_url: Option<String>,
}

impl ConfigArgs {
    pub fn load(&self) -> anyhow::Result<Config> {
        self.load_listening(None)
    }

    fn load_listening(&self, listen: Option<std::net::SocketAddr>) -> anyhow::Result<Config> {
        Config::load(
            self.config.as_deref(),
            &FlagOverrides {
                listen,
                data_dir: self.data_dir.clone(),
                database_url: self.database_url.clone(),
            },
        )
    }
}

/// `serve`'s options: the configuration, and where to listen.
#[derive(Args, Clone, Default)]
pub struct ServeArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Address to listen on (server.listen).
    #[arg(long)]
    pub listen: Option<std::net::SocketAddr>,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the hub.
    Serve(#[command(flatten)] ServeArgs),
    /// Apply database migrations and exit.
    Migrate(#[command(flatten)] ConfigArgs),
    /// Webhook signing keys.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// App Cards: keys, signing, verification, packing.
    Card {
        #[command(subcommand)]
        command: crate::cards::CardCommand,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Measure the hub (see docs/benchmarks.md).
    Bench(crate::bench::BenchArgs),
    /// Protocol schemas.
    Schema {
        #[command(subcommand)]
        command: SchemaCommand,
    },
    /// Operator helpers for agents.
    Agent {
        #[command(subcommand)]
        command: AgentCommand,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Operator helpers for apps.
    App {
        #[command(subcommand)]
        command: apps::AppCommand,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Operator helpers for people.
    Person {
        #[command(subcommand)]
        command: people::PersonCommand,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Spaces (ADR 0020 §2).
    Space {
        #[command(subcommand)]
        command: places::SpaceCommand,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Channels in spaces.
    Channel {
        #[command(subcommand)]
        command: places::ChannelCommand,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Grants of levels on spaces and channels.
    Grant {
        #[command(subcommand)]
        command: places::GrantCommand,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Groups of principals, for grants.
    Group {
        #[command(subcommand)]
        command: places::GroupCommand,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// The audit of denials (ADR 0020 §4) and of owner actions (ADR 0023 §5).
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Apps' webhook subscriptions (ADR 0033).
    Webhooks {
        #[command(subcommand)]
        command: webhooks::WebhooksCommand,
        #[command(flatten)]
        config: ConfigArgs,
    },
}

#[derive(Subcommand)]
pub enum AuditCommand {
    /// Denial records by id (oldest first), one line each: id, first and
    /// last time, count, actor kind and id, action, reason, resource kind
    /// and id.
    List {
        /// Only this actor's records.
        #[arg(long)]
        actor: Option<Uuid>,
        /// Only this action (`message.create`, ...).
        #[arg(long, value_parser = parse_action)]
        action: Option<crate::domain::authz::Action>,
        /// Only this reason (`no_grant`, ...).
        #[arg(long, value_parser = parse_reason)]
        reason: Option<crate::domain::authz::Reason>,
        /// Records after this id (the last one printed).
        #[arg(long)]
        after: Option<Uuid>,
        /// At most this many (default audit.page_default, at most audit.page_max).
        #[arg(long)]
        limit: Option<u32>,
    },
    /// Owner actions on apps (ADR 0023 §5) by id (oldest first), one line
    /// each: id, time, actor kind and id, action, app, granted scopes and
    /// state before and after.
    Actions {
        /// Only this app's actions.
        #[arg(long)]
        app: Option<Uuid>,
        /// Actions after this id (the last one printed).
        #[arg(long)]
        after: Option<Uuid>,
        /// At most this many (default audit.page_default, at most audit.page_max).
        #[arg(long)]
        limit: Option<u32>,
    },
}

fn parse_action(s: &str) -> Result<crate::domain::authz::Action, String> {
    crate::domain::authz::Action::parse(s).ok_or_else(|| "not an action of the catalogue".into())
}

fn parse_reason(s: &str) -> Result<crate::domain::authz::Reason, String> {
    crate::domain::authz::Reason::parse(s).ok_or_else(|| "not a denial reason".into())
}

#[derive(Subcommand)]
pub enum KeysCommand {
    /// The signing keys (public parts only).
    List,
    /// Make a new active key; the previous one signs too for
    /// webhooks.rotation_overlap_hours.
    Rotate {
        /// Use this `whsk_...` secret instead of a fresh one (for importing
        /// an existing key).
        #[arg(long)]
        secret_file: Option<PathBuf>,
        /// Retire the current keys at once without opening them: for a lost
        /// webhooks.key_encryption_key (receivers must fetch the new key).
        #[arg(long)]
        discard_unreadable: bool,
    },
}

#[derive(Subcommand)]
pub enum SchemaCommand {
    /// Write rpc/openrpc.json, rpc/openapi.json and schemas/*.schema.json.
    Export {
        /// Repository root to write into.
        #[arg(long, default_value = ".")]
        out: PathBuf,
        /// Also render the method, event and action tables of
        /// docs/protocol.md between their markers.
        #[arg(long)]
        docs: bool,
    },
}

#[derive(Subcommand)]
pub enum AgentCommand {
    /// Register an agent and print its id and key (shown once).
    Register {
        /// The agent's name, 1 to 100 characters.
        #[arg(long)]
        name: String,
        /// What the agent does, shown to others (at most 2000 characters).
        #[arg(long)]
        description: Option<String>,
        /// The person who owns the agent (ADR 0020 §1).
        #[arg(long)]
        owner: Option<Uuid>,
    },
    /// The agents by id, one line each: id, name, owner (or -), created,
    /// and "disabled" for a disabled one.
    List {
        /// Agents after this id (the last one printed).
        #[arg(long)]
        after: Option<Uuid>,
        /// At most this many (default audit.page_default, at most audit.page_max).
        #[arg(long)]
        limit: Option<u32>,
    },
    /// Set the agent's owner (a person), or clear it with --none.
    SetOwner {
        /// The agent's id (`switchboard agent list`).
        #[arg(long)]
        id: Uuid,
        /// The owning person's id.
        #[arg(long, required_unless_present = "none", conflicts_with = "none")]
        owner: Option<Uuid>,
        /// Clear the owner.
        #[arg(long)]
        none: bool,
    },
    /// Issue a new key and revoke the old ones. A running hub closes sockets
    /// on the old keys (4003) within gateway.revocation_check_interval_ms.
    RotateKey {
        /// The agent's id (`switchboard agent list`).
        #[arg(long)]
        id: Uuid,
    },
    /// Revoke every key of the agent.
    RevokeKey {
        /// The agent's id (`switchboard agent list`).
        #[arg(long)]
        id: Uuid,
    },
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => {
            let config = args.config.load_listening(args.listen)?;
            crate::telemetry::init_logging(&config.log);
            crate::server::serve(config).await
        }
        Command::Migrate(args) => migrate(args).await,
        Command::Keys { command, config } => keys(command, config.load()?).await,
        Command::Card { command, config } => {
            let config = config.load()?;
            crate::cards::run_with_store(command, &config).await
        }
        Command::Bench(args) => {
            crate::bench::run(args).await?;
            Ok(())
        }
        Command::Schema {
            command: SchemaCommand::Export { out, docs },
        } => {
            let mut files = crate::protocol::export::render();
            files.extend(crate::http::openapi::render());
            for path in crate::protocol::export::write(&out, &files)? {
                println!("wrote {path}");
            }
            if docs {
                let path = out.join(crate::protocol::docs_tables::PROTOCOL_DOC);
                let doc = std::fs::read_to_string(&path)?;
                std::fs::write(
                    &path,
                    crate::protocol::docs_tables::apply(&doc).map_err(anyhow::Error::msg)?,
                )?;
                println!("wrote {}", crate::protocol::docs_tables::PROTOCOL_DOC);
            }
            Ok(())
        }
        Command::Agent { command, config } => agent(command, config.load()?).await,
        Command::App { command, config } => apps::app(command, config.load()?).await,
        Command::Person { command, config } => people::person(command, config.load()?).await,
        Command::Space { command, config } => places::space(command, config.load()?).await,
        Command::Channel { command, config } => places::channel(command, config.load()?).await,
        Command::Grant { command, config } => places::grant(command, config.load()?).await,
        Command::Group { command, config } => places::group(command, config.load()?).await,
        Command::Audit { command, config } => audit(command, config.load()?).await,
        Command::Webhooks { command, config } => webhooks::webhooks(command, config.load()?).await,
    }
}

/// `switchboard audit list`: the audit of denials, straight from the store.
async fn audit(command: AuditCommand, config: Config) -> anyhow::Result<()> {
    use crate::store::AuditFilter;
    let (actor, action, reason, after, limit) = match command {
        AuditCommand::List {
            actor,
            action,
            reason,
            after,
            limit,
        } => (actor, action, reason, after, limit),
        AuditCommand::Actions { app, after, limit } => {
            return apps::audit_actions(app, after, limit, config).await
        }
    };
    let max = config.audit.page_max;
    let limit = limit.unwrap_or(config.audit.page_default);
    if !(1..=max).contains(&limit) {
        anyhow::bail!("--limit must be from 1 to {max} (audit.page_max)");
    }
    let store = crate::store::open_existing(&config).await?;
    let filter = AuditFilter {
        actor,
        action,
        reason,
    };
    for r in store.denials(filter, after, limit).await? {
        let d = r.denial;
        println!(
            "{} {} {} {} {} {} {} {} {} {}",
            r.id,
            crate::domain::event::rfc3339(r.first_at),
            crate::domain::event::rfc3339(r.last_at),
            r.count,
            d.actor_kind,
            d.actor_id,
            d.action,
            d.reason.as_str(),
            d.resource_kind.as_str(),
            d.resource_id
        );
    }
    Ok(())
}

async fn migrate(args: ConfigArgs) -> anyhow::Result<()> {
    let mut config = args.load()?;
    crate::telemetry::init_logging(&config.log);
    config.storage.migrate_on_start = false;
    // The one operator command that makes a database where there is none.
    let store = crate::store::open(&config).await?;
    store.migrate().await?;
    println!("migrations applied ({:?})", store.backend());
    Ok(())
}

/// `switchboard keys`: the hub's webhook signing keys.
async fn keys(command: KeysCommand, config: Config) -> anyhow::Result<()> {
    let store = crate::store::open_existing(&config).await?;
    let now = crate::domain::now_millis();
    match command {
        KeysCommand::List => {
            let keys = crate::webhooks::keys::published(store.as_ref(), now).await?;
            if keys.is_empty() {
                println!("no webhook signing keys yet: `switchboard keys rotate` makes the first");
            }
            for k in keys {
                println!(
                    "{} {} {} from {}{}",
                    k.key_id,
                    k.state,
                    k.public_key,
                    k.valid_from,
                    k.valid_until
                        .map(|u| format!(" until {u}"))
                        .unwrap_or_default()
                );
            }
        }
        KeysCommand::Rotate {
            secret_file,
            discard_unreadable,
        } => {
            let secret = match secret_file {
                None => None,
                Some(path) => {
                    let text = std::fs::read_to_string(&path)?;
                    match crate::webhooks::signature::SigningSecret::parse(text.trim()) {
                        Ok(crate::webhooks::signature::SigningSecret::Ed25519(k)) => Some(k),
                        _ => anyhow::bail!("{} does not hold a whsk_ key", path.display()),
                    }
                }
            };
            let previous = if discard_unreadable {
                crate::webhooks::keys::Previous::Discard
            } else {
                crate::webhooks::keys::Previous::Overlap
            };
            let id = crate::webhooks::keys::rotate(
                store.as_ref(),
                &config.webhooks,
                secret,
                previous,
                now,
            )
            .await?;
            println!("active signing key: {id}");
        }
    }
    Ok(())
}

/// `switchboard agent`: the operator's agent commands, straight on the store.
async fn agent(command: AgentCommand, config: Config) -> anyhow::Result<()> {
    let store = crate::store::open_existing(&config).await?;
    match command {
        AgentCommand::Register {
            name,
            description,
            owner,
        } => {
            let doc = people::name_and_description(name, description);
            let r = identity::register_agent_owned_by(store.as_ref(), &doc, owner, None)
                .await
                .map_err(describe)?;
            println!("agent id:  {}", r.id);
            println!("agent key: {}", r.key.plaintext);
            println!("The key is shown only once; store it now.");
            Ok(())
        }
        AgentCommand::List { after, limit } => {
            list::list(
                store.as_ref(),
                PrincipalKind::Agent,
                (after, limit),
                &config,
            )
            .await
        }
        AgentCommand::SetOwner { id, owner, none: _ } => {
            people::set_owner(store.as_ref(), id, owner).await
        }
        AgentCommand::RotateKey { id } => rotate(store.as_ref(), id, PrincipalKind::Agent).await,
        AgentCommand::RevokeKey { id } => revoke(store.as_ref(), id, PrincipalKind::Agent).await,
    }
}

fn describe(e: identity::IdentityError) -> anyhow::Error {
    match e {
        identity::IdentityError::Invalid(problems) => {
            let lines: Vec<String> = problems
                .iter()
                .map(|p| {
                    format!(
                        "  {}: {}",
                        if p.pointer.is_empty() {
                            "/"
                        } else {
                            &p.pointer
                        },
                        p.message
                    )
                })
                .collect();
            anyhow::anyhow!("invalid input:\n{}", lines.join("\n"))
        }
        other => anyhow::anyhow!("{other}"),
    }
}

async fn principal_of_kind(
    store: &(impl crate::store::IdentityStore + ?Sized),
    id: Uuid,
    kind: PrincipalKind,
) -> anyhow::Result<crate::domain::Principal> {
    match identity::principal(store, id).await {
        Ok(p) if p.kind == kind => Ok(p),
        Ok(_) | Err(identity::IdentityError::NotFound) => anyhow::bail!("no {kind} with id {id}"),
        Err(e) => Err(describe(e)),
    }
}

async fn rotate(
    store: &(impl crate::store::IdentityStore + ?Sized),
    id: Uuid,
    kind: PrincipalKind,
) -> anyhow::Result<()> {
    let p = principal_of_kind(store, id, kind).await?;
    let (key, revoked) = identity::rotate(store, p, None).await.map_err(describe)?;
    println!("{kind} id:  {id}");
    println!("{kind} key: {}", key.plaintext);
    println!(
        "revoked {} old key(s). The key is shown only once; store it now.",
        revoked.len()
    );
    Ok(())
}

async fn revoke(
    store: &(impl crate::store::IdentityStore + ?Sized),
    id: Uuid,
    kind: PrincipalKind,
) -> anyhow::Result<()> {
    let p = principal_of_kind(store, id, kind).await?;
    let revoked = identity::revoke(store, p.id).await.map_err(describe)?;
    println!("revoked {} key(s) of {kind} {id}", revoked.len());
    Ok(())
}
