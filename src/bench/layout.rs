//! The `layout` scenario (issue 13, ADR 0018): the storage cost of one
//! message to N recipients under today's event log and two candidate
//! layouts, measured on the schemas and queries alone (no hub, no sockets)
//! in fresh scratch databases. Writes go in transactions of
//! [`PER_TRANSACTION`] messages, as group commit batches them; reads are a
//! principal's catch-up by cursor in pages of [`READ_PAGE`], envelopes
//! rebuilt and serialized. Every figure is compared with today's layout
//! measured in the same run, right before it.

mod read;
mod schema;
mod thin_read;
mod write;

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Instant;

use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};

use super::report::{Entry, Report};
use super::throwaway_pg;
use crate::config::SqliteSynchronous;
use crate::store::sql::{Arg, Executor};
use read::Source;
use thin_read::ThinRead;
use write::Workload;

/// Messages per write transaction, as group commit batches 16 in flight.
const PER_TRANSACTION: usize = 16;
/// Events per catch-up page, as `resume` and REST read them.
const READ_PAGE: u32 = 1000;
/// The reader of the read phase is in this many conversations ...
const READ_CONVERSATIONS: usize = 8;
/// ... of this many participants each, senders taking turns.
const READ_MEMBERS: usize = 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// One full `events` row per delivery, as the migrations have it.
    Today,
    /// Candidate A: a thin per-audience index over payloads stored once.
    Thin,
    /// Candidate B: conversation messages as per-conversation streams.
    Stream,
}

impl Layout {
    const ALL: [Layout; 3] = [Layout::Today, Layout::Thin, Layout::Stream];

    fn name(self) -> &'static str {
        match self {
            Layout::Today => "today",
            Layout::Thin => "thin_index",
            Layout::Stream => "conversation_stream",
        }
    }
}

/// What the scenario runs: sizes and backends from the bench flags.
pub struct LayoutArgs {
    pub backends: Vec<String>,
    pub sizes: Vec<usize>,
    pub deliveries: usize,
    pub read_events: usize,
    pub synchronous: SqliteSynchronous,
}

pub async fn run(args: &LayoutArgs, report: &mut Report) -> anyhow::Result<()> {
    for backend in &args.backends {
        anyhow::ensure!(
            backend == "sqlite" || backend == "postgres",
            "unknown backend {backend}"
        );
        for &n in &args.sizes {
            let messages = (args.deliveries / n.max(1))
                .max(4 * PER_TRANSACTION)
                .next_multiple_of(PER_TRANSACTION);
            let mut today: Option<Entry> = None;
            for layout in Layout::ALL {
                let mut e = measure_write(args, backend, layout, n, messages).await?;
                compare(&mut e, today.as_ref(), &WRITE_FIGURES);
                report.push(e.clone());
                today.get_or_insert(e);
            }
        }
        let mut today: Option<Entry> = None;
        for layout in Layout::ALL {
            for mut e in measure_reads(args, backend, layout).await? {
                compare(&mut e, today.as_ref(), &["events_per_second"]);
                report.push(e.clone());
                today.get_or_insert(e);
            }
        }
    }
    Ok(())
}

const WRITE_FIGURES: [&str; 3] = [
    "deliveries_per_second",
    "bytes_per_delivery",
    "wal_bytes_per_delivery",
];

/// Each figure over today's, as `<figure>_over_today`.
fn compare(e: &mut Entry, today: Option<&Entry>, figures: &[&str]) {
    if let Some(t) = today {
        for f in figures {
            e.ratio(f, t, &format!("{f}_over_today"));
        }
    }
}

/// One message to `n` recipients, `messages` times, in a fresh database.
async fn measure_write(
    args: &LayoutArgs,
    backend: &str,
    layout: Layout,
    n: usize,
    messages: usize,
) -> anyhow::Result<Entry> {
    let scratch = Scratch::open(backend, layout, args.synchronous).await?;
    let mut w = Workload::fanout(n, messages);
    w.postgres = backend == "postgres";
    scratch.setup(layout, &mut w).await?;
    let before = scratch.footprint().await?;
    let started = Instant::now();
    write_all(&scratch, layout, &w).await?;
    let seconds = started.elapsed().as_secs_f64();
    let (bytes, wal) = scratch.growth(&before).await?;
    let deliveries = w.deliveries() as f64;
    let mut e = Entry::new("layout")
        .param("backend", backend)
        .param("layout", layout.name())
        .param("phase", "write")
        .param("n", n)
        .param("messages", messages)
        .param("per_transaction", PER_TRANSACTION);
    e.result("deliveries", w.deliveries());
    e.result("seconds", round(seconds, 3));
    e.result("deliveries_per_second", (deliveries / seconds).round());
    e.result("bytes_per_delivery", round(bytes as f64 / deliveries, 1));
    if let Some(wal) = wal {
        e.result("wal_bytes_per_delivery", round(wal as f64 / deliveries, 1));
    }
    Ok(e)
}

