//! SQLite: the embedded default. WAL with `synchronous = FULL`, so a write the
//! hub acknowledged survives a crash of the process or the machine. Ids are
//! stored as text (readable with the sqlite3 shell), JSON as text, times as
//! Unix millis. This module binds and reads those; the queries themselves are
//! shared (ADR 0014), except what `events`, `conversations` and `locks` hold.

mod conversations;
mod events;
mod locks;
mod send_writer;
#[cfg(test)]
mod send_writer_tests;
#[cfg(test)]
mod verdict_group_tests;
mod verdict_writer;
mod writer;
mod writer_exec;

pub(in crate::store) use writer_exec::WriterRow;

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::query::Query;
use sqlx::sqlite::{
    SqliteArguments, SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{Row as _, Sqlite, SqliteConnection, SqlitePool};
use uuid::Uuid;

use super::group_sends::SendCommit;
use super::group_verdicts::VerdictCommit;
use super::sql::{connection_executor, Arg, Columns, Database, Executor, Keyset, Row, Session, Tx};
use super::{Backend, BaseDialect, CommitFeed, StoreError, StoreResult};
use crate::domain::event::{NewEvent, StoredEvent};
use crate::domain::Millis;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// Rows a query's worker may run ahead of its reader: a replayed or REST
/// page (`events.replay_batch`, `events.page_max`, 500 and 1,000 by
/// default) crosses in one go.
const ROW_BUFFER_SIZE: usize = 1024;

pub struct SqliteStore {
    pool: SqlitePool,
    /// Serializes this process's write transactions. SQLite admits one
    /// writer at a time anyway; queueing here (FIFO) instead of in SQLite's
    /// busy handler, which sleeps 1 ms, 2 ms, 5 ms, ... between retries,
    /// keeps contended writes from waiting on sleeps.
    writer: Arc<tokio::sync::Mutex<()>>,
    /// The writer thread's connection (ADR 0022), used under `writer`.
    #[cfg_attr(not(test), allow(dead_code))]
    thread: Arc<writer::Writer>,
    /// Sends, group-committed under the writer lock (ADR 0013).
    sends: SendCommit,
    /// Verdicts of gated messages, group-committed under the same lock.
    verdicts: VerdictCommit,
    feed: CommitFeed,
}

impl SqliteStore {
    pub async fn open(
        url: &str,
        max_connections: u32,
        busy_timeout_ms: u64,
        synchronous: crate::config::SqliteSynchronous,
    ) -> StoreResult<Self> {
        let (synchronous, synchronous_pragma) = match synchronous {
            crate::config::SqliteSynchronous::Full => (SqliteSynchronous::Full, "FULL"),
            crate::config::SqliteSynchronous::Normal => (SqliteSynchronous::Normal, "NORMAL"),
        };
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(synchronous)
            .foreign_keys(true)
            .busy_timeout(Duration::from_millis(busy_timeout_ms))
            // Statement journals and temporary indexes in memory: a send's
            // multi-row insert otherwise creates, writes and deletes a
            // temporary file on most sends (measured: -0.16 ms p50 at one
            // send in flight, docs/benchmarks.md).
            .pragma("temp_store", "memory")
            // Rows cross from sqlx's worker thread one channel message at a
            // time; at its default of 50 the worker blocks, and the reader
            // wakes, twenty times in a replayed page of 1,000 events.
            .row_buffer_size(ROW_BUFFER_SIZE);
        if let Some(parent) = Path::new(options.get_filename()).parent() {
            if !parent.as_os_str().is_empty() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| StoreError::Database(sqlx::Error::Io(e)))?;
            }
        }
        let settings = writer::WriterSettings {
            path: writer::writer_path(url, options.get_filename())?,
            synchronous: synchronous_pragma,
            busy_timeout: Duration::from_millis(busy_timeout_ms),
        };
        // No ping before each use (sqlx's default): on SQLite it is a hop
        // to the connection's thread and back, and a connection to a local
        // file has no peer to lose.
        let pool = SqlitePoolOptions::new()
            .max_connections(max_connections)
            .test_before_acquire(false)
            .connect_with(options)
            .await?;
        // After the pool: its first connection made the file and set WAL.
        let thread = Arc::new(
            tokio::task::spawn_blocking(move || writer::Writer::start(settings))
                .await
                .map_err(|e| StoreError::Database(sqlx::Error::Protocol(e.to_string())))??,
        );
        let writer = Arc::new(tokio::sync::Mutex::new(()));
        let feed = CommitFeed::default();
        let (sends, verdicts) =
            conversations::group_commits(writer.clone(), thread.clone(), feed.clone());
        Ok(SqliteStore {
            thread,
            feed,
            sends,
            verdicts,
            pool,
            writer,
        })
    }
}

#[async_trait]
impl Database for SqliteStore {
    async fn read(&self) -> StoreResult<Box<dyn Executor>> {
        Ok(Box::new(Session::new(self.pool.acquire().await?, None)))
    }

