//! The SQLite writer thread (ADR 0022): one OS thread per store owning one
//! `rusqlite` connection to the pool's file, so a whole group transaction
//! runs as plain function calls there and costs the async side one hand-off
//! (a job in, a oneshot out) instead of one per statement.
//!
//! The thread never takes the store's writer lock itself: whoever hands it
//! work holds that lock, so its transactions still serialize with the
//! pool's writes. It ends when the store (the last sender) is dropped.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags, Statement};

use crate::store::sql::Arg;
use crate::store::{StoreError, StoreResult};

/// Work for the thread: runs on its connection, answers on its own channel.
type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// The pool's connection settings, applied to the writer's connection too.
#[derive(Clone, Debug)]
pub(super) struct WriterSettings {
    pub path: PathBuf,
    /// `FULL` or `NORMAL`.
    pub synchronous: &'static str,
    pub busy_timeout: Duration,
}

/// Prepared statements kept per connection: the group statements come in a
/// few shapes each (one per power of two up to its chunk, `store::sql::shaped_chunks`).
const STATEMENT_CACHE: usize = 128;

pub(super) struct Writer {
    jobs: mpsc::Sender<Job>,
}

impl Writer {
    /// Opens the connection on a new thread; fails as the open fails.
    pub fn start(settings: WriterSettings) -> StoreResult<Writer> {
        let (jobs, inbox) = mpsc::channel::<Job>();
        let (opened, open_result) = mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || {
                let mut conn = match open(&settings) {
                    Ok(conn) => {
                        let _ = opened.send(Ok(()));
                        conn
                    }
                    Err(e) => {
                        let _ = opened.send(Err(e));
                        return;
                    }
                };
                while let Ok(job) = inbox.recv() {
                    run_job(&mut conn, job);
                }
            })
            .map_err(|e| StoreError::Database(sqlx::Error::Io(e)))?;
        open_result
            .recv()
            .map_err(|_| protocol("the SQLite writer thread ended while opening"))??;
        Ok(Writer { jobs })
    }

    /// Runs `work` on the writer's connection and awaits its answer: the
    /// one hand-off. The caller holds the store's writer lock.
    /// The statements it ran count for the awaiting task
    /// ([`crate::store::count_statements`]), as if run there.
    pub async fn run<R, F>(&self, work: F) -> StoreResult<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> StoreResult<R> + Send + 'static,
    {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |conn| {
            let before = RAN.with(|n| n.get());
            let out = work(conn);
            let ran = RAN.with(|n| n.get()) - before;
            let _ = reply.send((out, ran));
        });
        self.jobs
            .send(job)
            .map_err(|_| protocol("the SQLite writer thread has ended"))?;
        let (out, ran) = answer
            .await
            .map_err(|_| protocol("the SQLite writer thread ended without an answer"))?;
        crate::store::sql::note_statements(ran);
        out
    }

    /// Runs `work` on the writer's connection without awaiting it: `work`
    /// answers for itself, with the statements it ran. The caller holds the
    /// store's writer lock and hands it to `work`. False when the thread
    /// has ended (`work`, dropped unrun, answers nobody).
    pub fn hand_off<F>(&self, work: F) -> bool
    where
        F: FnOnce(&mut Connection, &dyn Fn() -> u64) + Send + 'static,
    {
        let job: Job = Box::new(move |conn| {
            let before = RAN.with(|n| n.get());
            work(conn, &|| RAN.with(|n| n.get()) - before);
        });
        self.jobs.send(job).is_ok()
    }
}

thread_local! {
    /// Statements the writer thread has run, for [`Writer::run`]'s count.
    static RAN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// One statement run on the writer thread's connection.
pub(super) fn note_statement() {
    RAN.with(|n| n.set(n.get() + 1));
}

/// One job, surviving its panic: the thread is every send's way to the
/// database, so a panic in one group's code must cost that group (its
/// writers get "ended without an answer", the reply being dropped) and
/// nothing after it. A transaction left open by the panic, or by a
/// `ROLLBACK` that failed on drop, is rolled back before the next job.
fn run_job(conn: &mut Connection, job: Job) {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(conn)));
    if outcome.is_err() {
        tracing::error!("a job on the SQLite writer thread panicked; its group was not answered");
    }
    if !conn.is_autocommit() {
        if let Err(e) = conn.execute_batch("ROLLBACK") {
            tracing::error!(error = %e, "the SQLite writer could not roll back an open transaction");
        }
    }
}

fn open(s: &WriterSettings) -> StoreResult<Connection> {
    let conn = configured(s).map_err(lite_err)?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(lite_err)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(protocol(&format!(
            "the SQLite writer connection is in journal mode {mode}, not WAL"
        )));
    }
    Ok(conn)
}

fn configured(s: &WriterSettings) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        &s.path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(s.busy_timeout)?;
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {}; PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY;",
        s.synchronous
    ))?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

