//! Commands and their invocations (ADR 0027 §2, §4): one area, one trait,
//! the same SQL on both backends. The install, upgrade and uninstall steps
//! run inside `InstallationStore`'s own transactions (`installations`,
//! `apps`, `uninstall`), so commands come and go with the installation.
//! An invoke writes its row, the app's event and the job in one
//! transaction that holds the owner's installation (shared), so a suspend
//! either waits for it or is seen by it. A register holds it exclusively,
//! so two registers count the owner's commands one after the other.
//! Every transaction here that ends without writing rolls back at once,
//! before the SQLite writer lock passes on (a dropped transaction only
//! queues its rollback).

use async_trait::async_trait;
use uuid::Uuid;

use super::installations::{locked, shared, InstallationDialect};
use super::jobs::{insert_job, JobKind, NewJob};
use super::sql::Tx;
use super::sql::{is_unique_violation, parsed, to_json, Arg, Database, Executor, Row};
use super::{StoreError, StoreResult};

// The install, upgrade and uninstall steps live in `command_manifest`.
pub(super) use super::command_manifest::{apply_upgrade, install_manifest, remove_all};
use crate::domain::authz::Level;
use crate::domain::command::name_key;
use crate::domain::event::{NewEvent, StoredEvent};
use crate::domain::installation::{InstallationFacts, InstallationState, Scope};
use crate::domain::manifest::{CommandDecl, OptionDecl};
use crate::domain::Millis;

/// How a command came to be: a manifest's (diffed on upgrade) or the
/// app's own through the API (kept by upgrades).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandSource {
    Manifest,
    Api,
}

impl CommandSource {
    pub fn as_str(self) -> &'static str {
        match self {
            CommandSource::Manifest => "manifest",
            CommandSource::Api => "api",
        }
    }

    fn parse(s: &str) -> Option<CommandSource> {
        match s {
            "manifest" => Some(CommandSource::Manifest),
            "api" => Some(CommandSource::Api),
            _ => None,
        }
    }
}

/// A live command.
#[derive(Clone, Debug, PartialEq)]
pub struct CommandRecord {
    pub id: Uuid,
    pub owner_id: Uuid,
    pub name: String,
    pub description: String,
    pub required_level: Level,
    pub options: Vec<OptionDecl>,
    pub source: CommandSource,
    /// `None`: hub-wide, offered wherever the owner holds write.
    pub conversation_id: Option<Uuid>,
    pub version: i64,
    pub created_at: Millis,
    pub updated_at: Millis,
}

/// What an app registers through the API.
#[derive(Clone, Debug, PartialEq)]
pub struct NewCommand {
    pub owner_id: Uuid,
    pub decl: CommandDecl,
    pub conversation_id: Option<Uuid>,
    /// `command.max_per_principal`: live commands of the owner at most.
    pub max: usize,
    pub now: Millis,
}

/// One invocation's row: ids only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvocationRecord {
    pub id: Uuid,
    pub command_id: Uuid,
    pub app_id: Uuid,
    pub actor_id: Uuid,
    pub conversation_id: Uuid,
    pub thread_id: Option<Uuid>,
    pub client_invocation_id: Option<String>,
    pub created_at: Millis,
}

/// An invoke to write: its row and the app's event, always written (the
/// durable record of the options, which issue 17's job sends to an app
/// without a gateway; reading it still needs `events:subscribe`).
#[derive(Clone, Debug, PartialEq)]
pub struct NewInvocation {
    pub invocation: InvocationRecord,
    pub event: NewEvent,
    /// A REST `Idempotency-Key`'s record, written in the same transaction
    /// (`IdempotencyTaken` when it exists: a concurrent replay).
    pub idem: Option<super::IdempotencyRecord>,
}

/// How an invoke ended in its transaction.
#[derive(Clone, Debug, PartialEq)]
pub enum Invoked {
    Written {
        invocation: InvocationRecord,
        events: Vec<StoredEvent>,
    },
    /// The actor's `clientInvocationId` names an earlier invocation of
    /// the same command.
    Duplicate(InvocationRecord),
    /// The command was removed, or its owner is no longer active with
    /// `commands:write`, by the time the transaction held its
    /// installation: answered as an unknown command.
    Unreachable,
}

/// How a register ended in its transaction.
#[derive(Clone, Debug, PartialEq)]
pub enum Registered {
    Written(CommandRecord),
    /// The owner's installation, as the transaction held it, is not active
    /// with `commands:write` (`None`: not installed): refused as the
    /// decision refuses it.
    Refused(Option<InstallationFacts>),
}