    async fn write(&self) -> StoreResult<Box<dyn Executor>> {
        let writing = self.writer.clone().lock_owned().await;
        Ok(Box::new(Session::new(
            self.pool.acquire().await?,
            Some(writing),
        )))
    }

    async fn begin(&self) -> StoreResult<Tx> {
        let writing = self.writer.clone().lock_owned().await;
        Ok(Tx::new(Session::new(
            self.pool.begin().await?,
            Some(writing),
        )))
    }
}

impl Keyset for SqliteStore {
    /// As before: ids are text, and every id sorts after the empty one.
    fn after(column: &str, param: usize) -> String {
        format!("{column} > COALESCE(${param}, '')")
    }
}

#[async_trait]
impl BaseDialect for SqliteStore {
    const BACKEND: Backend = Backend::Sqlite;

    fn commit_feed(&self) -> &CommitFeed {
        &self.feed
    }

    /// On one connection without foreign-key enforcement: migration 0009
    /// rebuilds `principals` and `conversations` (SQLite cannot alter a
    /// CHECK), and with enforcement on the parent's `DROP TABLE` fails,
    /// while `PRAGMA foreign_keys` is a no-op inside the migrator's
    /// transaction (ADR 0020 §5). What enforcement would have caught is
    /// checked afterwards on that connection, failing start-up; pooled
    /// connections keep enforcing.
    async fn run_migrations(&self) -> StoreResult<()> {
        let options = (*self.pool.connect_options()).clone().foreign_keys(false);
        // A pool of exactly one connection: the migrator takes a pool
        // (`&mut SqliteConnection` is not `Send` enough here), and the check
        // must run on the connection that migrated.
        let one = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await?;
        let done = migrate_checked(&one).await;
        one.close().await;
        done
    }
}

/// Runs the pending migrations with foreign keys checked before and after,
/// so a database that already breaks them is refused untouched (still at
/// its old version, readable by the old binary) rather than migrated and
/// then refused. A start with nothing pending checks nothing: the scan
/// reads every child table.
async fn migrate_checked(one: &SqlitePool) -> StoreResult<()> {
    let latest = MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
    if applied_version(one).await? >= latest {
        return Ok(());
    }
    foreign_key_violations(one, Checked::Before).await?;
    MIGRATOR.run(one).await?;
    foreign_key_violations(one, Checked::After).await
}

#[derive(Clone, Copy)]
enum Checked {
    Before,
    After,
}

/// The newest migration applied, 0 on a new database.
async fn applied_version(one: &SqlitePool) -> StoreResult<i64> {
    let tracked: Option<(String,)> = sqlx::query_as(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
    )
    .fetch_optional(one)
    .await?;
    if tracked.is_none() {
        return Ok(0);
    }
    let (version,): (Option<i64>,) =
        sqlx::query_as("SELECT MAX(version) FROM _sqlx_migrations WHERE success")
            .fetch_one(one)
            .await?;
    Ok(version.unwrap_or(0))
}

/// `PRAGMA foreign_key_check`: an error naming the first table holding a
/// row whose parent is missing.
async fn foreign_key_violations(one: &SqlitePool, when: Checked) -> StoreResult<()> {
    let row = sqlx::query("PRAGMA foreign_key_check")
        .fetch_optional(one)
        .await?;
    match row {
        None => Ok(()),
        Some(row) => {
            let table: String = row.try_get("table")?;
            let parent: String = row.try_get("parent")?;
            let (when, then) = match when {
                Checked::Before => ("before", "nothing was migrated"),
                Checked::After => ("after", "the migrations were applied"),
            };
            Err(StoreError::Corrupt(format!(
                "{when} the migrations, table {table} has a row whose {parent} row is missing \
                 (PRAGMA foreign_key_check); {then}"
            )))
        }
    }
}

/// Binds our arguments the SQLite way: ids as hyphenated text, JSON as text.
fn query<'q>(sql: &'q str, args: &'q [Arg<'q>]) -> Query<'q, Sqlite, SqliteArguments<'q>> {
    args.iter().fold(sqlx::query(sql), |q, arg| match *arg {
        Arg::Id(id) => q.bind(id.to_string()),
        Arg::OptId(id) => q.bind(id.map(|id| id.to_string())),
        Arg::Text(s) | Arg::Json(s) => q.bind(s),
        Arg::OptText(s) => q.bind(s),
        Arg::Int(i) => q.bind(i),
        Arg::OptInt(i) => q.bind(i),
        Arg::Bool(b) => q.bind(b),
        Arg::Bytes(b) => q.bind(b),
    })
}

connection_executor!(SqliteConnection, Row::Sqlite);

/// A stored id; text that is not a uuid is `Corrupt`.
fn uuid(s: &str) -> StoreResult<Uuid> {
    Uuid::parse_str(s).map_err(|_| StoreError::Corrupt(format!("bad uuid {s:?}")))
}

impl Columns for SqliteRow {
    fn id(&self, col: &str) -> StoreResult<Uuid> {
        uuid(self.try_get(col)?)
    }

