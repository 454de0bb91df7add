//! PostgreSQL: selected by a `postgres://` database URL. Ids are native
//! `uuid`, manifests, parts and payloads `jsonb`, times Unix millis in
//! `bigint`. This module binds and reads those; the queries themselves are
//! shared (ADR 0014), except what `events`, `conversations` and `locks` hold.

mod conversations;
mod events;
mod locks;
mod writer_runtime;

use async_trait::async_trait;
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::types::Oid;
use sqlx::postgres::{
    PgArgumentBuffer, PgArguments, PgConnection, PgPool, PgPoolOptions, PgRow, PgTypeInfo,
    PgValueFormat, PgValueRef,
};
use sqlx::query::Query;
use sqlx::{Postgres, Row as _, TypeInfo as _, ValueRef as _};
use uuid::Uuid;

use super::group_sends::SendCommit;
use super::group_verdicts::VerdictCommit;
use super::sql::{connection_executor, Arg, Columns, Database, Executor, Keyset, Row, Session, Tx};
use super::{Backend, BaseDialect, CommitFeed, StoreResult};
use crate::domain::event::{NewEvent, StoredEvent};
use crate::domain::Millis;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

pub struct PgStore {
    pool: PgPool,
    /// Sends, group-committed (ADR 0013). Other writes run concurrently.
    sends: SendCommit,
    /// Verdicts of gated messages, group-committed.
    verdicts: VerdictCommit,
    feed: CommitFeed,
    /// Where `sends` and `verdicts` write. Dropped, it closes its pools
    /// (a group being written finishes first) and stops its thread.
    _writer: writer_runtime::WriterRuntime,
}

impl PgStore {
    pub async fn connect(
        url: &str,
        max_connections: u32,
        ping_idle_after: std::time::Duration,
    ) -> StoreResult<Self> {
        let pool = pool_options(max_connections, ping_idle_after)
            .connect(url)
            .await?;
        let writer = writer_runtime::WriterRuntime::start().map_err(sqlx::Error::Io)?;
        let writer_pool = writer
            .pool(
                url,
                pool_options(writer_runtime::WRITER_CONNECTIONS, ping_idle_after),
            )
            .await?;
        let feed = CommitFeed::default();
        let (sends, verdicts) =
            conversations::group_commits(writer_pool, feed.clone(), writer.handle());
        Ok(PgStore {
            feed,
            sends,
            verdicts,
            pool,
            _writer: writer,
        })
    }
}

/// sqlx pings a connection before every use by default: a round trip in
/// front of every statement's. Only one that sat idle is pinged here (a
/// restart or a proxy's idle timeout drops those); one used within
/// `ping_idle_after` is known to be alive, and should it have died since,
/// the statement fails and the pool drops the connection.
fn pool_options(max_connections: u32, ping_idle_after: std::time::Duration) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .test_before_acquire(false)
        .before_acquire(move |conn, meta| {
            Box::pin(async move {
                if meta.idle_for >= ping_idle_after {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
}

#[async_trait]
impl Database for PgStore {
    async fn read(&self) -> StoreResult<Box<dyn Executor>> {
        Ok(Box::new(Session::new(self.pool.acquire().await?, None)))
    }

    /// Row locks and `FOR UPDATE` order PostgreSQL's writers; no lock here.
    async fn write(&self) -> StoreResult<Box<dyn Executor>> {
        self.read().await
    }

    async fn begin(&self) -> StoreResult<Tx> {
        Ok(Tx::new(Session::new(self.pool.begin().await?, None)))
    }
}

impl Keyset for PgStore {
    /// As before: there is no uuid below every id to start from.
    fn after(column: &str, param: usize) -> String {
        format!("(${param} IS NULL OR {column} > ${param})")
    }
}

#[async_trait]
impl BaseDialect for PgStore {
    const BACKEND: Backend = Backend::Postgres;

    fn commit_feed(&self) -> &CommitFeed {
        &self.feed
    }

    async fn run_migrations(&self) -> StoreResult<()> {
        MIGRATOR.run(&self.pool).await?;
        Ok(())
    }
}

const JSONB: Oid = Oid(3802);

/// JSON text bound as `jsonb`: the bytes the `$n::jsonb` cast of the text
/// received before, in jsonb's binary form (a version byte, then the text).
struct JsonbText<'a>(&'a str);

impl sqlx::Type<Postgres> for JsonbText<'_> {
    fn type_info() -> PgTypeInfo {
        PgTypeInfo::with_oid(JSONB)
    }
}

impl<'q> sqlx::Encode<'q, Postgres> for JsonbText<'_> {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        buf.push(1);
        buf.extend_from_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }
}

