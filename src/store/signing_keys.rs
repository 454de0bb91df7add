//! The webhook signing keys and their rotation.

use async_trait::async_trait;

use super::sql::{Arg, Database, Executor};
use super::StoreResult;
use crate::domain::Millis;

/// A webhook signing key as stored: the secret only sealed.
#[derive(Clone, Debug, PartialEq)]
pub struct SigningKeyRecord {
    pub key_id: String,
    /// `whpk_...`
    pub public_key: String,
    pub sealed_secret: Vec<u8>,
    /// `active`, `secondary` (still signing until `retires_at`) or `retired`.
    pub state: String,
    pub created_at: Millis,
    pub retires_at: Option<Millis>,
}

#[async_trait]
pub trait SigningKeyStore: Send + Sync + 'static {
    /// Makes `new` the active signing key: the active one becomes secondary
    /// until `overlap_until`, secondaries past their time retire.
    async fn rotate_signing_key(
        &self,
        new: &SigningKeyRecord,
        now: Millis,
        overlap_until: Millis,
    ) -> StoreResult<()>;

    /// Every signing key, newest first.
    async fn signing_keys(&self) -> StoreResult<Vec<SigningKeyRecord>>;
}

/// What differs per dialect in this area.
#[async_trait]
pub trait SigningKeyDialect {
    /// Serializes rotations until commit, so two cannot both demote the same
    /// key and leave two active ones.
    async fn lock_signing_keys(ex: &mut dyn Executor) -> StoreResult<()>;
}

#[async_trait]
impl<D: Database + SigningKeyDialect> SigningKeyStore for D {
    async fn rotate_signing_key(
        &self,
        new: &SigningKeyRecord,
        now: Millis,
        overlap_until: Millis,
    ) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        D::lock_signing_keys(&mut *tx).await?;
        tx.execute(
            "UPDATE webhook_signing_keys SET state = 'retired' WHERE state = 'secondary' AND retires_at <= $1",
            &[Arg::Int(now)],
        )
        .await?;
        tx.execute(
            "UPDATE webhook_signing_keys SET state = 'secondary', retires_at = $1 WHERE state = 'active'",
            &[Arg::Int(overlap_until)],
        )
        .await?;
        tx.execute(
            "INSERT INTO webhook_signing_keys (key_id, public_key, sealed_secret, state, created_at) \
             VALUES ($1, $2, $3, 'active', $4)",
            &[
                Arg::Text(&new.key_id),
                Arg::Text(&new.public_key),
                Arg::Bytes(&new.sealed_secret),
                Arg::Int(new.created_at),
            ],
        )
        .await?;
        tx.commit().await
    }

    async fn signing_keys(&self) -> StoreResult<Vec<SigningKeyRecord>> {
        let rows = self
            .read()
            .await?
            .fetch_all(
                "SELECT key_id, public_key, sealed_secret, state, created_at, retires_at FROM webhook_signing_keys \
                 ORDER BY created_at DESC, key_id",
                &[],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(SigningKeyRecord {
                    key_id: r.text("key_id")?,
                    public_key: r.text("public_key")?,
                    sealed_secret: r.bytes("sealed_secret")?,
                    state: r.text("state")?,
                    created_at: r.int("created_at")?,
                    retires_at: r.opt_int("retires_at")?,
                })
            })
            .collect()
    }
}