    fn opt_id(&self, col: &str) -> StoreResult<Option<Uuid>> {
        self.try_get::<Option<&str>, _>(col)?.map(uuid).transpose()
    }

    fn text(&self, col: &str) -> StoreResult<String> {
        Ok(self.try_get(col)?)
    }

    fn opt_text(&self, col: &str) -> StoreResult<Option<String>> {
        Ok(self.try_get(col)?)
    }

    fn int(&self, col: &str) -> StoreResult<i64> {
        Ok(self.try_get(col)?)
    }

    fn opt_int(&self, col: &str) -> StoreResult<Option<i64>> {
        Ok(self.try_get(col)?)
    }

    fn json(&self, col: &str) -> StoreResult<String> {
        Ok(self.try_get(col)?)
    }

    fn bytes(&self, col: &str) -> StoreResult<Vec<u8>> {
        Ok(self.try_get(col)?)
    }
}

#[cfg(test)]
mod tests {
    //! The `$N` placeholders the shared SQL uses, on SQLite.

    use super::*;
    use crate::store::BaseStore;

    async fn conn() -> (SqliteConnection, tempfile::TempDir) {
        use sqlx::Connection;
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("t.db").display());
        (SqliteConnection::connect(&url).await.unwrap(), dir)
    }

    #[tokio::test]
    async fn every_pooled_connection_keeps_temporary_data_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        let store = SqliteStore::open(&url, 2, 5_000, crate::config::SqliteSynchronous::Full)
            .await
            .unwrap();
        let (mut a, mut b) = (store.read().await.unwrap(), store.read().await.unwrap());
        for conn in [&mut a, &mut b] {
            let row = conn
                .fetch_optional("PRAGMA temp_store", &[])
                .await
                .unwrap()
                .unwrap();
            assert_eq!(row.int("temp_store").unwrap(), 2, "2 is MEMORY");
        }
    }

    /// The migrations run without foreign-key enforcement; every pooled
    /// connection enforces it afterwards, and a second start checks and
    /// migrates nothing.
    #[tokio::test]
    async fn pooled_connections_enforce_foreign_keys_after_the_migrations() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        let store = SqliteStore::open(&url, 2, 5_000, crate::config::SqliteSynchronous::Full)
            .await
            .unwrap();
        store.migrate().await.unwrap();
        store.migrate().await.unwrap();
        let (mut a, mut b) = (store.read().await.unwrap(), store.read().await.unwrap());
        for conn in [&mut a, &mut b] {
            let row = conn
                .fetch_optional("PRAGMA foreign_keys", &[])
                .await
                .unwrap()
                .unwrap();
            assert_eq!(row.int("foreign_keys").unwrap(), 1);
        }
        let dangling = a
            .execute(
                "INSERT INTO conversation_participants (conversation_id, principal_id, joined_at) \
                 VALUES ($1, $2, 1)",
                &[Arg::Id(Uuid::now_v7()), Arg::Id(Uuid::now_v7())],
            )
            .await;
        assert!(
            dangling.is_err(),
            "a row without its conversation is refused"
        );
    }

    #[tokio::test]
    async fn numbered_placeholders_bind_by_number_not_by_position() {
        let (mut c, _dir) = conn().await;
        let row = c
            .fetch_optional(
                "SELECT $2 AS b, $1 AS a, $1 || $2 AS ab, $3 AS n",
                &[Arg::Text("x"), Arg::Int(7), Arg::OptInt(None)],
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(row.int("b").unwrap(), 7);
        assert_eq!(row.text("a").unwrap(), "x");
        assert_eq!(row.text("ab").unwrap(), "x7", "$1 used twice");
        assert_eq!(row.opt_int("n").unwrap(), None);
    }

    #[tokio::test]
    async fn ids_are_stored_as_hyphenated_text_and_bad_ones_are_corrupt() {
        let (mut c, _dir) = conn().await;
        c.execute("CREATE TABLE t (id TEXT, j TEXT, b BLOB)", &[])
            .await
            .unwrap();
        let id = Uuid::now_v7();
        c.execute(
            "INSERT INTO t (id, j, b) VALUES ($1, $2, $3)",
            &[Arg::Id(id), Arg::Json("{\"k\":1}"), Arg::Bytes(&[1, 2])],
        )
        .await
        .unwrap();
        let row = c
            .fetch_optional(
                "SELECT id, typeof(id) AS ty, j, b FROM t WHERE id = $1",
                &[Arg::Id(id)],
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(row.text("id").unwrap(), id.hyphenated().to_string());
        assert_eq!(row.text("ty").unwrap(), "text");
        assert_eq!(row.id("id").unwrap(), id);
        assert_eq!(row.json("j").unwrap(), "{\"k\":1}");
        assert_eq!(row.bytes("b").unwrap(), vec![1, 2]);
        c.execute("UPDATE t SET id = 'not-a-uuid'", &[])
            .await
            .unwrap();
        let row = c
            .fetch_optional("SELECT id FROM t", &[])
            .await
            .unwrap()
            .unwrap();
        assert!(matches!(row.id("id"), Err(StoreError::Corrupt(_))));
    }
}