/// A `json`/`jsonb` column read as its text, as the `::text` cast gave it.
struct JsonOut(String);

impl sqlx::Type<Postgres> for JsonOut {
    fn type_info() -> PgTypeInfo {
        PgTypeInfo::with_oid(JSONB)
    }

    fn compatible(ty: &PgTypeInfo) -> bool {
        matches!(ty.name(), "JSONB" | "JSON")
    }
}

impl<'r> sqlx::Decode<'r, Postgres> for JsonOut {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        let versioned =
            value.format() == PgValueFormat::Binary && value.type_info().name() == "JSONB";
        let bytes = value.as_bytes()?;
        let text = match (versioned, bytes.split_first()) {
            (false, _) => bytes,
            (true, Some((1, rest))) => rest,
            (true, _) => return Err("unsupported jsonb format version".into()),
        };
        Ok(JsonOut(std::str::from_utf8(text)?.to_owned()))
    }
}

/// Binds our arguments the PostgreSQL way: native uuid, JSON as jsonb.
fn query<'q>(sql: &'q str, args: &'q [Arg<'q>]) -> Query<'q, Postgres, PgArguments> {
    args.iter().fold(sqlx::query(sql), |q, arg| match *arg {
        Arg::Id(id) => q.bind(id),
        Arg::OptId(id) => q.bind(id),
        Arg::Text(s) => q.bind(s),
        Arg::OptText(s) => q.bind(s),
        Arg::Int(i) => q.bind(i),
        Arg::OptInt(i) => q.bind(i),
        Arg::Bool(b) => q.bind(b),
        Arg::Json(s) => q.bind(JsonbText(s)),
        Arg::Bytes(b) => q.bind(b),
    })
}

connection_executor!(PgConnection, Row::Postgres);

impl Columns for PgRow {
    fn id(&self, col: &str) -> StoreResult<Uuid> {
        Ok(self.try_get(col)?)
    }

    fn opt_id(&self, col: &str) -> StoreResult<Option<Uuid>> {
        Ok(self.try_get(col)?)
    }

    fn text(&self, col: &str) -> StoreResult<String> {
        Ok(self.try_get(col)?)
    }

    fn opt_text(&self, col: &str) -> StoreResult<Option<String>> {
        Ok(self.try_get(col)?)
    }

    /// `bigint` mostly; `integer` columns (an idempotency record's status)
    /// widen.
    fn int(&self, col: &str) -> StoreResult<i64> {
        self.opt_int(col)?
            .ok_or_else(|| sqlx::Error::ColumnDecode {
                index: col.to_string(),
                source: "unexpected null".into(),
            })
            .map_err(Into::into)
    }

    fn opt_int(&self, col: &str) -> StoreResult<Option<i64>> {
        match self.try_get::<Option<i64>, _>(col) {
            Ok(v) => Ok(v),
            Err(e) => match self.try_get::<Option<i32>, _>(col) {
                Ok(v) => Ok(v.map(i64::from)),
                Err(_) => Err(e.into()),
            },
        }
    }

    fn json(&self, col: &str) -> StoreResult<String> {
        Ok(self.try_get::<JsonOut, _>(col)?.0)
    }

    fn bytes(&self, col: &str) -> StoreResult<Vec<u8>> {
        Ok(self.try_get(col)?)
    }
}
