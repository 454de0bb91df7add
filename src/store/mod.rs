//! Durable state behind one trait per area, with a SQLite implementation
//! (the embedded default) and a PostgreSQL one (ADR 0003, ADR 0014).
//!
//! A caller names the area it uses: [`IdentityStore`], [`EventStore`],
//! [`ConversationStore`], [`TaskStore`], [`JobStore`], [`CardStore`],
//! [`SigningKeyStore`], [`PlaceStore`], [`AuditStore`], [`InstallationStore`], [`OverviewStore`], [`PresenceStore`], [`ConsoleSessionStore`], with [`BaseStore`] for what concerns the database
//! itself. [`Store`] is all of them, and the hub holds one [`DynStore`].
//!
//! Each area module holds its trait, its records and its SQL, written once
//! against the narrow executor of [`sql`] where the dialects agree. What
//! really differs (locks, the group-commit writes, a few statements) is in
//! `sqlite/` and `postgres/`, behind the area's `...Dialect` trait. The
//! contract test suite runs the same cases against both.

mod app_grants;
mod app_urls;
mod apps;
mod audit;
mod audit_actions;
mod cards;
mod command_manifest;
mod commands;
mod commit_feed;
mod components;
mod console_sessions;
mod conversations;
mod effects;
pub(crate) mod events;
mod existing;
mod group_commit;
mod group_sends;
mod group_verdicts;
mod hosted;
mod hosted_invite_rights;
mod hosted_invites;
mod hosted_memory;
mod hosted_profiles;
mod hosted_rooms;
mod identity;
mod installation_held;
mod installation_records;
pub(crate) mod installations;
mod interactions;
mod jobs;
mod leases;
mod messages;
mod overview;
mod people;
mod place_levels;
mod places;
mod postgres;
mod presence;
pub(crate) mod recipients;
mod signing_keys;
pub(crate) mod sql;
mod sqlite;
mod tasks;
mod uninstall;
mod webhook_deliveries;
mod webhook_subscriptions;

use std::sync::Arc;

use async_trait::async_trait;

use crate::config::Config;

pub use app_urls::{AppUrlStore, RecordedCheck, UrlCheck};
pub use apps::{AppRecord, RegistrationInstall};
pub use audit::{AuditFilter, AuditRecord, AuditStore, DenialRecord};
pub use cards::{CardRecord, CardStore};
pub use commands::{
    CommandChanges, CommandRecord, CommandSource, CommandStore, InvocationRecord, Invoked,
    NewCommand, NewInvocation, Registered, COMMAND_LIMIT,
};
pub use commit_feed::{CommitFeed, CommitListener};
pub use components::{ComponentChange, ComponentChanged, ComponentStore, NewCard};
pub use console_sessions::{ConsoleSessionRecord, ConsoleSessionStore, SessionPrune};
pub use conversations::{ConversationStore, CreatedConversation, NewConversation};
pub use effects::Effects;
pub use events::EventStore;
pub use existing::open_existing;
pub use hosted::{
    AppProfile, CoordOutcome, HostedStore, InviteJoin, InviteRecord, InviteRedemption,
    JoinedEvents, JoinedRoom, Redeemed, RunEnd, RunRecord, INVITES_AT_MAX,
};
pub use identity::{
    IdempotencyRecord, IdempotentResponse, IdentityStore, KeyRecord, NewKey, NewPrincipal,
    OwnedAgent, OwnedKey, PrincipalRecord,
};
pub use installations::{
    ActionDetails, ActionFilter, ActionRecord, ChangeEvents, Changed, Committed, FailedTask,
    FailureEvents, InstallationRecord, InstallationStore, Installed, NewInstallation, Transitioned,
    Uninstalled, Upgraded,
};
pub use interactions::{
    InteractionCreated, InteractionResponse, InteractionStore, NewInteraction, Responded,
};
pub use jobs::{ClaimRoom, Job, JobKind, JobStore, NewJob};
pub use leases::{CreatedLease, LeaseAccess, LeaseChange, NewLease};
pub use messages::{
    AppCopies, Fanout, InsertedMessage, MessageDecided, MessageOutcome, MessagePage, NewMessage,
    PagePlace, PersonCopies, Verdict,
};
pub use overview::{
    AppOverview, EventBacklog, JobBacklog, LiveLease, Overview, OverviewStore, WaitingTask,
};
/// The overview's statements, for the tests that explain their plans.
pub mod overview_statements {
    pub use super::overview::{
        EVENT_BACKLOG, LEASES_BY_STATE, LIVE_LEASES, TASKS_BY_STATE, WAITING_TASKS,
    };
}
pub use places::{
    actor_of, ChannelLevels, ChannelRecord, GrantRecord, NewChannel, NewGrant, NewGroup, NewSpace,
    PlaceStore, SpaceLevels, SpaceRecord, APP_NOT_INSTALLED,
};
pub use postgres::PgStore;
pub use presence::{CallbackPresence, PresenceStore, Renewal};
pub use signing_keys::{SigningKeyRecord, SigningKeyStore};
pub use sql::count_statements;
pub use sqlite::SqliteStore;
pub use tasks::{NewTask, TaskRecord, TaskStore};
pub use webhook_deliveries::{Attempt, Claimed, Next, Recorded, WebhookDeliveryStore};
pub use webhook_subscriptions::{NewSubscription, SubscriptionRecord, WebhookStore};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found")]
    NotFound,
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("the idempotency key was used already")]
    IdempotencyTaken,
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

