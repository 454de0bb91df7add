//! The hosted area of the store on both backends (ADR 0031): the run's
//! states and its end written once, lists newest first, stop requests,
//! the card's app bound once, the app's memory bounded, and `coord`'s
//! compare-and-set cases.

use switchboard::domain::hosted::RunState;
use switchboard::store::{CoordOutcome, DynStore, RunEnd, RunRecord, StoreError};
use uuid::Uuid;

use crate::store_contract::{app_in, contract, postgres, sqlite};

const OWNER: Uuid = Uuid::from_u128(0x51);

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
        assert!(store.create_run(r, OWNER, false).await.unwrap());
    }
    assert!(store.mark_running(first.id, true).await.unwrap());
    assert!(
        !store.mark_running(first.id, true).await.unwrap(),
        "only from starting"
    );
    assert!(store.request_stop(first.id).await.unwrap());
    assert_eq!(
        store.beat_run(first.id, OWNER, 1_100).await.unwrap(),
        Some(true)
    );
    assert_eq!(
        store.beat_run(second.id, OWNER, 1_100).await.unwrap(),
        Some(false)
    );
    assert_eq!(
        store
            .beat_run(second.id, Uuid::new_v4(), 1_100)
            .await
            .unwrap(),
        None,
        "only the owner beats"
    );
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

/// The orphan sweep ends only the live runs of another owner that stopped
/// beating; a beating owner's run and the sweeper's own stay live, and an
/// ended run is not touched.
async fn orphan_sweep_by_owner_and_heartbeat(store: DynStore) {
    let app = app_in(&store).await;
    let (gone, alive, me) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
    let orphan = new_run(app, "game", 1_000);
    let beating = new_run(app, "game", 1_000);
    let mine = new_run(app, "game", 1_000);
    let ended = new_run(app, "game", 1_000);
    assert!(store.create_run(&orphan, gone, false).await.unwrap());
    assert!(store.create_run(&beating, alive, false).await.unwrap());
    assert!(store.create_run(&mine, me, false).await.unwrap());
    assert!(store.create_run(&ended, gone, false).await.unwrap());
    assert!(store.mark_running(orphan.id, true).await.unwrap());
    let end = RunEnd {
        state: RunState::Exited,
        reason: None,
        exit_code: Some(0),
        log: b"",
        at: 1_200,
    };
    assert!(store.finish_run(ended.id, &end).await.unwrap());
    assert_eq!(
        store.beat_run(beating.id, alive, 5_000).await.unwrap(),
        Some(false)
    );

    let swept = store.sweep_orphan_runs(me, 4_000, 6_000).await.unwrap();
    assert_eq!(swept, vec![orphan.id]);
    let got = store.run(orphan.id).await.unwrap().unwrap();
    assert_eq!(
        (got.state, got.reason.as_deref(), got.ended_at),
        (RunState::Failed, Some("owner_lost"), Some(6_000))
    );
    for (id, state) in [
        (beating.id, RunState::Starting),
        (mine.id, RunState::Starting),
        (ended.id, RunState::Exited),
    ] {
        assert_eq!(store.run(id).await.unwrap().unwrap().state, state);
    }
    assert_eq!(
        store.beat_run(orphan.id, gone, 6_100).await.unwrap(),
        None,
        "a swept run's owner learns it is no longer live"
    );
    assert!(
        store
            .sweep_orphan_runs(me, 4_000, 6_000)
            .await
            .unwrap()
            .is_empty(),
        "a sweep ends a run once"
    );
    // The stalled owner still finishes: the swept row keeps its end and
    // gets the whole log, which only that owner had.
    let late = RunEnd {
        state: RunState::Exited,
        reason: None,
        exit_code: Some(0),
        log: b"the whole log",
        at: 7_000,
    };
    assert!(!store.finish_run(orphan.id, &late).await.unwrap());
    let got = store.run(orphan.id).await.unwrap().unwrap();
    assert_eq!(
        (got.state, got.reason.as_deref(), got.ended_at),
        (RunState::Failed, Some("owner_lost"), Some(6_000))
    );
    assert_eq!(got.log.as_deref(), Some(&b"the whole log"[..]));
    // An ended run that was not swept is not rewritten.
    assert!(!store.finish_run(ended.id, &late).await.unwrap());
    let kept = store.run(ended.id).await.unwrap().unwrap();
    assert_eq!(kept.log.as_deref(), Some(&b""[..]));
}

