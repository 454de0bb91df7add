//! A database at an older schema version, written row by row the way that
//! version's code wrote it, for migration tests: run only the first
//! migrations (copies of the crate's own files, so the checksums sqlx records
//! are the ones the hub's embedded migrator expects), then insert rows with
//! values bound in each backend's stored form.

use std::path::Path;

use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::{PgPool, SqlitePool};
use tempfile::TempDir;
use uuid::Uuid;

/// One bound value, named by what it is; bound as the crate's stores bind
/// it (ids as text on SQLite and `uuid` on PostgreSQL, JSON as text or
/// `jsonb`).
#[derive(Clone, Debug)]
pub enum Val {
    Id(Uuid),
    OptId(Option<Uuid>),
    Text(String),
    OptText(Option<String>),
    Int(i64),
    /// Serialized JSON for a JSON column.
    Json(String),
    Bytes(Vec<u8>),
}

pub enum LegacyDb {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// The migration files of `dialect` numbered up to `version`, copied into
/// a temporary directory a `Migrator` can read.
fn migrations_up_to(dialect: &str, version: u32) -> TempDir {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(dialect);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut copied = 0;
    for entry in std::fs::read_dir(&source).expect("migrations directory") {
        let path = entry.expect("entry").path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let number: u32 = name.split('_').next().unwrap().parse().expect("numbered");
        if number <= version {
            std::fs::copy(&path, dir.path().join(&name)).expect("copy migration");
            copied += 1;
        }
    }
    assert_eq!(copied, version, "migrations 1..={version} of {dialect}");
    dir
}

impl LegacyDb {
    /// A new SQLite file at `path`, migrated to `version`.
    pub async fn sqlite(path: &Path, version: u32) -> LegacyDb {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .expect("open SQLite");
        let dir = migrations_up_to("sqlite", version);
        let migrator = sqlx::migrate::Migrator::new(dir.path()).await.unwrap();
        migrator.run(&pool).await.expect("migrate SQLite");
        LegacyDb::Sqlite(pool)
    }

    /// The empty PostgreSQL database at `url`, migrated to `version`.
    pub async fn postgres(url: &str, version: u32) -> LegacyDb {
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .connect(url)
            .await
            .expect("connect PostgreSQL");
        let dir = migrations_up_to("postgres", version);
        let migrator = sqlx::migrate::Migrator::new(dir.path()).await.unwrap();
        migrator.run(&pool).await.expect("migrate PostgreSQL");
        LegacyDb::Postgres(pool)
    }

    /// Runs one statement with `$1, $2, ...` placeholders.
    pub async fn exec(&self, sql: &str, args: &[Val]) {
        let done = match self {
            LegacyDb::Sqlite(pool) => {
                let q = args.iter().fold(sqlx::query(sql), |q, a| match a {
                    Val::Id(id) => q.bind(id.to_string()),
                    Val::OptId(id) => q.bind(id.map(|id| id.to_string())),
                    Val::Text(s) | Val::Json(s) => q.bind(s.clone()),
                    Val::OptText(s) => q.bind(s.clone()),
                    Val::Int(i) => q.bind(*i),
                    Val::Bytes(b) => q.bind(b.clone()),
                });
                q.execute(pool).await.map(|_| ())
            }
            LegacyDb::Postgres(pool) => {
                let sql = cast_json_placeholders(sql, args);
                let q = args.iter().fold(sqlx::query(&sql), |q, a| match a {
                    Val::Id(id) => q.bind(*id),
                    Val::OptId(id) => q.bind(*id),
                    Val::Text(s) | Val::Json(s) => q.bind(s.clone()),
                    Val::OptText(s) => q.bind(s.clone()),
                    Val::Int(i) => q.bind(*i),
                    Val::Bytes(b) => q.bind(b.clone()),
                });
                q.execute(pool).await.map(|_| ())
            }
        };
        done.unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// Closes the pool, so the hub is the only one holding the database.
    pub async fn close(self) {
        match self {
            LegacyDb::Sqlite(pool) => pool.close().await,
            LegacyDb::Postgres(pool) => pool.close().await,
        }
    }
}

/// `$n` of a JSON value becomes `CAST($n AS jsonb)`: the driver sends
/// strings as `text`, which a `jsonb` column does not take.
fn cast_json_placeholders(sql: &str, args: &[Val]) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        let mut digits = String::new();
        while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            digits.push(*d);
            chars.next();
        }
        match digits.parse::<usize>() {
            Ok(n) if n > 0 && matches!(args.get(n - 1), Some(Val::Json(_))) => {
                out.push_str(&format!("CAST(${n} AS jsonb)"))
            }
            _ => {
                out.push('$');
                out.push_str(&digits);
            }
        }
    }
    out
}
