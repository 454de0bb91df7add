//! PostgreSQL: selected by a `postgres://` database URL. Ids are native
//! `uuid`, manifests `jsonb`, times Unix millis in `bigint`.

use async_trait::async_trait;
use sqlx::postgres::{PgPool, PgPoolOptions, PgRow};
use sqlx::Row;
use uuid::Uuid;

use super::{
    AppRecord, Backend, KeyRecord, NewKey, NewPrincipal, PrincipalRecord, Store, StoreError,
    StoreResult,
};
use crate::domain::manifest::Manifest;
use crate::domain::{Millis, PrincipalKind};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    pub async fn connect(url: &str, max_connections: u32) -> StoreResult<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .connect(url)
            .await?;
        Ok(PgStore { pool })
    }
}

fn kind(s: &str) -> StoreResult<PrincipalKind> {
    PrincipalKind::parse(s).ok_or_else(|| StoreError::Corrupt(format!("bad principal kind {s:?}")))
}

fn principal_row(row: &PgRow) -> StoreResult<PrincipalRecord> {
    Ok(PrincipalRecord {
        id: row.try_get("id")?,
        kind: kind(row.try_get("kind")?)?,
        name: row.try_get("name")?,
        description: row.try_get("description")?,
        created_at: row.try_get("created_at")?,
    })
}

async fn insert_principal(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    p: &NewPrincipal,
    key: &NewKey,
) -> StoreResult<()> {
    sqlx::query("INSERT INTO principals (id, kind, name, description, created_at) VALUES ($1, $2, $3, $4, $5)")
        .bind(p.id)
        .bind(p.kind.as_str())
        .bind(&p.name)
        .bind(&p.description)
        .bind(p.created_at)
        .execute(&mut **tx)
        .await?;
    insert_key(tx, p.id, key, p.created_at).await
}

async fn insert_key(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    principal_id: Uuid,
    key: &NewKey,
    now: Millis,
) -> StoreResult<()> {
    sqlx::query("INSERT INTO principal_keys (key_id, principal_id, secret_hash, created_at) VALUES ($1, $2, $3, $4)")
        .bind(&key.key_id)
        .bind(principal_id)
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
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    principal_id: Uuid,
    now: Millis,
) -> StoreResult<Vec<String>> {
    let rows = sqlx::query(
        "UPDATE principal_keys SET revoked_at = $1 WHERE principal_id = $2 AND revoked_at IS NULL RETURNING key_id",
    )
    .bind(now)
    .bind(principal_id)
    .fetch_all(&mut **tx)
    .await?;
    rows.iter().map(|r| Ok(r.try_get("key_id")?)).collect()
}

#[async_trait]
impl Store for PgStore {
    fn backend(&self) -> Backend {
        Backend::Postgres
    }

    async fn migrate(&self) -> StoreResult<()> {
        MIGRATOR.run(&self.pool).await?;
        sqlx::query("INSERT INTO hub_meta (name, value) VALUES ('sync_epoch', $1) ON CONFLICT (name) DO NOTHING")
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
        sqlx::query("INSERT INTO apps (app_id, manifest, updated_at) VALUES ($1, $2::jsonb, $3)")
            .bind(app.id)
            .bind(manifest)
            .bind(app.created_at)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn principal(&self, id: Uuid) -> StoreResult<Option<PrincipalRecord>> {
        sqlx::query("SELECT id, kind, name, description, created_at FROM principals WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .map(|r| principal_row(&r))
            .transpose()
    }

    async fn app(&self, id: Uuid) -> StoreResult<Option<AppRecord>> {
        let row = sqlx::query(
            "SELECT p.id, p.kind, p.name, p.description, p.created_at, a.manifest::text AS manifest \
             FROM principals p JOIN apps a ON a.app_id = p.id WHERE p.id = $1",
        )
        .bind(id)
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
             FROM principal_keys k JOIN principals p ON p.id = k.principal_id WHERE k.key_id = $1",
        )
        .bind(key_id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(KeyRecord {
            key_id: row.try_get("key_id")?,
            principal_id: row.try_get("principal_id")?,
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
        // Lock the principal row so two rotations cannot both leave a key active.
        let exists = sqlx::query("SELECT 1 FROM principals WHERE id = $1 FOR UPDATE")
            .bind(principal_id)
            .fetch_optional(&mut *tx)
            .await?;
        if exists.is_none() {
            return Err(StoreError::NotFound);
        }
        let revoked = revoke_active(&mut tx, principal_id, now).await?;
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
