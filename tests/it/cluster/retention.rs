//! Retention across the cluster (issue 19 part 4): every node runs the
//! prune on its own tick, with no claim; its deletes take row locks in one
//! order (streams, then payloads by id), so three nodes pruning at once
//! delete each index row once and release each payload reference once.

use switchboard::config::Config;
use switchboard::store::DynStore;

use crate::store_contract::{agent_in, group_of, send_to};

const RECIPIENTS: usize = 20;
const MESSAGES: usize = 25;
const KEEP: u64 = 5;

/// The payload rows left and their references, read straight from the
/// database.
async fn payloads(database_url: &str) -> (i64, i64) {
    use sqlx::Connection;
    let mut db = sqlx::PgConnection::connect(database_url).await.unwrap();
    sqlx::query_as("SELECT COUNT(*), COALESCE(SUM(refs), 0)::BIGINT FROM event_payloads")
        .fetch_one(&mut db)
        .await
        .unwrap()
}

/// Three nodes' prunes at once: how many index rows they deleted in all.
async fn prune_on_three(stores: &[DynStore], older_than: i64, keep: u64) -> u64 {
    let runs = stores.iter().map(|s| {
        let s = s.clone();
        async move { s.prune_events(older_than, keep).await.unwrap() }
    });
    futures_util::future::join_all(runs).await.into_iter().sum()
}

#[tokio::test]
async fn three_nodes_pruning_at_once_delete_each_event_once() {
    let database_url = crate::support::pg::fresh_database().await;
    let mut stores = Vec::new();
    for _ in 0..3 {
        let mut config = Config::default();
        config.storage.database_url = database_url.clone();
        config.storage.max_connections = 4;
        stores.push(switchboard::store::open(&config).await.unwrap());
    }
    let store = &stores[0];
    let sender = agent_in(store, "sender").await;
    let mut members = vec![sender];
    for i in 0..RECIPIENTS {
        members.push(agent_in(store, &format!("r{i}")).await);
    }
    let group = group_of(store, &members).await;
    for _ in 0..MESSAGES {
        send_to(store, group, sender, &members[1..]).await;
    }
    assert_eq!(
        payloads(&database_url).await,
        (MESSAGES as i64, (MESSAGES * RECIPIENTS) as i64),
        "one payload per message, one reference per copy"
    );

    let deleted = prune_on_three(&stores, 0, KEEP).await;
    assert_eq!(
        deleted,
        (RECIPIENTS * (MESSAGES - KEEP as usize)) as u64,
        "each index row deleted by one node"
    );
    assert_eq!(
        payloads(&database_url).await,
        (KEEP as i64, KEEP as i64 * RECIPIENTS as i64),
        "each released reference counted once: the kept messages' payloads, whole"
    );
    for r in &members[1..] {
        let pos = store.stream_position(*r).await.unwrap();
        assert_eq!(
            (pos.last_seq, pos.oldest_seq),
            (MESSAGES as u64, MESSAGES as u64 - KEEP + 1)
        );
    }

    let rest = prune_on_three(&stores, i64::MAX, 1_000_000).await;
    assert_eq!(rest, RECIPIENTS as u64 * KEEP);
    assert_eq!(payloads(&database_url).await, (0, 0), "nothing orphaned");
}