/// What one install, upgrade or uninstall did to the app's commands, by
/// name (the audit's details and the upgrade's answer).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandChanges {
    pub added: Vec<String>,
    pub changed: Vec<String>,
    pub removed: Vec<String>,
}

impl CommandChanges {
    /// The audit row's details.
    pub fn details(&self) -> super::audit_actions::ActionDetails {
        super::audit_actions::ActionDetails {
            commands_added: self.added.clone(),
            commands_changed: self.changed.clone(),
            commands_removed: self.removed.clone(),
            components_disabled: 0,
            subscription_id: None,
        }
    }
}

#[async_trait]
pub trait CommandStore: Send + Sync + 'static {
    /// A live command by id.
    async fn command(&self, id: Uuid) -> StoreResult<Option<CommandRecord>>;

    /// The live commands an app owns, by name.
    async fn commands_of(&self, owner: Uuid) -> StoreResult<Vec<CommandRecord>>;

    /// The live commands that may be offered in `conversation`: hub-wide
    /// ones and those scoped to it, by owner and name. Who may see each is
    /// the guard's (ADR 0027 §3).
    async fn commands_offered(&self, conversation: Uuid) -> StoreResult<Vec<CommandRecord>>;

    /// Registers an API command while the owner's installation is active
    /// with `commands:write`. `Conflict("command_limit")` past `new.max`,
    /// `Conflict` for a live name of the owner in that place.
    async fn register_command(&self, new: &NewCommand) -> StoreResult<Registered>;

    /// Removes a live command of `owner`; `NotFound` for another's, a
    /// removed or an unknown one.
    async fn remove_command(&self, owner: Uuid, id: Uuid, now: Millis) -> StoreResult<()>;

    /// Writes an invocation, the app's event and the dispatch job in one
    /// transaction (see [`Invoked`]).
    async fn invoke(&self, new: &NewInvocation) -> StoreResult<Invoked>;

    async fn invocation(&self, id: Uuid) -> StoreResult<Option<InvocationRecord>>;
}

/// The live-name conflict of a register or an upgrade.
pub const COMMAND_LIMIT: &str = "command_limit";

const COLUMNS: &str = "id, owner_id, name, description, required_level, options, source, \
     conversation_id, version, created_at, updated_at";

const INVOCATION_COLUMNS: &str = "id, command_id, app_id, actor_id, conversation_id, thread_id, \
     client_invocation_id, created_at";

fn command_row(r: &Row) -> StoreResult<CommandRecord> {
    Ok(CommandRecord {
        id: r.id("id")?,
        owner_id: r.id("owner_id")?,
        name: r.text("name")?,
        description: r.text("description")?,
        required_level: parsed(r.text("required_level")?, "level", Level::parse)?,
        options: r.decoded("options")?,
        source: parsed(r.text("source")?, "command source", CommandSource::parse)?,
        conversation_id: r.opt_id("conversation_id")?,
        version: r.int("version")?,
        created_at: r.int("created_at")?,
        updated_at: r.int("updated_at")?,
    })
}

fn invocation_row(r: &Row) -> StoreResult<InvocationRecord> {
    Ok(InvocationRecord {
        id: r.id("id")?,
        command_id: r.id("command_id")?,
        app_id: r.id("app_id")?,
        actor_id: r.id("actor_id")?,
        conversation_id: r.id("conversation_id")?,
        thread_id: r.opt_id("thread_id")?,
        client_invocation_id: r.opt_text("client_invocation_id")?,
        created_at: r.int("created_at")?,
    })
}

/// Inserts one live command; a live one of the same name in the same
/// place is a `Conflict` naming it.
pub(super) async fn insert(
    ex: &mut dyn Executor,
    c: &CommandDecl,
    owner: Uuid,
    source: CommandSource,
    conversation: Option<Uuid>,
    now: Millis,
) -> StoreResult<CommandRecord> {
    let options = to_json(&c.options)?;
    let record = CommandRecord {
        id: Uuid::now_v7(),
        owner_id: owner,
        name: c.name.clone(),
        description: c.description.clone(),
        required_level: c.required_level,
        options: c.options.clone(),
        source,
        conversation_id: conversation,
        version: 1,
        created_at: now,
        updated_at: now,
    };
    ex.execute(
        &format!(
            "INSERT INTO commands ({COLUMNS}, name_key) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
        ),
        &[
            Arg::Id(record.id),
            Arg::Id(owner),
            Arg::Text(&record.name),
            Arg::Text(&record.description),
            Arg::Text(record.required_level.as_str()),
            Arg::Json(&options),
            Arg::Text(source.as_str()),
            Arg::OptId(conversation),
            Arg::Int(1),
            Arg::Int(now),
            Arg::Int(now),
            Arg::Text(&name_key(&c.name)),
        ],
    )
    .await
    .map_err(|e| {
        if is_unique_violation(&e) {
            StoreError::Conflict(format!("the app has a command named {:?} already", c.name))
        } else {
            e
        }
    })?;
    Ok(record)
}

