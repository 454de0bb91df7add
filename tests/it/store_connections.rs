//! The PostgreSQL pool's ping policy (ADR 0037): a pooled connection is
//! pinged only once it has sat idle for `storage.postgres_ping_idle_after_ms`,
//! so one the server dropped while it was idle (a restart, a proxy's idle
//! timeout) is replaced before a statement runs on it, in the hub's pool and
//! in the writer runtime's pool of the group commits alike.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use sqlx::{Connection, Row};
use switchboard::client::AgentClient;

use crate::support::agents::{agent, direct, expect_sequence, send};
use crate::support::{pg, TestHub};

const PING_IDLE_AFTER: Duration = Duration::from_millis(300);

/// Ends every backend of `database` but the caller's, as a server restart
/// would; returns the ended backends' pids. (The pids are read first: in one
/// statement PostgreSQL may call `pg_terminate_backend` before it filters.)
async fn drop_connections(conn: &mut sqlx::PgConnection, database: &str) -> HashSet<i32> {
    let pids = backends(conn, database).await;
    let ended: Vec<bool> =
        sqlx::query_scalar("SELECT pg_terminate_backend(pid) FROM unnest($1::int4[]) AS pid")
            .bind(pids.iter().copied().collect::<Vec<i32>>())
            .fetch_all(&mut *conn)
            .await
            .unwrap();
    assert!(ended.iter().all(|e| *e), "{pids:?} {ended:?}");
    pids
}

async fn backends(conn: &mut sqlx::PgConnection, database: &str) -> HashSet<i32> {
    sqlx::query("SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()")
        .bind(database)
        .fetch_all(&mut *conn)
        .await
        .unwrap()
        .iter()
        .map(|row| row.get::<i32, _>("pid"))
        .collect()
}

#[tokio::test]
async fn postgres_connections_dropped_while_idle_are_replaced_before_use() {
    let url = pg::fresh_database().await;
    let database = url.rsplit('/').next().unwrap().to_string();
    let mut options = TestHub::fast_options().env(
        "SWITCHBOARD_STORAGE__POSTGRES_PING_IDLE_AFTER_MS",
        PING_IDLE_AFTER.as_millis(),
    );
    options.database_url = Some(url.clone());
    let hub = TestHub::start_with(options).await;
    let a = agent(&hub, "a").await;
    let b = agent(&hub, "b").await;
    let ca = AgentClient::connect(&hub.base, &a.key).await.unwrap();
    let cb = AgentClient::connect(&hub.base, &b.key).await.unwrap();
    let mut rx = cb.connection.notifications().unwrap();
    let conversation = direct(&ca, b.id).await;
    assert_eq!(send(&ca, conversation, "before").await.message.seq, 1);
    expect_sequence(&mut rx, 0, 2).await;

    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
    let dropped = drop_connections(&mut admin, &database).await;
    assert!(
        dropped.len() >= 2,
        "the hub's pool and its writer's pool hold connections: {dropped:?}"
    );
    // Every connection the hub holds has now been idle since before the drop;
    // past the threshold each is pinged, found dead and replaced on its next
    // use, which must then succeed at once.
    tokio::time::sleep_until((Instant::now() + PING_IDLE_AFTER).into()).await;

    let sent = send(&ca, conversation, "after").await;
    assert_eq!(sent.message.seq, 2);
    let got = expect_sequence(&mut rx, 2, 1).await;
    assert_eq!(got[0]["payload"]["message"]["parts"][0]["text"], "after");
    let c = agent(&hub, "c").await;
    assert!(AgentClient::connect(&hub.base, &c.key).await.is_ok());

    let now = backends(&mut admin, &database).await;
    assert!(
        !now.is_empty() && now.is_disjoint(&dropped),
        "{now:?} {dropped:?}"
    );
}
