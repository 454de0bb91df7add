//! Durable state behind one trait, with a SQLite implementation (the embedded
//! default) and a PostgreSQL one. Each backend has its own SQL and its own
//! migrations: the dialects differ, and hiding that behind `AnyPool` would
//! lose types (see docs/adr/0003-storage.md). The contract test suite runs the
//! same cases against both.

mod postgres;
mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;
use uuid::Uuid;

use crate::config::Config;
use crate::domain::manifest::Manifest;
use crate::domain::{Millis, PrincipalKind};

pub use postgres::PgStore;
pub use sqlite::SqliteStore;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found")]
    NotFound,
    #[error("conflict: {0}")]
    Conflict(String),
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

#[derive(Clone, Debug, PartialEq)]
pub struct PrincipalRecord {
    pub id: Uuid,
    pub kind: PrincipalKind,
    pub name: String,
    pub description: Option<String>,
    pub created_at: Millis,
}

#[derive(Clone, Debug, PartialEq)]
pub struct AppRecord {
    pub principal: PrincipalRecord,
    pub manifest: Manifest,
}

/// A key as stored: never the secret, only its digest.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyRecord {
    pub key_id: String,
    pub principal_id: Uuid,
    pub kind: PrincipalKind,
    pub secret_hash: Vec<u8>,
    pub created_at: Millis,
    pub revoked_at: Option<Millis>,
}

/// A new key to store.
#[derive(Clone, Debug)]
pub struct NewKey {
    pub key_id: String,
    pub secret_hash: [u8; 32],
}

#[derive(Clone, Debug)]
pub struct NewPrincipal {
    pub id: Uuid,
    pub kind: PrincipalKind,
    pub name: String,
    pub description: Option<String>,
    pub created_at: Millis,
}

#[async_trait]
pub trait Store: Send + Sync + 'static {
    fn backend(&self) -> Backend;

    /// Applies pending migrations.
    async fn migrate(&self) -> StoreResult<()>;

    /// Cheap round trip for readiness.
    async fn ping(&self) -> StoreResult<()>;

    /// An id chosen when this database was first migrated. It changes only if
    /// the database is replaced, which is what invalidates event cursors.
    async fn sync_epoch(&self) -> StoreResult<String>;

    /// Stores an agent and its first key in one transaction.
    async fn create_agent(&self, agent: &NewPrincipal, key: &NewKey) -> StoreResult<()>;

    /// Stores an app, its manifest and its first key in one transaction.
    async fn create_app(
        &self,
        app: &NewPrincipal,
        manifest: &Manifest,
        key: &NewKey,
    ) -> StoreResult<()>;

    async fn principal(&self, id: Uuid) -> StoreResult<Option<PrincipalRecord>>;

    async fn app(&self, id: Uuid) -> StoreResult<Option<AppRecord>>;

    async fn key(&self, key_id: &str) -> StoreResult<Option<KeyRecord>>;

    /// Revokes every active key of the principal and stores `new` in one
    /// transaction. Returns the revoked key ids.
    async fn rotate_keys(
        &self,
        principal_id: Uuid,
        new: &NewKey,
        now: Millis,
    ) -> StoreResult<Vec<String>>;

    /// Revokes every active key of the principal. Returns the revoked key ids.
    async fn revoke_keys(&self, principal_id: Uuid, now: Millis) -> StoreResult<Vec<String>>;
}

pub type DynStore = Arc<dyn Store>;

/// Opens the database the configuration names (creating a SQLite file and its
/// directory on first start) and migrates it when configured to.
pub async fn open(config: &Config) -> anyhow::Result<DynStore> {
    let url = config.database_url();
    let store: DynStore = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Arc::new(PgStore::connect(&url, config.storage.max_connections).await?)
    } else if url.starts_with("sqlite:") {
        Arc::new(
            SqliteStore::open(
                &url,
                config.storage.max_connections,
                config.storage.sqlite_busy_timeout_ms,
            )
            .await?,
        )
    } else {
        anyhow::bail!("storage.database_url must start with sqlite:, postgres:// or postgresql://");
    };
    if config.storage.migrate_on_start {
        store.migrate().await?;
    }
    Ok(store)
}
