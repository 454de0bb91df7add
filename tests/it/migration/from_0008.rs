//! Issue 14's migration test: a database at schema 0008 (agents, an app, a
//! task, direct, group and task conversations, messages with and without
//! recipient rows, leases and events) is opened by a real hub, which
//! applies migration 0009; SQLite rebuilds `principals` and
//! `conversations` on the way. Every old row of every table is stored as
//! before, foreign keys and integrity hold, the hub reads the old history,
//! events and task as before, and the widened constraints take the new
//! kinds and refuse what they should.

use serde_json::{json, Value};
use uuid::Uuid;

use super::schema_0007::{Before, PRUNED_THROUGH};
use super::schema_0008::{write_0008, After0008, SCHEMA_BEFORE};
use super::{caller, check_history, check_rest, resume, SCHEMA_BEFORE as SCHEMA_0007};
use crate::support::hub::Options;
use crate::support::legacy_db::{LegacyDb, Val};
use crate::support::{pg, RawSocket, TestHub};

/// Every table with its columns and rows, as [`LegacyDb::rows`] renders them.
pub(super) type Snapshot = Vec<(String, Vec<String>, Vec<String>)>;

pub(super) async fn snapshot(db: &LegacyDb) -> Snapshot {
    let mut tables = Vec::new();
    for table in db.tables().await {
        let columns = db.columns(&table).await;
        let rows = db.rows(&table, &columns).await;
        tables.push((table, columns, rows));
    }
    tables
}

/// After the migration every old table is there with its old columns,
/// and its rows read through them are the old rows, none more or fewer.
pub(super) async fn check_rows_unchanged(db: &LegacyDb, before: &Snapshot) {
    let tables = db.tables().await;
    for (table, columns, rows) in before {
        assert!(tables.contains(table), "table {table} is gone");
        let now = db.columns(table).await;
        for c in columns {
            assert!(now.contains(c), "{table}.{c} is gone");
        }
        assert_eq!(&db.rows(table, columns).await, rows, "rows of {table}");
    }
    let populated = ["principals", "conversations", "messages", "leases", "tasks"];
    for table in populated {
        let (_, _, rows) = before.iter().find(|(t, _, _)| t == table).unwrap();
        assert!(!rows.is_empty(), "the old database has {table} rows");
    }
}

/// SQLite's own checks, on a connection of the migrated file.
pub(super) async fn check_sqlite_pragmas(db: &LegacyDb) {
    let dangling = db
        .texts(
            "SELECT \"table\" || ' -> ' || parent AS t FROM pragma_foreign_key_check",
            "",
            None,
        )
        .await;
    assert!(dangling.is_empty(), "foreign_key_check: {dangling:?}");
    let integrity = db
        .texts(
            "SELECT integrity_check AS t FROM pragma_integrity_check",
            "",
            None,
        )
        .await;
    assert_eq!(integrity, vec!["ok".to_string()]);
}

/// The task, its conversation and its messages read back through the hub
/// as the 0008 code wrote them, to its agents and to its app.
pub(super) async fn check_task(hub: &TestHub, before: &Before, after: &After0008) {
    let task = serde_json::to_value(&after.task).unwrap();
    let messages = serde_json::to_value(&after.messages).unwrap();
    for who in &before.members[..2] {
        let mut s = caller(hub, before, who).await;
        let get = json!({"taskId": after.task.id});
        let r = s.call(json!("t"), "agent/task/get", get).await;
        assert_eq!(r["result"], json!({"task": task}), "{r}");
        let list = json!({"conversationId": after.conversation.id, "limit": 100});
        let r = s.call(json!("l"), "agent/message/list", list).await;
        assert_eq!(r["result"]["messages"], messages, "{r}");
    }
    let mut app = RawSocket::connect_app(&hub.ws_url(), &after.app.key).await;
    let get = json!({"taskId": after.task.id});
    let r = app.call(json!("t"), "app/task/get", get).await;
    assert_eq!(
        r["result"],
        json!({"task": task, "conversations": [after.conversation]}),
        "{r}"
    );
}

/// The direct conversation of schema 0007 reads as it was.
async fn check_direct(hub: &TestHub, before: &Before) {
    let mut s = caller(hub, before, &before.outsider).await;
    let get = json!({"conversationId": before.direct});
    let r = s.call(json!("d"), "agent/conversation/get", get).await;
    let c = &r["result"]["conversation"];
    assert_eq!(c["kind"], json!("direct"), "{r}");
    let mut participants: Vec<Value> = c["participants"].as_array().unwrap().clone();
    participants.sort_by_key(|p| p.as_str().unwrap().to_string());
    let mut expected = vec![json!(before.members[0].id), json!(before.outsider.id)];
    expected.sort_by_key(|p| p.as_str().unwrap().to_string());
    assert_eq!(participants, expected, "{r}");
}

