//! How PostgreSQL serializes the writers the shared queries leave to the
//! dialect: row locks where a row exists to lock, table locks for the rare
//! catalogue and signing-key writes, `SKIP LOCKED` between job claimers.

use async_trait::async_trait;
use uuid::Uuid;

use super::PgStore;
use crate::store::cards::CardDialect;
use crate::store::identity::IdentityDialect;
use crate::store::installations::{InstallationDialect, INSTALLATION_COLUMNS};
use crate::store::jobs::JobDialect;
use crate::store::signing_keys::SigningKeyDialect;
use crate::store::sql::{Arg, Executor};
use crate::store::StoreResult;

#[async_trait]
impl IdentityDialect for PgStore {
    /// The principal row, so two rotations cannot both leave a key active.
    async fn lock_principal(ex: &mut dyn Executor, id: Uuid) -> StoreResult<bool> {
        let row = ex
            .fetch_optional(
                "SELECT 1 FROM principals WHERE id = $1 FOR UPDATE",
                &[Arg::Id(id)],
            )
            .await?;
        Ok(row.is_some())
    }
}

#[async_trait]
impl CardDialect for PgStore {
    /// Installs are rare: the whole catalogue.
    async fn lock_cards(ex: &mut dyn Executor, _id: &str) -> StoreResult<()> {
        ex.execute("LOCK TABLE cards IN SHARE ROW EXCLUSIVE MODE", &[])
            .await?;
        Ok(())
    }
}

#[async_trait]
impl SigningKeyDialect for PgStore {
    /// Rotations are rare: the whole table.
    async fn lock_signing_keys(ex: &mut dyn Executor) -> StoreResult<()> {
        ex.execute("LOCK TABLE webhook_signing_keys IN EXCLUSIVE MODE", &[])
            .await?;
        Ok(())
    }
}

impl JobDialect for PgStore {
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
}

impl InstallationDialect for PgStore {
    /// The row itself, until commit: set scopes, upgrade and the lifecycle
    /// CAS queue on it.
    fn locking_read(condition: &str) -> String {
        format!("SELECT {INSTALLATION_COLUMNS} FROM installations WHERE {condition} FOR UPDATE")
    }

    fn sharing_read(condition: &str) -> String {
        format!("SELECT {INSTALLATION_COLUMNS} FROM installations WHERE {condition} FOR SHARE")
    }
}
