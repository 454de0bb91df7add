//! How SQLite serializes the writers the shared queries leave to the
//! dialect. The in-process writer lock orders this hub's writers already;
//! writing first takes SQLite's own write lock at once, so a writer in
//! another process (the operator CLI) waits on the busy timeout instead of
//! failing to upgrade a read.

use async_trait::async_trait;
use uuid::Uuid;

use super::SqliteStore;
use crate::store::cards::CardDialect;
use crate::store::identity::IdentityDialect;
use crate::store::installations::{InstallationDialect, INSTALLATION_COLUMNS};
use crate::store::jobs::JobDialect;
use crate::store::signing_keys::SigningKeyDialect;
use crate::store::sql::{Arg, Executor};
use crate::store::StoreResult;

#[async_trait]
impl IdentityDialect for SqliteStore {
    async fn lock_principal(ex: &mut dyn Executor, id: Uuid) -> StoreResult<bool> {
        let changed = ex
            .execute(
                "UPDATE principals SET name = name WHERE id = $1",
                &[Arg::Id(id)],
            )
            .await?;
        Ok(changed > 0)
    }
}

#[async_trait]
impl CardDialect for SqliteStore {
    async fn lock_cards(ex: &mut dyn Executor, id: &str) -> StoreResult<()> {
        ex.execute(
            "UPDATE cards SET installed_at = installed_at WHERE id = $1",
            &[Arg::Text(id)],
        )
        .await?;
        Ok(())
    }
}

#[async_trait]
impl SigningKeyDialect for SqliteStore {
    /// The rotation's first statement is a write: nothing to add.
    async fn lock_signing_keys(_ex: &mut dyn Executor) -> StoreResult<()> {
        Ok(())
    }
}

impl JobDialect for SqliteStore {
    const SKIP_LOCKED: &'static str = "";
}

impl InstallationDialect for SqliteStore {
    /// A no-op write as the first statement: the write lock at once (what
    /// `BEGIN IMMEDIATE` would take), so the row read is the one this
    /// transaction writes, whichever process writes next.
    fn locking_read(condition: &str) -> String {
        format!(
            "UPDATE installations SET updated_at = updated_at WHERE {condition} \
             RETURNING {INSTALLATION_COLUMNS}"
        )
    }
}
