//! `switchboard space|channel|grant|group` (ADR 0020 §2): the operator's
//! place management, straight on the store like the other operator
//! commands. A running hub learns of a grant or membership change made here
//! when its cached channel entries are next refilled (ADR 0019's cluster
//! caveat): a right added is seen at once (a denial is decided again on the
//! store), a right removed once the entry is dropped; use the REST routes
//! to have it take effect before the answer.

use clap::Subcommand;
use uuid::Uuid;

use crate::config::Config;
use crate::domain::authz::level::{GrantPlace, Holder, APP_CAP};
use crate::domain::authz::Level;
use crate::domain::place_names;
use crate::domain::{now_millis, PrincipalKind};
use crate::store::{GrantRecord, NewChannel, NewGrant, NewGroup, NewSpace};

#[derive(Subcommand)]
pub enum SpaceCommand {
    /// Create a space and print its id.
    Create {
        /// The space's name: 1 to 80 characters, not blank.
        #[arg(long)]
        name: String,
    },
}

#[derive(Subcommand)]
pub enum ChannelCommand {
    /// Create an open channel in a space and print its id.
    Create {
        /// The space's id.
        #[arg(long)]
        space: Uuid,
        /// The channel's name: 1 to 80 lowercase letters, digits and -.
        #[arg(long)]
        name: String,
    },
}

#[derive(Subcommand)]
pub enum GrantCommand {
    /// Grant a level on a space or channel (replacing the subject's grant there).
    Put {
        /// A principal's id (or use --group).
        #[arg(long, conflicts_with = "group", required_unless_present = "group")]
        principal: Option<Uuid>,
        /// A group's id (or use --principal).
        #[arg(long)]
        group: Option<Uuid>,
        /// The space's id (or use --channel).
        #[arg(long, conflicts_with = "channel", required_unless_present = "channel")]
        space: Option<Uuid>,
        /// The channel's id (or use --space).
        #[arg(long)]
        channel: Option<Uuid>,
        /// read, write, trigger or admin.
        #[arg(long)]
        level: String,
    },
    /// Delete a grant by id.
    Delete {
        /// The grant's id (`switchboard grant list`).
        #[arg(long)]
        id: Uuid,
    },
    /// List the grants on a space or channel.
    List {
        /// The space's id (or use --channel).
        #[arg(long, conflicts_with = "channel", required_unless_present = "channel")]
        space: Option<Uuid>,
        /// The channel's id (or use --space).
        #[arg(long)]
        channel: Option<Uuid>,
    },
}

#[derive(Subcommand)]
pub enum GroupCommand {
    /// Create a group and print its id.
    Create {
        /// The group's name: 1 to 80 characters, not blank.
        #[arg(long)]
        name: String,
    },
    /// Add a principal to a group.
    Add {
        /// The group's id.
        #[arg(long)]
        group: Uuid,
        /// The principal's id (agent, person or app).
        #[arg(long)]
        principal: Uuid,
    },
    /// Remove a principal from a group.
    Remove {
        /// The group's id.
        #[arg(long)]
        group: Uuid,
        /// The principal's id (agent, person or app).
        #[arg(long)]
        principal: Uuid,
    },
}

pub(super) async fn space(command: SpaceCommand, config: Config) -> anyhow::Result<()> {
    let store = crate::store::open_existing(&config).await?;
    let SpaceCommand::Create { name } = command;
    check_display_name(&name)?;
    let created = store
        .create_space(&NewSpace {
            id: Uuid::now_v7(),
            name,
            created_at: now_millis(),
        })
        .await?;
    println!("space id: {}", created.id);
    Ok(())
}

pub(super) async fn channel(command: ChannelCommand, config: Config) -> anyhow::Result<()> {
    let store = crate::store::open_existing(&config).await?;
    let ChannelCommand::Create { space, name } = command;
    if !place_names::is_channel_name(&name) {
        anyhow::bail!("--name: {}", place_names::CHANNEL_NAME_RULE);
    }
    let created = store
        .create_channel(&NewChannel {
            id: Uuid::now_v7(),
            space_id: space,
            name,
            created_by: Uuid::nil(),
            created_at: now_millis(),
        })
        .await
        .map_err(|e| match e {
            crate::store::StoreError::NotFound => {
                anyhow::anyhow!("--space: no space with id {space}")
            }
            other => other.into(),
        })?;
    println!("channel id: {}", created.id);
    Ok(())
}