/// A principal's catch-up from cursor 0: `read_events` events received
/// over [`READ_CONVERSATIONS`] conversations, read in pages; candidate A
/// once per read variant ([`ThinRead::ALL`]) from the same database.
async fn measure_reads(
    args: &LayoutArgs,
    backend: &str,
    layout: Layout,
) -> anyhow::Result<Vec<Entry>> {
    let postgres = backend == "postgres";
    let scratch = Scratch::open(backend, layout, args.synchronous).await?;
    let mut w = Workload::inbox(READ_CONVERSATIONS, READ_MEMBERS, args.read_events);
    w.postgres = postgres;
    scratch.setup(layout, &mut w).await?;
    write_all(&scratch, layout, &w).await?;
    let reader = w.reader();
    let expected = w.received_by(reader.id);
    let variants: &[ThinRead] = match layout {
        Layout::Thin => &ThinRead::ALL,
        _ => &ThinRead::ALL[..1],
    };
    let mut entries = Vec::new();
    for &thin in variants {
        let mut source = Source::new(layout, thin, postgres);
        if thin.warm_cache {
            let mut tx = scratch.begin().await?;
            read::catch_up(tx.ex(), &mut source, &reader, expected).await?;
            tx.commit().await?;
        }
        let mut tx = scratch.begin().await?;
        let started = Instant::now();
        let read = read::catch_up(tx.ex(), &mut source, &reader, expected)
            .await
            .map_err(|e| e.context(format!("{layout:?} {}", thin.name())))?;
        let seconds = started.elapsed().as_secs_f64();
        tx.commit().await?;
        let mut e = Entry::new("layout")
            .param("backend", backend)
            .param("layout", layout.name())
            .param("phase", "read")
            .param("conversations", READ_CONVERSATIONS)
            .param("page", READ_PAGE);
        if layout == Layout::Thin {
            e = e.param("read", thin.name());
        }
        e.result("events", read.events);
        e.result("pages", read.pages);
        e.result("seconds", round(seconds, 3));
        e.result("events_per_second", (read.events as f64 / seconds).round());
        e.result(
            "envelope_bytes",
            round(read.envelope_bytes as f64 / read.events.max(1) as f64, 1),
        );
        entries.push(e);
    }
    Ok(entries)
}

async fn write_all(scratch: &Scratch, layout: Layout, w: &Workload) -> anyhow::Result<()> {
    for group in w.sends.chunks(PER_TRANSACTION) {
        let mut tx = scratch.begin().await?;
        write::write_group(tx.ex(), layout, w, group).await?;
        tx.commit().await?;
    }
    Ok(())
}

fn round(v: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (v * f).round() / f
}

/// A fresh database holding one layout's schema.
enum Scratch {
    Sqlite {
        pool: sqlx::SqlitePool,
        file: PathBuf,
        _dir: tempfile::TempDir,
    },
    Postgres {
        pool: sqlx::PgPool,
    },
}

/// A write (or read) transaction on either backend.
enum Txn {
    Sqlite(sqlx::Transaction<'static, sqlx::Sqlite>),
    Postgres(sqlx::Transaction<'static, sqlx::Postgres>),
}

impl Txn {
    fn ex(&mut self) -> &mut dyn Executor {
        match self {
            Txn::Sqlite(t) => &mut **t,
            Txn::Postgres(t) => &mut **t,
        }
    }

    async fn commit(self) -> anyhow::Result<()> {
        match self {
            Txn::Sqlite(t) => t.commit().await?,
            Txn::Postgres(t) => t.commit().await?,
        }
        Ok(())
    }
}

/// Database size (and, on PostgreSQL, the WAL position) at a moment.
struct Footprint {
    bytes: i64,
    wal_lsn: Option<String>,
}

impl Scratch {
    /// SQLite as the hub opens it (WAL, the configured `synchronous`,
    /// foreign keys on); PostgreSQL on the throwaway server.
    async fn open(
        backend: &str,
        layout: Layout,
        synchronous: SqliteSynchronous,
    ) -> anyhow::Result<Scratch> {
        let scratch = if backend == "postgres" {
            let url = throwaway_pg::database().await?;
            let pool = PgPoolOptions::new()
                .max_connections(1)
                .connect(&url)
                .await?;
            Scratch::Postgres { pool }
        } else {
            let dir = tempfile::tempdir()?;
            let file = dir.path().join("layout.db");
            let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", file.display()))?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(match synchronous {
                    SqliteSynchronous::Full => sqlx::sqlite::SqliteSynchronous::Full,
                    SqliteSynchronous::Normal => sqlx::sqlite::SqliteSynchronous::Normal,
                })
                .foreign_keys(true);
            let pool = SqlitePoolOptions::new()
                .max_connections(1)
                .connect_with(options)
                .await?;
            Scratch::Sqlite {
                pool,
                file,
                _dir: dir,
            }
        };
        for sql in schema::ddl(layout, backend == "postgres") {
            scratch.raw(sql).await?;
        }
        Ok(scratch)
    }

