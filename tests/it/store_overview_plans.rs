//! The console's overview reads walk indexes, not whole tables (migration
//! 0018, ADR 0030): each statement's plan, asked of SQLite
//! (`EXPLAIN QUERY PLAN`) and of a throwaway PostgreSQL (`EXPLAIN` with
//! sequential scans priced out, so a plan still scanning means no index
//! serves it), names an index on `tasks` and `leases`.

use sqlx::{Connection, Row};
use switchboard::config::Config;
use switchboard::store::overview_statements::{
    EVENT_BACKLOG, LEASES_BY_STATE, LIVE_LEASES, TASKS_BY_STATE, WAITING_TASKS,
};

use crate::support::pg;

/// Statement, the table it reads, and the index it must use.
const INDEXED: [(&str, &str, &str); 4] = [
    (TASKS_BY_STATE, "tasks", "tasks_by_state"),
    (WAITING_TASKS, "tasks", "tasks_by_state"),
    (LEASES_BY_STATE, "leases", "leases_live_by_age"),
    (LIVE_LEASES, "leases", "leases_live_by_age"),
];

#[tokio::test]
async fn the_overview_reads_indexes_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.server.data_dir = dir.path().to_path_buf();
    drop(switchboard::store::open(&config).await.unwrap());
    let url = format!("sqlite://{}", dir.path().join("switchboard.db").display());
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    for (sql, table, index) in INDEXED {
        let plan = sqlite_plan(&mut conn, sql).await;
        let on_table: Vec<&String> = plan
            .iter()
            .filter(|d| d.contains(&format!(" {table} ")) || d.ends_with(&format!(" {table}")))
            .collect();
        assert!(!on_table.is_empty(), "{sql}: {plan:?}");
        assert!(
            on_table.iter().all(|d| d.contains("INDEX")),
            "{sql} scans {table}: {plan:?}"
        );
        assert!(
            on_table.iter().any(|d| d.contains(index)),
            "{sql} should use {index}: {plan:?}"
        );
    }
    let plan = sqlite_plan(&mut conn, EVENT_BACKLOG).await;
    assert!(
        plan.iter()
            .filter(|d| d.contains("event_index"))
            .all(|d| d.contains("PRIMARY KEY") || d.contains("INDEX")),
        "the first unread seq is a key lookup: {plan:?}"
    );
}

async fn sqlite_plan(conn: &mut sqlx::SqliteConnection, sql: &str) -> Vec<String> {
    sqlx::query(&format!("EXPLAIN QUERY PLAN {sql}"))
        .bind(10i64)
        .fetch_all(conn)
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<String, _>("detail"))
        .collect()
}

#[tokio::test]
async fn the_overview_reads_indexes_on_postgres() {
    let mut config = Config::default();
    config.storage.database_url = pg::fresh_database().await;
    drop(switchboard::store::open(&config).await.unwrap());
    let mut conn = sqlx::PgConnection::connect(&config.storage.database_url)
        .await
        .unwrap();
    sqlx::query("SET enable_seqscan = off")
        .execute(&mut conn)
        .await
        .unwrap();
    for (sql, table, index) in INDEXED {
        let explain = format!("EXPLAIN {sql}");
        let query = sqlx::query(&explain);
        let query = if sql.contains("$1") {
            query.bind(10i64)
        } else {
            query
        };
        let plan: Vec<String> = query
            .fetch_all(&mut conn)
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<String, _>(0))
            .collect();
        let text = plan.join("\n");
        assert!(
            !text.contains(&format!("Seq Scan on {table}")),
            "{sql} scans {table}:\n{text}"
        );
        assert!(text.contains(index), "{sql} should use {index}:\n{text}");
    }
}