async fn live_count(ex: &mut dyn Executor, owner: Uuid) -> StoreResult<usize> {
    let row = ex
        .fetch_optional(
            "SELECT count(*) AS n FROM commands WHERE owner_id = $1 AND removed_at IS NULL",
            &[Arg::Id(owner)],
        )
        .await?;
    Ok(row.map(|r| r.int("n")).transpose()?.unwrap_or(0) as usize)
}

fn over_limit() -> StoreError {
    StoreError::Conflict(COMMAND_LIMIT.into())
}

/// The invocation of the same command an actor's `clientInvocationId`
/// names, if any (the id is the actor's, per command).
async fn by_client_id(
    ex: &mut dyn Executor,
    i: &InvocationRecord,
) -> StoreResult<Option<InvocationRecord>> {
    let Some(client_id) = i.client_invocation_id.as_deref() else {
        return Ok(None);
    };
    ex.fetch_optional(
        &format!(
            "SELECT {INVOCATION_COLUMNS} FROM command_invocations \
             WHERE actor_id = $1 AND command_id = $2 AND client_invocation_id = $3"
        ),
        &[
            Arg::Id(i.actor_id),
            Arg::Id(i.command_id),
            Arg::Text(client_id),
        ],
    )
    .await?
    .map(|r| invocation_row(&r))
    .transpose()
}

async fn insert_invocation(
    ex: &mut dyn Executor,
    i: &InvocationRecord,
    event: Uuid,
) -> StoreResult<()> {
    ex.execute(
        &format!(
            "INSERT INTO command_invocations ({INVOCATION_COLUMNS}, event_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
        ),
        &[
            Arg::Id(i.id),
            Arg::Id(i.command_id),
            Arg::Id(i.app_id),
            Arg::Id(i.actor_id),
            Arg::Id(i.conversation_id),
            Arg::OptId(i.thread_id),
            Arg::OptText(i.client_invocation_id.as_deref()),
            Arg::Int(i.created_at),
            Arg::Id(event),
        ],
    )
    .await?;
    Ok(())
}

/// A register's checks and row, in its transaction: the installation held
/// exclusively (two registers at `max - 1` count one after the other),
/// active with `commands:write`, then the count and the row.
async fn register_in<D: InstallationDialect>(
    ex: &mut dyn Executor,
    new: &NewCommand,
) -> StoreResult<Registered> {
    let live = locked::<D>(ex, LIVE, Arg::Id(new.owner_id)).await?;
    let facts = live.map(|i| i.facts());
    if !facts.is_some_and(|f| reaches(&f)) {
        return Ok(Registered::Refused(facts));
    }
    if live_count(ex, new.owner_id).await? >= new.max {
        return Err(over_limit());
    }
    let record = insert(
        ex,
        &new.decl,
        new.owner_id,
        CommandSource::Api,
        new.conversation_id,
        new.now,
    )
    .await?;
    Ok(Registered::Written(record))
}

/// The owner's live installation row.
const LIVE: &str = "app_id = $1 AND state <> 'uninstalled'";

/// An installation through which the app's commands are live.
fn reaches(f: &InstallationFacts) -> bool {
    f.state == InstallationState::Active && f.scopes.contains(Scope::CommandsWrite)
}

/// An invoke's checks and writes, in its transaction (see [`Invoked`]).
async fn invoke_in<D: InstallationDialect>(
    ex: &mut dyn Executor,
    new: &NewInvocation,
) -> StoreResult<Invoked> {
    let i = &new.invocation;
    let live = shared::<D>(ex, LIVE, Arg::Id(i.app_id)).await?;
    if !live.is_some_and(|l| reaches(&l.facts())) {
        return Ok(Invoked::Unreachable);
    }
    let command = ex
        .fetch_optional(
            "SELECT id FROM commands WHERE id = $1 AND removed_at IS NULL",
            &[Arg::Id(i.command_id)],
        )
        .await?;
    if command.is_none() {
        return Ok(Invoked::Unreachable);
    }
    if let Some(first) = by_client_id(ex, i).await? {
        return Ok(Invoked::Duplicate(first));
    }
    super::identity::insert_idempotency(ex, new.idem.as_ref(), i.created_at).await?;
    insert_invocation(ex, i, new.event.id).await?;
    let events = ex
        .append_events(std::slice::from_ref(&new.event), i.created_at)
        .await?;
    let job = NewJob::new(JobKind::AppCommandDispatch, i.id, i.created_at);
    insert_job(ex, &job, i.created_at).await?;
    Ok(Invoked::Written {
        invocation: i.clone(),
        events,
    })
}

