//! The console's sessions (ADR 0036): rows of digests and times, shared by
//! every node on the database, so a login through one node behind a load
//! balancer works on all and a logout on one ends it everywhere. The
//! rules (idle and absolute lifetimes, what counts as a use) are
//! `http::console::session`'s; this area only keeps the rows and the
//! capacity, which must hold across nodes and so is enforced here, in the
//! login's transaction.

use async_trait::async_trait;

use super::sql::{Arg, Database};
use super::{Backend, BaseDialect, StoreResult};
use crate::domain::Millis;

/// A session as stored: never its id or CSRF token, only their digests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsoleSessionRecord {
    pub csrf_digest: Vec<u8>,
    pub created_at: Millis,
    pub last_used_at: Millis,
}

/// What a login's transaction prunes by: sessions created at or before
/// `created_before`, or last used at or before `used_before`, have ended;
/// and at most `capacity` sessions remain with the new one.
#[derive(Clone, Copy, Debug)]
pub struct SessionPrune {
    pub created_before: Millis,
    pub used_before: Millis,
    pub capacity: usize,
}

#[async_trait]
pub trait ConsoleSessionStore: Send + Sync + 'static {
    /// Stores a new session, in one transaction that first deletes the
    /// sessions that have ended and then, while `capacity` or more are
    /// left, the oldest (by creation). Logins are serialized (a table lock
    /// on PostgreSQL, the one writer on SQLite), so logins on several nodes
    /// at once never leave more than `capacity`.
    async fn create_console_session(
        &self,
        id_digest: &[u8],
        csrf_digest: &[u8],
        now: Millis,
        prune: SessionPrune,
    ) -> StoreResult<()>;

    /// The session with this id digest, ended or not.
    async fn console_session(&self, id_digest: &[u8]) -> StoreResult<Option<ConsoleSessionRecord>>;

    /// Counts a use at `now`; the last use only moves forward (two nodes'
    /// uses racing keep the later).
    async fn touch_console_session(&self, id_digest: &[u8], now: Millis) -> StoreResult<()>;

    /// Ends a session (a logout, or one found ended).
    async fn end_console_session(&self, id_digest: &[u8]) -> StoreResult<()>;
}

#[async_trait]
impl<D: Database + BaseDialect> ConsoleSessionStore for D {
    async fn create_console_session(
        &self,
        id_digest: &[u8],
        csrf_digest: &[u8],
        now: Millis,
        prune: SessionPrune,
    ) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        if D::BACKEND == Backend::Postgres {
            // Reads go on (a check is a SELECT); another login waits.
            tx.execute("LOCK TABLE console_sessions IN EXCLUSIVE MODE", &[])
                .await?;
        }
        tx.execute(
            "DELETE FROM console_sessions WHERE created_at <= $1 OR last_used_at <= $2",
            &[Arg::Int(prune.created_before), Arg::Int(prune.used_before)],
        )
        .await?;
        let left = tx
            .fetch_optional("SELECT COUNT(*) AS n FROM console_sessions", &[])
            .await?
            .map(|r| r.int("n"))
            .transpose()?
            .unwrap_or(0);
        let over = left + 1 - prune.capacity as i64;
        if over > 0 {
            tx.execute(
                "DELETE FROM console_sessions WHERE id_digest IN \
                 (SELECT id_digest FROM console_sessions ORDER BY created_at, id_digest LIMIT $1)",
                &[Arg::Int(over)],
            )
            .await?;
        }
        tx.execute(
            "INSERT INTO console_sessions (id_digest, csrf_digest, created_at, last_used_at) \
             VALUES ($1, $2, $3, $3)",
            &[
                Arg::Bytes(id_digest),
                Arg::Bytes(csrf_digest),
                Arg::Int(now),
            ],
        )
        .await?;
        tx.commit().await
    }

    async fn console_session(&self, id_digest: &[u8]) -> StoreResult<Option<ConsoleSessionRecord>> {
        let row = self
            .read()
            .await?
            .fetch_optional(
                "SELECT csrf_digest, created_at, last_used_at FROM console_sessions WHERE id_digest = $1",
                &[Arg::Bytes(id_digest)],
            )
            .await?;
        row.map(|r| {
            Ok(ConsoleSessionRecord {
                csrf_digest: r.bytes("csrf_digest")?,
                created_at: r.int("created_at")?,
                last_used_at: r.int("last_used_at")?,
            })
        })
        .transpose()
    }

    async fn touch_console_session(&self, id_digest: &[u8], now: Millis) -> StoreResult<()> {
        self.write()
            .await?
            .execute(
                "UPDATE console_sessions SET last_used_at = $2 WHERE id_digest = $1 AND last_used_at < $2",
                &[Arg::Bytes(id_digest), Arg::Int(now)],
            )
            .await?;
        Ok(())
    }

    async fn end_console_session(&self, id_digest: &[u8]) -> StoreResult<()> {
        self.write()
            .await?
            .execute(
                "DELETE FROM console_sessions WHERE id_digest = $1",
                &[Arg::Bytes(id_digest)],
            )
            .await?;
        Ok(())
    }
}
