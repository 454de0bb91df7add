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
        let db = LegacyDb::open_sqlite(path).await;
        db.migrate_to(version).await;
        db
    }

    /// The empty PostgreSQL database at `url`, migrated to `version`.
    pub async fn postgres(url: &str, version: u32) -> LegacyDb {
        let db = LegacyDb::open_postgres(url).await;
        db.migrate_to(version).await;
        db
    }

    /// The SQLite file at `path` as it is (created if missing), enforcing
    /// foreign keys as the hub's pooled connections do.
    pub async fn open_sqlite(path: &Path) -> LegacyDb {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .expect("open SQLite");
        LegacyDb::Sqlite(pool)
    }

    /// The PostgreSQL database at `url` as it is.
    pub async fn open_postgres(url: &str) -> LegacyDb {
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .connect(url)
            .await
            .expect("connect PostgreSQL");
        LegacyDb::Postgres(pool)
    }

    /// Applies the crate's migrations numbered up to `version` that this
    /// database has not applied yet.
    pub async fn migrate_to(&self, version: u32) {
        let dialect = match self {
            LegacyDb::Sqlite(_) => "sqlite",
            LegacyDb::Postgres(_) => "postgres",
        };
        let dir = migrations_up_to(dialect, version);
        let migrator = sqlx::migrate::Migrator::new(dir.path()).await.unwrap();
        match self {
            LegacyDb::Sqlite(pool) => migrator.run(pool).await,
            LegacyDb::Postgres(pool) => migrator.run(pool).await,
        }
        .unwrap_or_else(|e| panic!("migrate {dialect} to {version}: {e}"));
    }

    /// The tables the migrations made, by name (not the migrator's own).
    pub async fn tables(&self) -> Vec<String> {
        self.texts(
            "SELECT name AS t FROM sqlite_master WHERE type = 'table' \
             AND name NOT LIKE '\\_sqlx%' ESCAPE '\\' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
            "SELECT CAST(table_name AS TEXT) AS t FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_name NOT LIKE '\\_sqlx%' ORDER BY table_name",
            None,
        )
        .await
    }

    /// A table's columns, in their order.
    pub async fn columns(&self, table: &str) -> Vec<String> {
        self.texts(
            "SELECT name AS t FROM pragma_table_info($1) ORDER BY cid",
            "SELECT CAST(column_name AS TEXT) AS t FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
            Some(table),
        )
        .await
    }

    /// Every row of `table`, its `columns` as one JSON array of their
    /// stored values as text (SQLite's `quote`, PostgreSQL's text cast), in
    /// one sorted order: what a migration must leave unchanged.
    pub async fn rows(&self, table: &str, columns: &[String]) -> Vec<String> {
        let quoted =
            |f: &dyn Fn(&String) -> String| columns.iter().map(f).collect::<Vec<_>>().join(", ");
        let sqlite = format!(
            "SELECT json_array({}) AS t FROM \"{table}\" ORDER BY t",
            quoted(&|c| format!("quote(\"{c}\")"))
        );
        let postgres = format!(
            "SELECT CAST(json_build_array({}) AS TEXT) AS t FROM \"{table}\" ORDER BY t",
            quoted(&|c| format!("CAST(\"{c}\" AS TEXT)"))
        );
        self.texts(&sqlite, &postgres, None).await
    }

    /// The one text column `t` of each row `sql` (by dialect) answers.
    pub async fn texts(&self, sqlite: &str, postgres: &str, arg: Option<&str>) -> Vec<String> {
        use sqlx::Row as _;
        match self {
            LegacyDb::Sqlite(pool) => {
                let q = arg.into_iter().fold(sqlx::query(sqlite), |q, a| q.bind(a));
                let rows = q
                    .fetch_all(pool)
                    .await
                    .unwrap_or_else(|e| panic!("{sqlite}: {e}"));
                rows.iter().map(|r| r.get::<String, _>("t")).collect()
            }
            LegacyDb::Postgres(pool) => {
                let q = arg
                    .into_iter()
                    .fold(sqlx::query(postgres), |q, a| q.bind(a));
                let rows = q
                    .fetch_all(pool)
                    .await
                    .unwrap_or_else(|e| panic!("{postgres}: {e}"));
                rows.iter().map(|r| r.get::<String, _>("t")).collect()
            }
        }
    }

    /// Runs one statement, answering the database's refusal as text.
    pub async fn try_exec(&self, sql: &str, args: &[Val]) -> Result<(), String> {
        match self {
            LegacyDb::Sqlite(pool) => bind_sqlite(sql, args).execute(pool).await.map(|_| ()),
            LegacyDb::Postgres(pool) => {
                let sql = cast_json_placeholders(sql, args);
                bind_postgres(&sql, args).execute(pool).await.map(|_| ())
            }
        }
        .map_err(|e| e.to_string())
    }

    /// Runs one statement with `$1, $2, ...` placeholders.
    pub async fn exec(&self, sql: &str, args: &[Val]) {
        self.try_exec(sql, args)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// Closes the pool, so the hub is the only one holding the database.
    pub async fn close(self) {
        match self {
            LegacyDb::Sqlite(pool) => pool.close().await,
            LegacyDb::Postgres(pool) => pool.close().await,
        }
    }
}

type SqliteQuery<'q> = sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments<'q>>;
type PgQuery<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

fn bind_sqlite<'q>(sql: &'q str, args: &[Val]) -> SqliteQuery<'q> {
    args.iter().fold(sqlx::query(sql), |q, a| match a {
        Val::Id(id) => q.bind(id.to_string()),
        Val::OptId(id) => q.bind(id.map(|id| id.to_string())),
        Val::Text(s) | Val::Json(s) => q.bind(s.clone()),
        Val::OptText(s) => q.bind(s.clone()),
        Val::Int(i) => q.bind(*i),
        Val::Bytes(b) => q.bind(b.clone()),
    })
}

fn bind_postgres<'q>(sql: &'q str, args: &[Val]) -> PgQuery<'q> {
    args.iter().fold(sqlx::query(sql), |q, a| match a {
        Val::Id(id) => q.bind(*id),
        Val::OptId(id) => q.bind(*id),
        Val::Text(s) | Val::Json(s) => q.bind(s.clone()),
        Val::OptText(s) => q.bind(s.clone()),
        Val::Int(i) => q.bind(*i),
        Val::Bytes(b) => q.bind(b.clone()),
    })
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