/// What migration 0009 adds to the constraints: the new kinds, an owner
/// only on agents and only a principal, a channel only with a space and
/// unique by name in it, a thread root only an existing message; and what
/// the rebuild had to keep: a unique direct key, the closed kind set.
async fn check_constraints(db: &LegacyDb, before: &Before, after: &After0008) {
    let person = Uuid::now_v7();
    let insert_principal =
        "INSERT INTO principals (id, kind, name, created_at) VALUES ($1, $2, 'p', 1)";
    db.exec(
        insert_principal,
        &[Val::Id(person), Val::Text("person".into())],
    )
    .await;
    let robot = db
        .try_exec(
            insert_principal,
            &[Val::Id(Uuid::now_v7()), Val::Text("robot".into())],
        )
        .await;
    assert!(robot.is_err(), "kind robot was stored");
    let set_owner = "UPDATE principals SET owner_id = $1 WHERE id = $2";
    db.exec(set_owner, &[Val::Id(person), Val::Id(before.members[0].id)])
        .await;
    for (owner, of, what) in [
        (person, after.app.id, "an app's owner"),
        (Uuid::now_v7(), before.members[1].id, "an unknown owner"),
    ] {
        let r = db.try_exec(set_owner, &[Val::Id(owner), Val::Id(of)]).await;
        assert!(r.is_err(), "{what} was stored");
    }
    let space = Uuid::now_v7();
    db.exec(
        "INSERT INTO spaces (id, name, created_at) VALUES ($1, 'support', 1)",
        &[Val::Id(space)],
    )
    .await;
    let channel = "INSERT INTO conversations (id, kind, name, created_by, created_at, space_id) \
                   VALUES ($1, $2, 'general', $3, 1, $4)";
    let args = |kind: &str, space: Option<Uuid>| {
        vec![
            Val::Id(Uuid::now_v7()),
            Val::Text(kind.into()),
            Val::Id(person),
            Val::OptId(space),
        ]
    };
    db.exec(channel, &args("channel", Some(space))).await;
    for (kind, space, what) in [
        ("channel", Some(space), "a second general in the space"),
        ("channel", None, "a channel without a space"),
        ("group", Some(space), "a group in a space"),
        ("forum", None, "kind forum"),
    ] {
        let r = db.try_exec(channel, &args(kind, space)).await;
        assert!(r.is_err(), "{what} was stored");
    }
    let direct = db
        .try_exec(
            "INSERT INTO conversations (id, kind, direct_key, created_by, created_at) \
             SELECT $1, 'direct', direct_key, created_by, 1 FROM conversations WHERE id = $2",
            &[Val::Id(Uuid::now_v7()), Val::Id(before.direct)],
        )
        .await;
    assert!(direct.is_err(), "a second direct conversation of one pair");
    let thread = db
        .try_exec(
            "UPDATE messages SET thread_id = $1 WHERE id = $2",
            &[Val::Id(Uuid::now_v7()), Val::Id(after.messages[1].id)],
        )
        .await;
    assert!(thread.is_err(), "a thread of no message");
}

/// Starts a hub on the 0008 database (it applies 0009), then checks the
/// rows, the reads through the hub and the constraints.
async fn across_the_people_migration(
    db: LegacyDb,
    options: Options,
    reopen: impl AsyncFnOnce() -> LegacyDb,
) {
    let (before, after) = write_0008(&db).await;
    let old = snapshot(&db).await;
    db.close().await;
    let hub = TestHub::start_with(options).await;
    let db = reopen().await;
    check_rows_unchanged(&db, &old).await;
    if let LegacyDb::Sqlite(_) = db {
        check_sqlite_pragmas(&db).await;
    }
    check_rest(&hub, &before).await;
    let [creator, acker, pruned] = &before.members[..] else {
        unreachable!()
    };
    for (who, after) in [
        (creator, None),
        (acker, None),
        (pruned, Some(PRUNED_THROUGH)),
        (&before.outsider, Some(1)),
    ] {
        resume(&hub, &before, who, after).await;
    }
    check_history(&hub, &before, &[]).await;
    check_task(&hub, &before, &after).await;
    check_direct(&hub, &before).await;
    check_constraints(&db, &before, &after).await;
    db.close().await;
}

#[tokio::test]
async fn a_sqlite_database_of_schema_0008_keeps_every_row_across_the_people_migration() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switchboard.db");
    let db = LegacyDb::sqlite(&path, SCHEMA_0007).await;
    let options = Options {
        dir: Some(dir.path().to_path_buf()),
        ..TestHub::fast_options()
    };
    across_the_people_migration(db, options, || LegacyDb::open_sqlite(&path)).await;
}

#[tokio::test]
async fn a_postgres_database_of_schema_0008_keeps_every_row_across_the_people_migration() {
    let url = pg::fresh_database().await;
    let db = LegacyDb::postgres(&url, SCHEMA_0007).await;
    let options = Options {
        database_url: Some(url.clone()),
        ..TestHub::fast_options()
    };
    across_the_people_migration(db, options, || LegacyDb::open_postgres(&url)).await;
}

/// A row whose parent is missing (written with enforcement off, as the
/// rebuild runs) stops the start, naming its table, before anything is
/// migrated, instead of serving a database whose foreign keys do not hold.
#[tokio::test]
async fn a_dangling_foreign_key_stops_the_start_naming_its_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = LegacyDb::sqlite(&dir.path().join("switchboard.db"), SCHEMA_BEFORE).await;
    // One connection in the pool: the pragma holds for the insert.
    db.exec("PRAGMA foreign_keys = OFF", &[]).await;
    db.exec(
        "INSERT INTO conversation_participants (conversation_id, principal_id, joined_at) VALUES ($1, $2, 1)",
        &[Val::Id(Uuid::now_v7()), Val::Id(Uuid::now_v7())],
    )
    .await;
    db.close().await;
    let serve = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), serve)
        .await
        .expect("serve kept running on a database with a dangling foreign key")
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("table conversation_participants")
            && stderr.contains("foreign_key_check")
            && stderr.contains("nothing was migrated"),
        "{stderr}"
    );
    // Refused before migrating: still at 0008, as the old binary left it.
    let db = LegacyDb::open_sqlite(&dir.path().join("switchboard.db")).await;
    let version = db
        .texts(
            "SELECT CAST(MAX(version) AS TEXT) AS t FROM _sqlx_migrations",
            "",
            None,
        )
        .await;
    assert_eq!(version, [SCHEMA_BEFORE.to_string()]);
    assert!(!db.tables().await.contains(&"spaces".to_string()));
    db.close().await;
}