/// A beatless app's runs are `alone`: one live at a time per app, held by
/// the store; the app's flag says which card to wake.
async fn one_live_alone_run_per_app(store: DynStore) {
    let app = app_in(&store).await;
    let other = app_in(&store).await;
    let first = new_run(app, "beat", 1_000);
    let second = new_run(app, "beat", 1_100);
    assert!(store.create_run(&first, OWNER, true).await.unwrap());
    assert!(
        !store.create_run(&second, OWNER, true).await.unwrap(),
        "a second live alone run of the app"
    );
    assert!(
        store.run(second.id).await.unwrap().is_none(),
        "nothing stored"
    );
    assert!(
        store
            .create_run(&new_run(app, "beat", 1_200), OWNER, false)
            .await
            .unwrap(),
        "a run that is not alone is not held"
    );
    assert!(store
        .create_run(&new_run(other, "beat2", 1_200), OWNER, true)
        .await
        .unwrap());
    let end = RunEnd {
        state: RunState::Exited,
        reason: None,
        exit_code: Some(0),
        log: b"",
        at: 1_300,
    };
    assert!(store.finish_run(first.id, &end).await.unwrap());
    assert!(
        store.create_run(&second, OWNER, true).await.unwrap(),
        "the first ended"
    );

    assert_eq!(store.beatless_card_of(app).await.unwrap(), None);
    store.bind_hosted_app("beat", app, 1).await.unwrap();
    assert_eq!(store.beatless_card_of(app).await.unwrap(), None);
    store.set_hosted_beatless(app, true).await.unwrap();
    assert_eq!(
        store.beatless_card_of(app).await.unwrap().as_deref(),
        Some("beat")
    );
    store.set_hosted_beatless(app, false).await.unwrap();
    assert_eq!(store.beatless_card_of(app).await.unwrap(), None);

    use switchboard::domain::card::ReplyPolicy;
    assert_eq!(
        store.hosted_reply_policy(app).await.unwrap(),
        Some(ReplyPolicy::All)
    );
    store
        .set_hosted_reply_policy(app, ReplyPolicy::Members)
        .await
        .unwrap();
    assert_eq!(
        store.hosted_reply_policy(app).await.unwrap(),
        Some(ReplyPolicy::Members)
    );
    assert!(store
        .set_hosted_reply_policy(app, ReplyPolicy::Metered)
        .await
        .is_err());
    assert_eq!(
        store.hosted_reply_policy(other).await.unwrap(),
        None,
        "not a hosted app"
    );
    assert!(!store.shares_room(app, Uuid::new_v4()).await.unwrap());
    assert!(store
        .app_connections(app, None, 10)
        .await
        .unwrap()
        .is_empty());
    assert!(store.app_rooms(app, None, 10).await.unwrap().is_empty());
}

/// The app's rooms are its tasks' conversations; its connections are their
/// participants, each once by id; another app's rooms are not its.
async fn rooms_and_connections_of_an_app(store: DynStore) {
    use crate::store_contract::agent_in;
    use crate::store_reads::active_room;
    let (app, other) = (app_in(&store).await, app_in(&store).await);
    let (a, b, c, d) = (
        agent_in(&store, "a").await,
        agent_in(&store, "b").await,
        agent_in(&store, "c").await,
        agent_in(&store, "d").await,
    );
    let (_, first) = active_room(&store, app, a, b).await;
    let (_, second) = active_room(&store, app, a, c).await;
    active_room(&store, other, d, a).await;
    let rooms: Vec<Uuid> = store
        .app_rooms(app, None, 10)
        .await
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(rooms, vec![first.id, second.id]);
    let page = store.app_rooms(app, Some(first.id), 10).await.unwrap();
    assert_eq!(page.len(), 1);
    let mut members = page[0].participants.clone();
    members.sort();
    let mut ac = vec![a, c];
    ac.sort();
    assert_eq!(members, ac);
    let mut expected = vec![a, b, c];
    expected.sort();
    assert_eq!(
        store.app_connections(app, None, 10).await.unwrap(),
        expected
    );
    assert_eq!(
        store
            .app_connections(app, Some(expected[0]), 1)
            .await
            .unwrap(),
        vec![expected[1]]
    );
    for (who, shares) in [(a, true), (b, true), (c, true), (d, false)] {
        assert_eq!(store.shares_room(app, who).await.unwrap(), shares, "{who}");
    }
    assert!(store.shares_room(other, d).await.unwrap());
}

contract!(
    rooms_and_connections_of_an_app,
    one_live_alone_run_per_app,
    runs_round_trip,
    apps_memory_and_coord,
    orphan_sweep_by_owner_and_heartbeat
);
