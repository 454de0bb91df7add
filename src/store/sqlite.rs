//! SQLite: the embedded default. WAL with `synchronous = FULL`, so a write the
//! hub acknowledged survives a crash of the process or the machine. Ids are
//! stored as text (readable with the sqlite3 shell); times as Unix millis.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, SqlitePool};
use uuid::Uuid;

use super::{
    AppRecord, Backend, KeyRecord, NewKey, NewPrincipal, PrincipalRecord, Store, StoreError,
    StoreResult,
};
use crate::domain::manifest::Manifest;
use crate::domain::{Millis, PrincipalKind};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    pub async fn open(url: &str, max_connections: u32, busy_timeout_ms: u64) -> StoreResult<Self> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(Duration::from_millis(busy_timeout_ms));
        if let Some(parent) = Path::new(options.get_filename()).parent() {
            if !parent.as_os_str().is_empty() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| StoreError::Database(sqlx::Error::Io(e)))?;
            }
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(max_connections)
            .connect_with(options)
            .await?;
        Ok(SqliteStore { pool })
    }
}

fn uuid(s: &str) -> StoreResult<Uuid> {
    Uuid::parse_str(s).map_err(|_| StoreError::Corrupt(format!("bad uuid {s:?}")))
}

fn kind(s: &str) -> StoreResult<PrincipalKind> {
    PrincipalKind::parse(s).ok_or_else(|| StoreError::Corrupt(format!("bad principal kind {s:?}")))
}

fn principal_row(row: &sqlx::sqlite::SqliteRow) -> StoreResult<PrincipalRecord> {
    Ok(PrincipalRecord {
        id: uuid(row.try_get("id")?)?,
        kind: kind(row.try_get("kind")?)?,
        name: row.try_get("name")?,
        description: row.try_get("description")?,
        created_at: row.try_get("created_at")?,
    })
}

async fn insert_principal(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    p: &NewPrincipal,
    key: &NewKey,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO principals (id, kind, name, description, created_at) VALUES (?, ?, ?, ?, ?)",
    )
    .bind(p.id.to_string())
    .bind(p.kind.as_str())
    .bind(&p.name)
    .bind(&p.description)
    .bind(p.created_at)
    .execute(&mut **tx)
    .await?;
    insert_key(tx, p.id, key, p.created_at).await
}

async fn insert_key(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    principal_id: Uuid,
    key: &NewKey,
    now: Millis,
) -> StoreResult<()> {
    sqlx::query("INSERT INTO principal_keys (key_id, principal_id, secret_hash, created_at) VALUES (?, ?, ?, ?)")
        .bind(&key.key_id)
        .bind(principal_id.to_string())
        .bind(&key.secret_hash[..])
        .bind(now)
        .execute(&mut **tx)
        .await
        .map_err(|e| match e {
            sqlx::Error::Database(db) if db.is_unique_violation() => {
                StoreError::Conflict("key id already exists".into())
            }
            other => StoreError::Database(other),
        })?;
    Ok(())
}

async fn revoke_active(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    principal_id: Uuid,
    now: Millis,
) -> StoreResult<Vec<String>> {
    let rows = sqlx::query(
        "UPDATE principal_keys SET revoked_at = ? WHERE principal_id = ? AND revoked_at IS NULL RETURNING key_id",
    )
    .bind(now)
    .bind(principal_id.to_string())
    .fetch_all(&mut **tx)
    .await?;
    rows.iter().map(|r| Ok(r.try_get("key_id")?)).collect()
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> Backend {
        Backend::Sqlite
    }

    async fn migrate(&self) -> StoreResult<()> {
        MIGRATOR.run(&self.pool).await?;
        sqlx::query("INSERT INTO hub_meta (name, value) VALUES ('sync_epoch', ?) ON CONFLICT (name) DO NOTHING")
            .bind(Uuid::new_v4().to_string())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn sync_epoch(&self) -> StoreResult<String> {
        let row = sqlx::query("SELECT value FROM hub_meta WHERE name = 'sync_epoch'")
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::Corrupt("sync_epoch missing; run migrations".into()))?;
        Ok(row.try_get("value")?)
    }

    async fn create_agent(&self, agent: &NewPrincipal, key: &NewKey) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        insert_principal(&mut tx, agent, key).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn create_app(
        &self,
        app: &NewPrincipal,
        manifest: &Manifest,
        key: &NewKey,
    ) -> StoreResult<()> {
        let manifest =
            serde_json::to_string(manifest).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let mut tx = self.pool.begin().await?;
        insert_principal(&mut tx, app, key).await?;
        sqlx::query("INSERT INTO apps (app_id, manifest, updated_at) VALUES (?, ?, ?)")
            .bind(app.id.to_string())
            .bind(manifest)
            .bind(app.created_at)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn principal(&self, id: Uuid) -> StoreResult<Option<PrincipalRecord>> {
        sqlx::query("SELECT id, kind, name, description, created_at FROM principals WHERE id = ?")
            .bind(id.to_string())
            .fetch_optional(&self.pool)
            .await?
            .map(|r| principal_row(&r))
            .transpose()
    }

    async fn app(&self, id: Uuid) -> StoreResult<Option<AppRecord>> {
        let row = sqlx::query(
            "SELECT p.id, p.kind, p.name, p.description, p.created_at, a.manifest \
             FROM principals p JOIN apps a ON a.app_id = p.id WHERE p.id = ?",
        )
        .bind(id.to_string())
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let manifest: String = row.try_get("manifest")?;
        Ok(Some(AppRecord {
            principal: principal_row(&row)?,
            manifest: serde_json::from_str(&manifest)
                .map_err(|e| StoreError::Corrupt(e.to_string()))?,
        }))
    }

    async fn key(&self, key_id: &str) -> StoreResult<Option<KeyRecord>> {
        let row = sqlx::query(
            "SELECT k.key_id, k.principal_id, p.kind, k.secret_hash, k.created_at, k.revoked_at \
             FROM principal_keys k JOIN principals p ON p.id = k.principal_id WHERE k.key_id = ?",
        )
        .bind(key_id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(KeyRecord {
            key_id: row.try_get("key_id")?,
            principal_id: uuid(row.try_get("principal_id")?)?,
            kind: kind(row.try_get("kind")?)?,
            secret_hash: row.try_get("secret_hash")?,
            created_at: row.try_get("created_at")?,
            revoked_at: row.try_get("revoked_at")?,
        }))
    }

    async fn rotate_keys(
        &self,
        principal_id: Uuid,
        new: &NewKey,
        now: Millis,
    ) -> StoreResult<Vec<String>> {
        let mut tx = self.pool.begin().await?;
        // Write first: the UPDATE takes SQLite's write lock, so a concurrent
        // rotation waits (busy timeout) instead of failing to upgrade a read.
        let revoked = revoke_active(&mut tx, principal_id, now).await?;
        let exists = sqlx::query("SELECT 1 FROM principals WHERE id = ?")
            .bind(principal_id.to_string())
            .fetch_optional(&mut *tx)
            .await?;
        if exists.is_none() {
            return Err(StoreError::NotFound);
        }
        insert_key(&mut tx, principal_id, new, now).await?;
        tx.commit().await?;
        Ok(revoked)
    }

    async fn revoke_keys(&self, principal_id: Uuid, now: Millis) -> StoreResult<Vec<String>> {
        let mut tx = self.pool.begin().await?;
        let revoked = revoke_active(&mut tx, principal_id, now).await?;
        tx.commit().await?;
        Ok(revoked)
    }
}
