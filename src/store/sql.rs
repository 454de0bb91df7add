//! The narrow executor the shared queries run on (ADR 0014).
//!
//! Most queries read the same in both dialects, so they are written once, in
//! the area modules, against [`Executor`]. Placeholders are `$1, $2, ...`
//! everywhere (sqlx's SQLite driver maps `$N` to argument N). What differs
//! is how a value is stored: SQLite keeps ids as hyphenated text and JSON as
//! text, PostgreSQL has native `uuid` and `jsonb`. So arguments are our own
//! [`Arg`], which each backend binds its own way, and rows our own [`Row`],
//! which each backend reads its own way. The multi-row writes of the send
//! path (events, recipients) stay per dialect behind the same trait.

use std::ops::{Deref, DerefMut};

use async_trait::async_trait;
use tokio::sync::OwnedMutexGuard;
use uuid::Uuid;

use super::{StoreError, StoreResult};
use crate::domain::event::{NewEvent, StoredEvent};
use crate::domain::Millis;

/// One bound value, named by what it is rather than how it is stored.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    Id(Uuid),
    OptId(Option<Uuid>),
    Text(&'a str),
    OptText(Option<&'a str>),
    Int(i64),
    OptInt(Option<i64>),
    Bool(bool),
    /// Serialized JSON, for a JSON column (text on SQLite, jsonb on PostgreSQL).
    Json(&'a str),
    Bytes(&'a [u8]),
}

/// A row of either backend.
pub enum Row {
    Sqlite(sqlx::sqlite::SqliteRow),
    Postgres(sqlx::postgres::PgRow),
    /// Read on SQLite's writer thread (ADR 0022).
    SqliteWriter(super::sqlite::WriterRow),
}

/// Typed column reads, one implementation per backend row type.
pub trait Columns {
    fn id(&self, col: &str) -> StoreResult<Uuid>;
    fn opt_id(&self, col: &str) -> StoreResult<Option<Uuid>>;
    fn text(&self, col: &str) -> StoreResult<String>;
    fn opt_text(&self, col: &str) -> StoreResult<Option<String>>;
    fn int(&self, col: &str) -> StoreResult<i64>;
    fn opt_int(&self, col: &str) -> StoreResult<Option<i64>>;
    /// A JSON column as its text.
    fn json(&self, col: &str) -> StoreResult<String>;
    fn bytes(&self, col: &str) -> StoreResult<Vec<u8>>;
}

impl Row {
    fn columns(&self) -> &dyn Columns {
        match self {
            Row::Sqlite(r) => r,
            Row::Postgres(r) => r,
            Row::SqliteWriter(r) => r,
        }
    }

    pub fn id(&self, col: &str) -> StoreResult<Uuid> {
        self.columns().id(col)
    }

    pub fn opt_id(&self, col: &str) -> StoreResult<Option<Uuid>> {
        self.columns().opt_id(col)
    }

    pub fn text(&self, col: &str) -> StoreResult<String> {
        self.columns().text(col)
    }

    pub fn opt_text(&self, col: &str) -> StoreResult<Option<String>> {
        self.columns().opt_text(col)
    }

    pub fn int(&self, col: &str) -> StoreResult<i64> {
        self.columns().int(col)
    }

    pub fn opt_int(&self, col: &str) -> StoreResult<Option<i64>> {
        self.columns().opt_int(col)
    }

    pub fn json(&self, col: &str) -> StoreResult<String> {
        self.columns().json(col)
    }

    pub fn bytes(&self, col: &str) -> StoreResult<Vec<u8>> {
        self.columns().bytes(col)
    }

    /// A JSON column decoded into `T`; a bad document is `Corrupt`.
    pub fn decoded<T: serde::de::DeserializeOwned>(&self, col: &str) -> StoreResult<T> {
        serde_json::from_str(&self.json(col)?).map_err(json_err)
    }
}

/// What the shared queries run on: a connection or an open transaction of
/// either backend.
#[async_trait]
pub trait Executor: Send {
    /// Runs a statement; returns the rows it affected.
    async fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> StoreResult<u64>;
    async fn fetch_optional(&mut self, sql: &str, args: &[Arg<'_>]) -> StoreResult<Option<Row>>;
    async fn fetch_all(&mut self, sql: &str, args: &[Arg<'_>]) -> StoreResult<Vec<Row>>;
    /// Appends events to their audiences' logs, handing out seqs: the
    /// multi-row upserts of the send path, written per dialect.
    async fn append_events(
        &mut self,
        events: &[NewEvent],
        now: Millis,
    ) -> StoreResult<Vec<StoredEvent>>;
    /// Records a message's recipients, many rows a statement.
    async fn insert_recipients(&mut self, message_id: Uuid, recipients: &[Uuid])
        -> StoreResult<()>;
}

/// A backend connection or transaction, with SQLite's writer lock when it
/// writes. The connection is declared first so it is released before the
/// lock passes on. A transaction dropped unfinished only queues its rollback
/// on the driver's worker (sqlx cannot await in `Drop`); [`Tx`]'s own drop
/// therefore runs the rollback on a task that holds the session, and so the
/// lock, until the rollback is done.
pub struct Session<C> {
    conn: C,
    _writing: Option<OwnedMutexGuard<()>>,
}

impl<C> Session<C> {
    pub fn new(conn: C, writing: Option<OwnedMutexGuard<()>>) -> Session<C> {
        Session {
            conn,
            _writing: writing,
        }
    }
}

#[async_trait]
impl<C, X> Executor for Session<C>
where
    C: DerefMut<Target = X> + Send,
    X: Executor + ?Sized,
{
    async fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> StoreResult<u64> {
        note_statement();
        self.conn.execute(sql, args).await
    }

    async fn fetch_optional(&mut self, sql: &str, args: &[Arg<'_>]) -> StoreResult<Option<Row>> {
        note_statement();
        self.conn.fetch_optional(sql, args).await
    }

    async fn fetch_all(&mut self, sql: &str, args: &[Arg<'_>]) -> StoreResult<Vec<Row>> {
        note_statement();
        self.conn.fetch_all(sql, args).await
    }

    async fn append_events(
        &mut self,
        events: &[NewEvent],
        now: Millis,
    ) -> StoreResult<Vec<StoredEvent>> {
        self.conn.append_events(events, now).await
    }

    async fn insert_recipients(
        &mut self,
        message_id: Uuid,
        recipients: &[Uuid],
    ) -> StoreResult<()> {
        self.conn.insert_recipients(message_id, recipients).await
    }
}

/// An open write transaction of either backend. Dropped without
/// [`Tx::commit`] (an early `?` or answer), it rolls back before SQLite's
/// writer lock passes on: otherwise the next writer would begin while the
/// queued rollback still holds the file's lock, and get `database is
/// locked`.
pub struct Tx(Option<Box<dyn Transaction>>);

/// What [`Tx`] needs of a backend's transaction.
#[async_trait]
pub trait Transaction: Executor {
    /// Itself as a plain executor: the shared queries take `&mut dyn
    /// Executor`, and trait upcasting is newer than the crate's MSRV.
    fn executor(&mut self) -> &mut (dyn Executor + 'static);
    fn executor_ref(&self) -> &(dyn Executor + 'static);
    async fn commit(self: Box<Self>) -> StoreResult<()>;
    async fn rollback(self: Box<Self>) -> StoreResult<()>;
}

#[async_trait]
impl<DB> Transaction for Session<sqlx::Transaction<'static, DB>>
where
    DB: sqlx::Database,
    DB::Connection: Executor,
{
    fn executor(&mut self) -> &mut (dyn Executor + 'static) {
        self
    }

    fn executor_ref(&self) -> &(dyn Executor + 'static) {
        self
    }

    async fn commit(self: Box<Self>) -> StoreResult<()> {
        let Session { conn, _writing } = *self;
        conn.commit().await?;
        Ok(())
    }

    async fn rollback(self: Box<Self>) -> StoreResult<()> {
        let Session { conn, _writing } = *self;
        conn.rollback().await?;
        Ok(())
    }
}

impl Tx {
    pub fn new(t: impl Transaction + 'static) -> Tx {
        Tx(Some(Box::new(t)))
    }

    pub async fn commit(mut self) -> StoreResult<()> {
        self.open().commit().await
    }

    /// Rolls back now, before a lock held with the transaction passes on.
    pub async fn rollback(mut self) -> StoreResult<()> {
        self.open().rollback().await
    }

    /// The transaction, taken out so `Drop` finds nothing left to undo.
    fn open(&mut self) -> Box<dyn Transaction> {
        self.0
            .take()
            .expect("a Tx is open until commit or rollback")
    }
}

impl Drop for Tx {
    fn drop(&mut self) {
        let Some(open) = self.0.take() else { return };
        // Outside a runtime (its shutdown) the driver's queued rollback is
        // all there is, and no writer follows.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(e) = open.rollback().await {
                    tracing::warn!(error = %e, "rolling back a dropped transaction failed");
                }
            });
        }
    }
}

impl Deref for Tx {
    type Target = dyn Executor;
    fn deref(&self) -> &(dyn Executor + 'static) {
        self.0.as_ref().expect("a Tx is open").executor_ref()
    }
}

impl DerefMut for Tx {
    fn deref_mut(&mut self) -> &mut (dyn Executor + 'static) {
        self.0.as_mut().expect("a Tx is open").executor()
    }
}

/// How a backend hands out connections: the one place its locking differs.
#[async_trait]
pub trait Database: Send + Sync + 'static {
    /// A pooled connection for reads.
    async fn read(&self) -> StoreResult<Box<dyn Executor>>;
    /// A pooled connection for single-statement writes (on SQLite, under
    /// the in-process writer lock).
    async fn write(&self) -> StoreResult<Box<dyn Executor>>;
    /// A write transaction (on SQLite, under the in-process writer lock).
    async fn begin(&self) -> StoreResult<Tx>;
}

/// Keyset paging by id, spelled per dialect so SQLite keeps its index
/// range seek (an `OR` on the parameter would lose it).
pub trait Keyset {
    /// `column > $param`, or every row when `$param` is NULL.
    fn after(column: &str, param: usize) -> String;
}

pub fn json_err(e: serde_json::Error) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

pub fn to_json<T: serde::Serialize + ?Sized>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(json_err)
}

/// True for a unique-constraint violation, whichever backend raised it.
pub fn is_unique_violation(e: &StoreError) -> bool {
    matches!(e, StoreError::Database(sqlx::Error::Database(db)) if db.is_unique_violation())
}

/// A stored enum value; an unknown one is `Corrupt`, named by `what`.
pub fn parsed<T>(
    value: String,
    what: &str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> StoreResult<T> {
    parse(&value).ok_or_else(|| StoreError::Corrupt(format!("bad {what} {value:?}")))
}

/// Splits `rows` into parts whose lengths are powers of two, at most
/// `max` each, largest first. A multi-row statement then comes in a few
/// shapes (one per power of two up to `max`), each prepared once and kept
/// in the connection's cache: parts of any length made a fan-out's large
/// statements a new text, prepared anew, for every group.
pub fn shaped_chunks<T>(rows: &[T], max: usize) -> impl Iterator<Item = &[T]> {
    let cap = power_of_two_at_most(max.max(1));
    let mut rest = rows;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (part, tail) = rest.split_at(power_of_two_at_most(rest.len()).min(cap));
        rest = tail;
        Some(part)
    })
}

/// The largest power of two not above `n` (`n` > 0).
fn power_of_two_at_most(n: usize) -> usize {
    1 << (usize::BITS - 1 - n.leading_zeros())
}

/// `$first, $first+1, ...`: `n` numbered placeholders.
pub fn placeholders(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Implements [`Executor`] for a backend's connection type, from the
/// backend module's `query` (its way of binding an [`Arg`]), its [`Row`]
/// variant and its `events` module (the per-dialect bulk writes).
macro_rules! connection_executor {
    ($conn:ty, $row:path) => {
        #[async_trait::async_trait]
        impl Executor for $conn {
            async fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> StoreResult<u64> {
                Ok(query(sql, args).execute(&mut *self).await?.rows_affected())
            }

            async fn fetch_optional(
                &mut self,
                sql: &str,
                args: &[Arg<'_>],
            ) -> StoreResult<Option<Row>> {
                let row = query(sql, args).fetch_optional(&mut *self).await?;
                Ok(row.map($row))
            }

            async fn fetch_all(&mut self, sql: &str, args: &[Arg<'_>]) -> StoreResult<Vec<Row>> {
                let rows = query(sql, args).fetch_all(&mut *self).await?;
                Ok(rows.into_iter().map($row).collect())
            }

            async fn append_events(
                &mut self,
                events: &[NewEvent],
                now: Millis,
            ) -> StoreResult<Vec<StoredEvent>> {
                events::append_events(self, events, now).await
            }

            async fn insert_recipients(
                &mut self,
                message_id: Uuid,
                recipients: &[Uuid],
            ) -> StoreResult<()> {
                events::insert_recipients(self, message_id, recipients).await
            }
        }
    };
}
pub(super) use connection_executor;

tokio::task_local! {
    static STATEMENTS: std::cell::Cell<u64>;
}

fn note_statement() {
    note_statements(1);
}

/// Adds `n` statements run on this task's behalf elsewhere (the SQLite
/// writer thread runs a send's whole transaction and reports its count).
pub(super) fn note_statements(n: u64) {
    let _ = STATEMENTS.try_with(|c| c.set(c.get() + n));
}

/// Runs `work` and counts the SQL statements it ran on this task, and those
/// of a group write it led (on its group task, and on SQLite's writer
/// thread): how "hidden costs what missing costs" is measured (ADR 0020
/// §3). Outside such a scope a statement costs one
/// failed task-local lookup.
pub async fn count_statements<T>(work: impl std::future::Future<Output = T>) -> (T, u64) {
    STATEMENTS
        .scope(std::cell::Cell::new(0), async move {
            let out = work.await;
            (out, STATEMENTS.with(|n| n.get()))
        })
        .await
}

#[cfg(test)]
mod shaped_chunks_tests {
    use super::shaped_chunks;

    #[test]
    fn parts_are_powers_of_two_up_to_the_cap_in_order_and_cover_every_row() {
        for (len, max) in [
            (0, 512),
            (1, 512),
            (7, 512),
            (100, 400),
            (800, 1000),
            (1001, 500),
        ] {
            let rows: Vec<usize> = (0..len).collect();
            let parts: Vec<&[usize]> = shaped_chunks(&rows, max).collect();
            let cap = if max >= 512 { 512 } else { 256 };
            for p in &parts {
                assert!(
                    p.len().is_power_of_two() && p.len() <= cap,
                    "{len} {max}: {}",
                    p.len()
                );
            }
            assert!(parts.windows(2).all(|w| w[0].len() >= w[1].len()));
            assert_eq!(parts.concat(), rows, "{len} {max}");
        }
        let rows = vec![0u8; 800];
        let lens: Vec<usize> = shaped_chunks(&rows, 1000).map(<[u8]>::len).collect();
        assert_eq!(lens, vec![512, 256, 32]);
    }
}