pub(super) async fn grant(command: GrantCommand, config: Config) -> anyhow::Result<()> {
    let store = crate::store::open_existing(&config).await?;
    match command {
        GrantCommand::Put {
            principal,
            group,
            space,
            channel,
            level,
        } => {
            let level = Level::parse(&level)
                .ok_or_else(|| anyhow::anyhow!("--level: read, write, trigger or admin"))?;
            let subject = match (principal, group) {
                (Some(p), _) => Holder::Principal(p),
                (None, Some(g)) => Holder::Group(g),
                (None, None) => anyhow::bail!("--principal or --group is required"),
            };
            if let Holder::Principal(p) = subject {
                let record = store.principal(p).await?;
                if record.is_some_and(|r| r.kind == PrincipalKind::App) && level > APP_CAP {
                    anyhow::bail!("--level: an app holds at most write (level_above_app_cap)");
                }
            }
            let grant = NewGrant {
                id: Uuid::now_v7(),
                subject,
                place: place(space, channel)?,
                level,
                granted_by: None,
                created_at: now_millis(),
            };
            let written = store.put_grant(&grant).await.map_err(|e| match e {
                crate::store::StoreError::NotFound => {
                    anyhow::anyhow!("the subject or the place does not exist (or is disabled)")
                }
                crate::store::StoreError::Conflict(m) if m == crate::store::APP_NOT_INSTALLED => {
                    anyhow::anyhow!(
                        "--principal: the app is not installed, pending or uninstalled \
                         (app_not_installed); install it first: switchboard app install --id {}",
                        principal.unwrap_or_default()
                    )
                }
                other => other.into(),
            })?;
            println!("grant id: {}", written.id);
            Ok(())
        }
        GrantCommand::Delete { id } => match store.delete_grant(id, None, now_millis()).await {
            Err(crate::store::StoreError::NotFound) => anyhow::bail!("no grant with id {id}"),
            other => {
                other?;
                println!("deleted grant {id}");
                Ok(())
            }
        },
        GrantCommand::List { space, channel } => {
            for g in store.grants_of_place(place(space, channel)?).await? {
                println!("{}", grant_line(&g));
            }
            Ok(())
        }
    }
}

fn place(space: Option<Uuid>, channel: Option<Uuid>) -> anyhow::Result<GrantPlace> {
    match (space, channel) {
        (Some(s), _) => Ok(GrantPlace::Space(s)),
        (None, Some(c)) => Ok(GrantPlace::Channel(c)),
        (None, None) => anyhow::bail!("--space or --channel is required"),
    }
}

fn grant_line(g: &GrantRecord) -> String {
    let subject = match g.subject {
        Holder::Principal(id) => format!("principal {id}"),
        Holder::Group(id) => format!("group {id}"),
    };
    format!("{}  {subject}  {}", g.id, g.level)
}

pub(super) async fn group(command: GroupCommand, config: Config) -> anyhow::Result<()> {
    let store = crate::store::open_existing(&config).await?;
    let not_found = |e: crate::store::StoreError| match e {
        crate::store::StoreError::NotFound => anyhow::anyhow!("no such group or principal"),
        other => other.into(),
    };
    match command {
        GroupCommand::Create { name } => {
            check_display_name(&name)?;
            let group = NewGroup {
                id: Uuid::now_v7(),
                name,
                created_at: now_millis(),
            };
            store.create_group(&group).await?;
            println!("group id: {}", group.id);
        }
        GroupCommand::Add { group, principal } => {
            let now = now_millis();
            store
                .add_member(group, principal, now)
                .await
                .map_err(not_found)?;
            println!("added {principal} to group {group}");
        }
        GroupCommand::Remove { group, principal } => {
            store
                .remove_member(group, principal)
                .await
                .map_err(not_found)?;
            println!("removed {principal} from group {group}");
        }
    }
    Ok(())
}

fn check_display_name(name: &str) -> anyhow::Result<()> {
    if !place_names::is_display_name(name) {
        anyhow::bail!("--name: {}", place_names::DISPLAY_NAME_RULE);
    }
    Ok(())
}