pub type StoreResult<T> = Result<T, StoreError>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The database itself: which one, its schema, its liveness and identity.
#[async_trait]
pub trait BaseStore: Send + Sync + 'static {
    fn backend(&self) -> Backend;

    /// Where the group committers publish their events, in commit order
    /// (see [`CommitFeed`]); the hub's event bus listens to it.
    fn commit_feed(&self) -> &CommitFeed;

    /// Applies pending migrations.
    async fn migrate(&self) -> StoreResult<()>;

    /// Cheap round trip for readiness.
    async fn ping(&self) -> StoreResult<()>;

    /// An id chosen when this database was first migrated. It changes only if
    /// the database is replaced, which is what invalidates event cursors.
    async fn sync_epoch(&self) -> StoreResult<String>;
}

/// Every area of the store, as the hub holds it.
pub trait Store:
    BaseStore
    + IdentityStore
    + EventStore
    + ConversationStore
    + TaskStore
    + JobStore
    + CardStore
    + SigningKeyStore
    + PlaceStore
    + AuditStore
    + InstallationStore
    + CommandStore
    + ComponentStore
    + InteractionStore
    + HostedStore
    + OverviewStore
    + AppUrlStore
    + WebhookStore
    + WebhookDeliveryStore
    + PresenceStore
    + ConsoleSessionStore
{
}

impl<T> Store for T where
    T: BaseStore
        + IdentityStore
        + EventStore
        + ConversationStore
        + TaskStore
        + JobStore
        + CardStore
        + SigningKeyStore
        + PlaceStore
        + AuditStore
        + InstallationStore
        + CommandStore
        + ComponentStore
        + InteractionStore
        + HostedStore
        + OverviewStore
        + AppUrlStore
        + WebhookStore
        + WebhookDeliveryStore
        + PresenceStore
        + ConsoleSessionStore
{
}

pub type DynStore = Arc<dyn Store>;

/// What differs per dialect for [`BaseStore`].
#[async_trait]
pub trait BaseDialect {
    const BACKEND: Backend;

    fn commit_feed(&self) -> &CommitFeed;

    /// Runs the backend's own migrations (`migrations/sqlite`,
    /// `migrations/postgres`).
    async fn run_migrations(&self) -> StoreResult<()>;
}

#[async_trait]
impl<D: sql::Database + BaseDialect> BaseStore for D {
    fn backend(&self) -> Backend {
        D::BACKEND
    }

    fn commit_feed(&self) -> &CommitFeed {
        BaseDialect::commit_feed(self)
    }

    async fn migrate(&self) -> StoreResult<()> {
        self.run_migrations().await?;
        let epoch = uuid::Uuid::new_v4().to_string();
        self.write()
            .await?
            .execute(
                "INSERT INTO hub_meta (name, value) VALUES ('sync_epoch', $1) ON CONFLICT (name) DO NOTHING",
                &[sql::Arg::Text(&epoch)],
            )
            .await?;
        Ok(())
    }

    async fn ping(&self) -> StoreResult<()> {
        self.read().await?.execute("SELECT 1", &[]).await?;
        Ok(())
    }

    async fn sync_epoch(&self) -> StoreResult<String> {
        self.read()
            .await?
            .fetch_optional("SELECT value FROM hub_meta WHERE name = 'sync_epoch'", &[])
            .await?
            .ok_or_else(|| StoreError::Corrupt("sync_epoch missing; run migrations".into()))?
            .text("value")
    }
}

/// Opens the database the configuration names (creating a SQLite file and its
/// directory on first start) and migrates it when configured to.
pub async fn open(config: &Config) -> anyhow::Result<DynStore> {
    let store = open_unmigrated(config).await?;
    if config.storage.migrate_on_start {
        store.migrate().await?;
    }
    Ok(store)
}

/// Opens the database the configuration names without migrating it (a
/// SQLite file that is not there is still created: callers that must not
/// create one check first, as the operator commands do).
pub async fn open_unmigrated(config: &Config) -> anyhow::Result<DynStore> {
    let url = config.database_url();
    let store: DynStore = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Arc::new(
            PgStore::connect(
                &url,
                config.storage.max_connections,
                std::time::Duration::from_millis(config.storage.postgres_ping_idle_after_ms),
            )
            .await?,
        )
    } else if url.starts_with("sqlite:") {
        Arc::new(
            SqliteStore::open(
                &url,
                config.storage.max_connections,
                config.storage.sqlite_busy_timeout_ms,
                config.storage.sqlite_synchronous,
            )
            .await?,
        )
    } else {
        anyhow::bail!("storage.database_url must start with sqlite:, postgres:// or postgresql://");
    };
    Ok(store)
}
