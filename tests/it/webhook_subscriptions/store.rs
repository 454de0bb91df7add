//! The store's half on both backends (ADR 0033): the outbox is the log, so
//! a send to a subscribed app runs the statements it runs without a
//! subscription; claims exclude each other and a stale claim moves nothing.

use switchboard::domain::webhook::{Outcome, Source};
use switchboard::store::{
    count_statements, Attempt, Backend, DynStore, NewSubscription, Next, Recorded,
};
use uuid::Uuid;

use crate::store_contract::{agent_in, app_in, contract, group_of, postgres, send_to, sqlite};

contract!(the_log_is_the_outbox_and_claims_exclude_each_other);

async fn the_log_is_the_outbox_and_claims_exclude_each_other(store: DynStore) {
    let agent = agent_in(&store, "a").await;
    let app = app_in(&store).await;
    let group = group_of(&store, &[agent, app]).await;
    let (_, without) = count_statements(send_to(&store, group, agent, &[app])).await;
    // SQLite's writer thread reports the statements it ran for the send,
    // so the counts compared below are real work, not two zeros. The
    // PostgreSQL group writer runs its statements on a raw connection the
    // count does not see: there, what can be seen is asserted below (the
    // send touches no subscription row and writes no attempt).
    if store.backend() == Backend::Sqlite {
        assert!(without > 0, "the send's statements are counted");
    }
    let types = vec!["agent/message/received".to_string()];
    for _ in 0..3 {
        let new = NewSubscription {
            id: Uuid::now_v7(),
            app_id: app,
            source: Source::Api,
            url: "https://hooks.example.com/in",
            event_types: &types,
            sealed_secret: None,
            limit: 3,
            now: 20,
            idem: None,
        };
        store.create_subscription(&new).await.unwrap();
    }
    let fourth = NewSubscription {
        id: Uuid::now_v7(),
        app_id: app,
        source: Source::Api,
        url: "https://hooks.example.com/in",
        event_types: &types,
        sealed_secret: Some(b"sealed"),
        limit: 3,
        now: 20,
        idem: None,
    };
    assert!(
        store.create_subscription(&fourth).await.is_err(),
        "over the limit"
    );
    let before = store.subscriptions_of(app).await.unwrap();
    let (events, with) = count_statements(send_to(&store, group, agent, &[app])).await;
    assert_eq!(
        store.subscriptions_of(app).await.unwrap(),
        before,
        "the send touches no subscription"
    );
    for s in &before {
        assert!(store.attempts(s.id, 10).await.unwrap().is_empty());
    }
    assert_eq!(
        with, without,
        "nothing is written per subscription on the send path"
    );
    let seq = events.iter().find(|e| e.audience == app).unwrap().seq;

    let now = 1_000;
    let (owner, other) = (Uuid::new_v4(), Uuid::new_v4());
    let claimed = store
        .claim_subscriptions(now, now + 60_000, 10, owner)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 3);
    assert!(claimed.iter().all(|c| c.subscription.cursor == seq - 1));
    assert!(
        store
            .claim_subscriptions(now, now + 60_000, 10, other)
            .await
            .unwrap()
            .is_empty(),
        "held until the claim lapses"
    );
    let c = &claimed[0];
    let skip = Next::Skip {
        cursor: seq,
        keep_until: None,
    };
    let stale = store
        .record_delivery(c.subscription.id, Uuid::new_v4(), None, skip, now)
        .await
        .unwrap();
    assert_eq!(stale, None, "another claim's token moves nothing");
    let attempt = Attempt {
        subscription_id: c.subscription.id,
        app_id: app,
        event_id: Some(events[0].id),
        seq,
        attempt: 1,
        at: now,
        duration_ms: 3,
        outcome: Outcome::Delivered,
        status: Some(200),
        next_attempt_at: None,
    };
    let next = Next::Advance {
        cursor: seq,
        keep_until: None,
    };
    let done = store
        .record_delivery(c.subscription.id, c.token, Some(&attempt), next, now)
        .await
        .unwrap();
    let released = Recorded {
        events: Vec::new(),
        kept: false,
    };
    assert_eq!(done, Some(released));
    let after = store
        .subscription(c.subscription.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after.cursor, seq);
    assert_eq!(
        store.attempts(c.subscription.id, 10).await.unwrap(),
        vec![attempt]
    );
    // Caught up and released: not claimed again; the others lapse later.
    let later = now + 60_001;
    let again = store
        .claim_subscriptions(later, later + 1, 10, other)
        .await
        .unwrap();
    assert_eq!(again.len(), 2, "only those behind the log");
    assert!(again.iter().all(|g| g.subscription.id != c.subscription.id));
    assert_eq!(
        store.release_webhook_claims(owner).await.unwrap(),
        0,
        "a process gives back only its own claims"
    );
    assert_eq!(store.release_webhook_claims(other).await.unwrap(), 2);
}

/// A poll with nothing due reads and writes nothing: another writer holding
/// the SQLite file's write lock does not hold the poll up.
#[tokio::test]
async fn a_poll_with_nothing_due_takes_no_write_lock() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = switchboard::config::Config::default();
    config.server.data_dir = dir.path().join("data");
    let store = switchboard::store::open(&config).await.unwrap();
    let app = app_in(&store).await;
    let types = vec!["agent/message/received".to_string()];
    let new = NewSubscription {
        id: Uuid::now_v7(),
        app_id: app,
        source: Source::Api,
        url: "https://hooks.example.com/in",
        event_types: &types,
        sealed_secret: None,
        limit: 3,
        now: 20,
        idem: None,
    };
    store.create_subscription(&new).await.unwrap();
    let file = config.server.data_dir.join("switchboard.db");
    let other = rusqlite::Connection::open(&file).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    // The busy timeout is 5 s: a poll that wrote would wait it out.
    let poll = store.claim_subscriptions(1_000, 61_000, 10, Uuid::new_v4());
    let claimed = tokio::time::timeout(std::time::Duration::from_secs(2), poll)
        .await
        .expect("the poll did not wait for the write lock")
        .unwrap();
    assert!(claimed.is_empty(), "the subscription is caught up");
    other.execute_batch("ROLLBACK").unwrap();
}
