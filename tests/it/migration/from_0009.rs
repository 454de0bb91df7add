//! Issue 15's migration test: a database at schema 0009 with an app (and
//! its task, conversation and messages) is opened by a real hub, which
//! applies migration 0010: every old row stays as it was, the app gets its
//! active installation granted `events:subscribe` (id = the app's id),
//! still reads its task over its socket, and the new constraints hold: one
//! live installation per app, only an app's, only the three states.

use uuid::Uuid;

use super::from_0008::{check_rows_unchanged, check_sqlite_pragmas, check_task, snapshot};
use super::schema_0008::write_0008;
use super::SCHEMA_BEFORE as SCHEMA_0007;
use crate::support::hub::Options;
use crate::support::legacy_db::{LegacyDb, Val};
use crate::support::{pg, TestHub};

const SCHEMA_BEFORE: u32 = 9;

/// The installation rows, as `id app state requested granted` text.
async fn installations(db: &LegacyDb) -> Vec<String> {
    let sql = "SELECT CAST(id AS TEXT) || ' ' || CAST(app_id AS TEXT) || ' ' || state || ' ' || \
               requested_scopes || ' ' || granted_scopes AS t FROM installations ORDER BY t";
    db.texts(sql, sql, None).await
}

/// What 0010 refuses: a second live row of an app, a row of no app, a
/// state that is none; and what it takes: an uninstalled row beside a live one.
async fn check_constraints(db: &LegacyDb, app: Uuid) {
    let insert = "INSERT INTO installations (id, app_id, state, requested_scopes, granted_scopes, created_at, updated_at) \
                  VALUES ($1, $2, $3, '', '', 1, 1)";
    let row = |app: Uuid, state: &str| {
        vec![
            Val::Id(Uuid::now_v7()),
            Val::Id(app),
            Val::Text(state.into()),
        ]
    };
    for (args, what) in [
        (row(app, "active"), "a second live row"),
        (row(app, "suspended"), "a second live row, suspended"),
        (row(Uuid::now_v7(), "active"), "a row of no app"),
        (row(app, "pending"), "a state that is none"),
    ] {
        assert!(db.try_exec(insert, &args).await.is_err(), "{what}");
    }
    db.exec(insert, &row(app, "uninstalled")).await;
    let audit = "SELECT CAST(COUNT(*) AS TEXT) AS t FROM audit_actions";
    assert_eq!(db.texts(audit, audit, None).await, ["0"]);
}

/// Starts a hub on the 0009 database (it applies 0010), then checks the
/// rows, the backfill, the app's reads and the constraints.
async fn across_the_installation_migration(
    db: LegacyDb,
    options: Options,
    reopen: impl AsyncFnOnce() -> LegacyDb,
) {
    let (before, after) = write_0008(&db).await;
    // 0009 rebuilds SQLite tables, as the hub's migrator runs it: without
    // foreign-key enforcement (the legacy pool is one connection).
    let sqlite = matches!(db, LegacyDb::Sqlite(_));
    if sqlite {
        db.exec("PRAGMA foreign_keys = OFF", &[]).await;
    }
    db.migrate_to(SCHEMA_BEFORE).await;
    if sqlite {
        db.exec("PRAGMA foreign_keys = ON", &[]).await;
    }
    let old = snapshot(&db).await;
    assert!(!db.tables().await.contains(&"installations".to_string()));
    db.close().await;
    let hub = TestHub::start_with(options).await;
    let db = reopen().await;
    check_rows_unchanged(&db, &old).await;
    if let LegacyDb::Sqlite(_) = db {
        check_sqlite_pragmas(&db).await;
    }
    let app = after.app.id;
    assert_eq!(
        installations(&db).await,
        [format!(
            "{app} {app} active events:subscribe events:subscribe"
        )]
    );
    check_task(&hub, &before, &after).await;
    check_constraints(&db, app).await;
    db.close().await;
}

#[tokio::test]
async fn a_sqlite_database_of_schema_0009_installs_every_app_across_the_migration() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switchboard.db");
    let db = LegacyDb::sqlite(&path, SCHEMA_0007).await;
    let options = Options {
        dir: Some(dir.path().to_path_buf()),
        ..TestHub::fast_options()
    };
    across_the_installation_migration(db, options, || LegacyDb::open_sqlite(&path)).await;
}

#[tokio::test]
async fn a_postgres_database_of_schema_0009_installs_every_app_across_the_migration() {
    let url = pg::fresh_database().await;
    let db = LegacyDb::postgres(&url, SCHEMA_0007).await;
    let options = Options {
        database_url: Some(url.clone()),
        ..TestHub::fast_options()
    };
    across_the_installation_migration(db, options, || LegacyDb::open_postgres(&url)).await;
}