/// The file a pool's options name, for the writer to open too. An
/// in-memory database would be a different one per connection: refused,
/// whether the URL says so (`sqlite::memory:`, `?mode=memory`) or the
/// name sqlx gives its in-memory databases does.
pub(super) fn writer_path(url: &str, filename: &Path) -> StoreResult<PathBuf> {
    let name = filename.to_string_lossy();
    let in_memory = url.contains(":memory:")
        || url.contains("mode=memory")
        || name.is_empty()
        || name == ":memory:"
        || name.starts_with("file:sqlx-in-memory-");
    if in_memory {
        return Err(StoreError::Corrupt(
            "an in-memory SQLite database cannot be shared with the writer thread; \
             set storage.database_url to a file"
                .into(),
        ));
    }
    Ok(filename.to_path_buf())
}

/// Our argument as SQLite stores it: the same values `sqlite::query` binds.
pub(super) fn value(arg: &Arg<'_>) -> Value {
    match *arg {
        Arg::Id(id) => Value::Text(id.to_string()),
        Arg::OptId(id) => id.map_or(Value::Null, |id| Value::Text(id.to_string())),
        Arg::Text(s) | Arg::Json(s) => Value::Text(s.to_string()),
        Arg::OptText(s) => s.map_or(Value::Null, |s| Value::Text(s.to_string())),
        Arg::Int(i) => Value::Integer(i),
        Arg::OptInt(i) => i.map_or(Value::Null, Value::Integer),
        Arg::Bool(b) => Value::Integer(i64::from(b)),
        Arg::Bytes(b) => Value::Blob(b.to_vec()),
    }
}

/// Binds `$1, $2, ...` of a shared query (ADR 0014) by number, as sqlx
/// does on SQLite: `$N` is a named parameter there.
pub(super) fn bind_numbered(stmt: &mut Statement<'_>, args: &[Arg<'_>]) -> rusqlite::Result<()> {
    for (i, arg) in args.iter().enumerate() {
        if let Some(at) = stmt.parameter_index(&format!("${}", i + 1))? {
            stmt.raw_bind_parameter(at, value(arg))?;
        }
    }
    Ok(())
}

/// `(?, ?, ...), (...)`: `rows` rows of `columns` placeholders.
pub(super) fn values_clause(rows: usize, columns: usize) -> String {
    let row = format!("({})", vec!["?"; columns].join(", "));
    let mut out = String::with_capacity(6 + rows * (row.len() + 2));
    out.push_str("VALUES ");
    for i in 0..rows {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&row);
    }
    out
}

fn protocol(what: &str) -> StoreError {
    StoreError::Database(sqlx::Error::Protocol(what.into()))
}

/// A rusqlite error as the store's: a database error keeps its extended
/// code and its kind, so a unique or foreign-key violation is still one
/// item's fault to the group commit and a duplicate to the send path.
pub(super) fn lite_err(e: rusqlite::Error) -> StoreError {
    match e {
        rusqlite::Error::SqliteFailure(err, message) => {
            StoreError::Database(sqlx::Error::Database(Box::new(WriterDbError {
                code: err.extended_code,
                message: message.unwrap_or_else(|| err.to_string()),
            })))
        }
        rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::InvalidColumnType(..)
        | rusqlite::Error::IntegralValueOutOfRange(..) => StoreError::Corrupt(e.to_string()),
        other => protocol(&other.to_string()),
    }
}

/// A database error raised on the writer's connection.
#[derive(Debug)]
struct WriterDbError {
    /// SQLite's extended result code.
    code: i32,
    message: String,
}

impl std::fmt::Display for WriterDbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "(code: {}) {}", self.code, self.message)
    }
}

impl std::error::Error for WriterDbError {}

impl sqlx::error::DatabaseError for WriterDbError {
    fn message(&self) -> &str {
        &self.message
    }

    fn code(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Owned(self.code.to_string()))
    }

    fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
        self
    }

    /// As sqlx-sqlite classifies the same codes.
    fn kind(&self) -> sqlx::error::ErrorKind {
        use rusqlite::ffi;
        match self.code {
            ffi::SQLITE_CONSTRAINT_UNIQUE | ffi::SQLITE_CONSTRAINT_PRIMARYKEY => {
                sqlx::error::ErrorKind::UniqueViolation
            }
            ffi::SQLITE_CONSTRAINT_FOREIGNKEY => sqlx::error::ErrorKind::ForeignKeyViolation,
            ffi::SQLITE_CONSTRAINT_NOTNULL => sqlx::error::ErrorKind::NotNullViolation,
            ffi::SQLITE_CONSTRAINT_CHECK => sqlx::error::ErrorKind::CheckViolation,
            _ => sqlx::error::ErrorKind::Other,
        }
    }
}
