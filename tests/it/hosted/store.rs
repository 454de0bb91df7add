//! The hosted area of the store on both backends (ADR 0031): the run's
//! states and its end written once, lists newest first, stop requests,
//! the card's app bound once, the app's memory bounded, and `coord`'s
//! compare-and-set cases.

use switchboard::domain::hosted::RunState;
use switchboard::store::{CoordOutcome, DynStore, RunEnd, RunRecord, StoreError};
use uuid::Uuid;

use crate::store_contract::{app_in, contract, postgres, sqlite};

fn new_run(app: Uuid, card: &str, at: i64) -> RunRecord {
    RunRecord {
        id: Uuid::now_v7(),
        card_id: card.into(),
        version: "1.0.0".into(),
        app_id: app,
        state: RunState::Starting,
        reason: None,
        exit_code: None,
        isolated: false,
        stop_requested: false,
        created_at: at,
        ended_at: None,
        log: None,
    }
}

async fn runs_round_trip(store: DynStore) {
    let app = app_in(&store).await;
    let first = new_run(app, "game", 1_000);
    let second = new_run(app, "game", 2_000);
    let other = new_run(app, "other", 3_000);
    for r in [&first, &second, &other] {
        store.create_run(r).await.unwrap();
    }
    assert!(store.mark_running(first.id, true).await.unwrap());
    assert!(
        !store.mark_running(first.id, true).await.unwrap(),
        "only from starting"
    );
    assert!(store.request_stop(first.id).await.unwrap());
    assert!(store.stop_requested(first.id).await.unwrap());
    assert!(!store.stop_requested(second.id).await.unwrap());
    let end = RunEnd {
        state: RunState::Failed,
        reason: Some("stopped"),
        exit_code: None,
        log: b"out\xff",
        at: 1_500,
    };
    assert!(store.finish_run(first.id, &end).await.unwrap());
    assert!(
        !store.finish_run(first.id, &end).await.unwrap(),
        "an end is written once"
    );
    assert!(
        !store.request_stop(first.id).await.unwrap(),
        "an ended run is not live"
    );
    let got = store.run(first.id).await.unwrap().unwrap();
    assert_eq!(
        (got.state, got.reason.as_deref(), got.isolated, got.ended_at),
        (RunState::Failed, Some("stopped"), true, Some(1_500))
    );
    assert_eq!(got.log.as_deref(), Some(&b"out\xff"[..]));
    let live = store.run(second.id).await.unwrap().unwrap();
    assert_eq!((live.state, live.log), (RunState::Starting, None));
    let games: Vec<Uuid> = store
        .runs(Some("game"), 10)
        .await
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(games, vec![second.id, first.id]);
    assert_eq!(store.runs(None, 2).await.unwrap().len(), 2);
    assert!(store
        .runs(None, 10)
        .await
        .unwrap()
        .iter()
        .all(|r| r.log.is_none()));
    assert!(store.run(Uuid::new_v4()).await.unwrap().is_none());
}

async fn apps_memory_and_coord(store: DynStore) {
    let app = app_in(&store).await;
    let other = app_in(&store).await;
    assert_eq!(store.hosted_app("card").await.unwrap(), None);
    assert_eq!(store.bind_hosted_app("card", app, 1).await.unwrap(), app);
    assert_eq!(
        store.bind_hosted_app("card", other, 2).await.unwrap(),
        app,
        "the first binder wins"
    );
    assert_eq!(store.hosted_app("card").await.unwrap(), Some(app));

    store.remember(app, "a", "1", 2, 1).await.unwrap();
    store.remember(app, "a", "2", 2, 2).await.unwrap();
    store.remember(app, "b", "3", 2, 3).await.unwrap();
    assert!(matches!(
        store.remember(app, "c", "4", 2, 4).await,
        Err(StoreError::Conflict(_))
    ));
    store.remember(app, "b", "5", 2, 5).await.unwrap();
    assert_eq!(store.recall(app, "a").await.unwrap().as_deref(), Some("2"));
    assert_eq!(store.recall(app, "b").await.unwrap().as_deref(), Some("5"));
    assert_eq!(
        store.recall(other, "a").await.unwrap(),
        None,
        "memory is per app"
    );

    let cas = |swapped, value: Option<&str>, version| CoordOutcome {
        swapped,
        value: value.map(str::to_string),
        version,
    };
    assert_eq!(
        store.coord(app, "k", None, None).await.unwrap(),
        cas(true, None, 0)
    );
    assert_eq!(
        store.coord(app, "k", None, Some("x")).await.unwrap(),
        cas(true, Some("x"), 1)
    );
    assert_eq!(
        store.coord(app, "k", None, Some("y")).await.unwrap(),
        cas(false, Some("x"), 1)
    );
    assert_eq!(
        store.coord(app, "k", None, None).await.unwrap(),
        cas(false, Some("x"), 1)
    );
    assert_eq!(
        store.coord(app, "k", Some("z"), Some("y")).await.unwrap(),
        cas(false, Some("x"), 1)
    );
    assert_eq!(
        store.coord(app, "k", Some("x"), Some("y")).await.unwrap(),
        cas(true, Some("y"), 2)
    );
    assert_eq!(
        store.coord(other, "k", None, Some("o")).await.unwrap(),
        cas(true, Some("o"), 1)
    );
    assert_eq!(
        store.coord(app, "k", Some("x"), None).await.unwrap(),
        cas(false, Some("y"), 2)
    );
    assert_eq!(
        store.coord(app, "k", Some("y"), None).await.unwrap(),
        cas(true, None, 0)
    );
    assert_eq!(
        store.coord(app, "k", Some("y"), Some("w")).await.unwrap(),
        cas(false, None, 0)
    );
}

contract!(runs_round_trip, apps_memory_and_coord);