/// Commits `tx` when `wrote`; otherwise (every early answer and every
/// error) rolls it back now, before the SQLite writer lock passes on.
async fn finish<T>(tx: Tx, outcome: StoreResult<T>, wrote: impl Fn(&T) -> bool) -> StoreResult<T> {
    match outcome {
        Ok(done) if wrote(&done) => {
            tx.commit().await?;
            Ok(done)
        }
        Ok(done) => {
            tx.rollback().await?;
            Ok(done)
        }
        Err(e) => {
            // The error is the answer; a connection whose rollback failed
            // is the pool's to drop.
            let _ = tx.rollback().await;
            Err(e)
        }
    }
}

#[async_trait]
impl<D> CommandStore for D
where
    D: Database + InstallationDialect,
{
    async fn command(&self, id: Uuid) -> StoreResult<Option<CommandRecord>> {
        self.read()
            .await?
            .fetch_optional(
                &format!("SELECT {COLUMNS} FROM commands WHERE id = $1 AND removed_at IS NULL"),
                &[Arg::Id(id)],
            )
            .await?
            .map(|r| command_row(&r))
            .transpose()
    }

    async fn commands_of(&self, owner: Uuid) -> StoreResult<Vec<CommandRecord>> {
        let rows = self
            .read()
            .await?
            .fetch_all(
                &format!(
                    "SELECT {COLUMNS} FROM commands WHERE owner_id = $1 AND removed_at IS NULL \
                     ORDER BY name_key, id"
                ),
                &[Arg::Id(owner)],
            )
            .await?;
        rows.iter().map(command_row).collect()
    }

    async fn commands_offered(&self, conversation: Uuid) -> StoreResult<Vec<CommandRecord>> {
        let rows = self
            .read()
            .await?
            .fetch_all(
                &format!(
                    "SELECT {COLUMNS} FROM commands WHERE removed_at IS NULL \
                     AND (conversation_id IS NULL OR conversation_id = $1) ORDER BY name_key, owner_id, id"
                ),
                &[Arg::Id(conversation)],
            )
            .await?;
        rows.iter().map(command_row).collect()
    }

    async fn register_command(&self, new: &NewCommand) -> StoreResult<Registered> {
        let mut tx = self.begin().await?;
        let outcome = register_in::<D>(&mut *tx, new).await;
        finish(tx, outcome, |r| matches!(r, Registered::Written(_))).await
    }

    async fn remove_command(&self, owner: Uuid, id: Uuid, now: Millis) -> StoreResult<()> {
        let removed = self
            .write()
            .await?
            .execute(
                "UPDATE commands SET removed_at = $1, updated_at = $1 \
                 WHERE id = $2 AND owner_id = $3 AND removed_at IS NULL",
                &[Arg::Int(now), Arg::Id(id), Arg::Id(owner)],
            )
            .await?;
        if removed == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    async fn invoke(&self, new: &NewInvocation) -> StoreResult<Invoked> {
        let mut tx = self.begin().await?;
        let outcome = invoke_in::<D>(&mut *tx, new).await;
        let outcome = finish(tx, outcome, |i| matches!(i, Invoked::Written { .. })).await;
        match outcome {
            // A concurrent twin with the same `clientInvocationId` (on
            // PostgreSQL both can miss the other's row): its row is the
            // answer.
            Err(e) if is_unique_violation(&e) && new.invocation.client_invocation_id.is_some() => {
                let first = by_client_id(&mut *self.read().await?, &new.invocation).await?;
                first.map(Invoked::Duplicate).ok_or(e)
            }
            other => other,
        }
    }

    async fn invocation(&self, id: Uuid) -> StoreResult<Option<InvocationRecord>> {
        self.read()
            .await?
            .fetch_optional(
                &format!("SELECT {INVOCATION_COLUMNS} FROM command_invocations WHERE id = $1"),
                &[Arg::Id(id)],
            )
            .await?
            .map(|r| invocation_row(&r))
            .transpose()
    }
}