    async fn raw(&self, sql: &str) -> anyhow::Result<()> {
        match self {
            Scratch::Sqlite { pool, .. } => sqlx::raw_sql(sql).execute(pool).await.map(drop)?,
            Scratch::Postgres { pool } => sqlx::raw_sql(sql).execute(pool).await.map(drop)?,
        }
        Ok(())
    }

    async fn begin(&self) -> anyhow::Result<Txn> {
        Ok(match self {
            Scratch::Sqlite { pool, .. } => Txn::Sqlite(pool.begin().await?),
            Scratch::Postgres { pool } => Txn::Postgres(pool.begin().await?),
        })
    }

    /// Conversations, participants and (where the layout has them up front)
    /// event streams: what exists before the first message is sent.
    async fn setup(&self, layout: Layout, w: &mut Workload) -> anyhow::Result<()> {
        let mut tx = self.begin().await?;
        write::setup(tx.ex(), layout, w).await?;
        tx.commit().await
    }

    /// After a checkpoint, so the WAL of SQLite is in the file and
    /// PostgreSQL's WAL starts from a checkpoint in every measurement.
    async fn footprint(&self) -> anyhow::Result<Footprint> {
        match self {
            Scratch::Sqlite { file, .. } => {
                self.raw("PRAGMA wal_checkpoint(TRUNCATE)").await?;
                Ok(Footprint {
                    bytes: std::fs::metadata(file)?.len() as i64,
                    wal_lsn: None,
                })
            }
            Scratch::Postgres { .. } => {
                self.raw("CHECKPOINT").await?;
                let mut tx = self.begin().await?;
                let row = tx
                    .ex()
                    .fetch_optional(
                        "SELECT pg_database_size(current_database()) AS bytes, \
                         CAST(pg_current_wal_lsn() AS TEXT) AS lsn",
                        &[],
                    )
                    .await?
                    .ok_or_else(|| anyhow::anyhow!("no database size"))?;
                let f = Footprint {
                    bytes: row.int("bytes")?,
                    wal_lsn: Some(row.text("lsn")?),
                };
                tx.commit().await?;
                Ok(f)
            }
        }
    }

    /// Bytes the database grew by since `before`, and WAL bytes written.
    async fn growth(&self, before: &Footprint) -> anyhow::Result<(i64, Option<i64>)> {
        let wal = match &before.wal_lsn {
            Some(lsn) => {
                let mut tx = self.begin().await?;
                let row = tx
                    .ex()
                    .fetch_optional(
                        "SELECT CAST(pg_wal_lsn_diff(pg_current_wal_lsn(), CAST($1 AS pg_lsn)) AS BIGINT) AS wal",
                        &[Arg::Text(lsn)],
                    )
                    .await?
                    .ok_or_else(|| anyhow::anyhow!("no WAL position"))?;
                tx.commit().await?;
                Some(row.int("wal")?)
            }
            None => None,
        };
        let after = self.footprint().await?;
        Ok((after.bytes - before.bytes, wal))
    }
}

impl LayoutArgs {
    /// Sizes from `--fanout-sizes` and `--fanout-deliveries`, backends from
    /// `--backend`; the reader catches up on 20,000 events (1,200 in smoke
    /// mode: one full page and a partial one).
    pub fn from(args: &super::BenchArgs) -> anyhow::Result<LayoutArgs> {
        let backends = match args.backend.as_str() {
            "both" => vec!["sqlite".to_string(), "postgres".to_string()],
            b => vec![b.to_string()],
        };
        let synchronous = match args.sqlite_synchronous.as_str() {
            "normal" => SqliteSynchronous::Normal,
            "full" => SqliteSynchronous::Full,
            other => anyhow::bail!("--sqlite-synchronous must be full or normal, not {other}"),
        };
        Ok(LayoutArgs {
            backends,
            sizes: args.fanout_sizes.clone(),
            deliveries: args.fanout_deliveries,
            read_events: if args.smoke { 1_200 } else { 20_000 },
            synchronous,
        })
    }
}
