//! The command store under concurrency and against the app's own removes
//! (review of issue 16, findings 2, 7, 8, 10), on SQLite and a throwaway
//! PostgreSQL: concurrent registers at `max - 1` admit one; concurrent
//! twins of one `clientInvocationId` write one invocation and answer the
//! other as its duplicate; a refused register leaves the writer free for
//! the next write at once; an upgrade says what the rows saw when the app
//! removed manifest commands itself.

use serde_json::json;
use switchboard::config::Config;
use switchboard::domain::installation::Actor;
use switchboard::domain::manifest;
use switchboard::store::{DynStore, Invoked, NewCommand, Registered, StoreError, COMMAND_LIMIT};
use uuid::Uuid;

use crate::commands::poll_manifest;
use crate::store_commands::{decl, invocation, jobs, live_names, no_events, poll, poll_app};
use crate::store_installations::postgres_store;
use crate::support::legacy_db::LegacyDb;

macro_rules! contract {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test] async fn $case() { let (s, r, _g) = super::impatient_sqlite().await; super::$case(s, r).await; })*
        }
        mod postgres {
            $(#[tokio::test] async fn $case() { let (s, r, _g) = super::postgres_store().await; super::$case(s, r).await; })*
        }
    };
}

contract!(
    concurrent_registers_at_the_limit_admit_one,
    concurrent_twins_of_a_client_id_write_one,
    a_refused_register_frees_the_writer_at_once,
    an_upgrade_says_what_the_rows_saw,
);

const T: i64 = 1_700_000_000_000;

/// SQLite without a busy timeout: every writer of the process queues on
/// the store's own writer lock, so a statement that finds the database
/// locked is a transaction that let the lock pass on unfinished.
async fn impatient_sqlite() -> (DynStore, LegacyDb, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.server.data_dir = dir.path().to_path_buf();
    config.storage.sqlite_busy_timeout_ms = 0;
    let store = switchboard::store::open(&config).await.unwrap();
    let raw = LegacyDb::open_sqlite(&dir.path().join("switchboard.db")).await;
    (store, raw, dir)
}
/// Rounds of each race: enough that two transactions overlap on a busy
/// machine in some of them.
const ROUNDS: usize = 12;

fn named(app: Uuid, name: &str, max: usize) -> NewCommand {
    NewCommand {
        owner_id: app,
        decl: decl(name),
        conversation_id: None,
        max,
        now: T,
    }
}

/// Each round, two registers race with one place left under the limit:
/// exactly one is written, the other is `command_limit`.
async fn concurrent_registers_at_the_limit_admit_one(store: DynStore, _: LegacyDb) {
    let app = poll_app(&store, &poll()).await;
    for round in 0..ROUNDS {
        let max = 3 + round + 1;
        let (a, b) = (
            named(app, &format!("a{round}"), max),
            named(app, &format!("b{round}"), max),
        );
        let (one, two) = tokio::join!(store.register_command(&a), store.register_command(&b));
        let written = [&one, &two]
            .iter()
            .filter(|r| matches!(r, Ok(Registered::Written(_))))
            .count();
        let limited = [&one, &two]
            .iter()
            .filter(|r| matches!(r, Err(StoreError::Conflict(m)) if m == COMMAND_LIMIT))
            .count();
        assert_eq!((written, limited), (1, 1), "round {round}: {one:?} {two:?}");
        assert_eq!(store.commands_of(app).await.unwrap().len(), max);
    }
}

/// Each round, two invokes with one `clientInvocationId` race: one row,
/// event and job, and both answers name it.
async fn concurrent_twins_of_a_client_id_write_one(store: DynStore, raw: LegacyDb) {
    let app = poll_app(&store, &poll()).await;
    let vote = store
        .commands_of(app)
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.name == "vote")
        .unwrap();
    for round in 0..ROUNDS {
        let client = format!("twin-{round}");
        let (a, b) = (
            invocation(app, vote.id, Some(&client)),
            invocation(app, vote.id, Some(&client)),
        );
        let (one, two) = tokio::join!(store.invoke(&a), store.invoke(&b));
        let (one, two) = (one.unwrap(), two.unwrap());
        let id = |i: &Invoked| match i {
            Invoked::Written { invocation, .. } => (invocation.id, false),
            Invoked::Duplicate(first) => (first.id, true),
            Invoked::Unreachable => panic!("round {round}: unreachable"),
        };
        let (first, second) = (id(&one), id(&two));
        assert_eq!(first.0, second.0, "round {round}: {one:?} {two:?}");
        assert_ne!(
            first.1, second.1,
            "round {round}: one written, one duplicate"
        );
        assert_eq!(jobs(&raw).await, round + 1);
    }
}

/// A register refused by the unique name, then at once another write of
/// the same store: it succeeds (SQLite: the refused transaction rolled
/// back before the writer lock passed on).
async fn a_refused_register_frees_the_writer_at_once(store: DynStore, _: LegacyDb) {
    let app = poll_app(&store, &poll()).await;
    for round in 0..ROUNDS {
        let taken = store.register_command(&named(app, "vote", 100)).await;
        assert!(
            matches!(&taken, Err(StoreError::Conflict(m)) if m.contains("vote")),
            "{taken:?}"
        );
        let next = store
            .register_command(&named(app, &format!("next{round}"), 100))
            .await;
        let Ok(Registered::Written(next)) = next else {
            panic!("round {round}: the write after a refused register: {next:?}");
        };
        store.remove_command(app, next.id, T + 1).await.unwrap();
    }
}

/// The app removed `vote` and `purge` itself; the next manifest changes
/// `vote` and drops `purge`: `vote` comes back (added, a new row), `purge`
/// is not removed twice, and the audit row says the same.
async fn an_upgrade_says_what_the_rows_saw(store: DynStore, _: LegacyDb) {
    let app = poll_app(&store, &poll()).await;
    for c in store.commands_of(app).await.unwrap() {
        if c.name == "vote" || c.name == "purge" {
            store.remove_command(app, c.id, T + 1).await.unwrap();
        }
    }
    assert_eq!(live_names(&store, app).await, ["find"]);
    let mut next = poll_manifest();
    next["commands"][0]["description"] = json!("Cast a vote now");
    next["commands"][1]["description"] = json!("Find someone now");
    next["commands"].as_array_mut().unwrap().truncate(2);
    let next = manifest::validate(&next, &Config::default().manifest_bounds()).unwrap();
    let up = store
        .upgrade(app, &next, Actor::App(app), T + 2, &no_events)
        .await
        .unwrap();
    assert_eq!(up.commands.added, ["vote"]);
    assert_eq!(up.commands.changed, ["find"]);
    assert!(up.commands.removed.is_empty(), "{:?}", up.commands);
    assert_eq!(live_names(&store, app).await, ["find", "vote"]);
    let vote = store.commands_of(app).await.unwrap();
    let vote = vote.iter().find(|c| c.name == "vote").unwrap();
    assert_eq!(
        (vote.version, vote.description.as_str()),
        (1, "Cast a vote now")
    );
    let actions = store
        .actions(
            switchboard::store::ActionFilter { app: Some(app) },
            None,
            10,
        )
        .await
        .unwrap();
    let details = actions.last().unwrap().details.clone().unwrap();
    assert_eq!(details.commands_added, ["vote"]);
    assert_eq!(details.commands_changed, ["find"]);
    assert!(details.commands_removed.is_empty());
}
