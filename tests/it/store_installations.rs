//! The installation store (ADR 0023 §2-§5, §9) on SQLite and a throwaway
//! PostgreSQL: install at registration or by the operator, one live row per
//! app, the lifecycle's compare-and-swap, set scopes and upgrade within what
//! is requested, uninstall's effects row by row, the rows changed since, and
//! an audit that holds no value a caller wrote.

use serde_json::json;
use switchboard::config::Config;
use switchboard::domain::event::NewEvent;
use switchboard::domain::installation::{
    Actor, InstallationState, LifecycleAction, Scope, ScopeSet, Transition,
};
use switchboard::domain::PrincipalKind;
use switchboard::store::{
    ActionFilter, DynStore, InstallationRecord, NewInstallation, RegistrationInstall, StoreError,
    Transitioned,
};
use uuid::Uuid;

use crate::store_contract::{agent_in, new_key, principal, werewolf};
use crate::support::legacy_db::LegacyDb;
use crate::support::pg;

/// A store and a raw connection to its database, for what no store read
/// shows (stored columns, jobs) and for rows only a later manifest writes.
pub(crate) async fn sqlite_store() -> (DynStore, LegacyDb, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.server.data_dir = dir.path().to_path_buf();
    let store = switchboard::store::open(&config).await.unwrap();
    let raw = LegacyDb::open_sqlite(&dir.path().join("switchboard.db")).await;
    (store, raw, dir)
}

pub(crate) async fn postgres_store() -> (DynStore, LegacyDb, ()) {
    let mut config = Config::default();
    config.storage.database_url = pg::fresh_database().await;
    config.storage.max_connections = 8;
    let store = switchboard::store::open(&config).await.unwrap();
    let raw = LegacyDb::open_postgres(&config.storage.database_url).await;
    (store, raw, ())
}

macro_rules! contract_raw {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test] async fn $case() { let (s, r, _g) = super::sqlite_store().await; super::$case(s, r).await; })*
        }
        mod postgres {
            $(#[tokio::test] async fn $case() { let (s, r, _g) = super::postgres_store().await; super::$case(s, r).await; })*
        }
    };
}

mod audit;
mod grant_race;
mod uninstall;

contract_raw!(
    registration_installs_at_once_or_leaves_the_app_pending,
    an_install_is_the_one_live_row_of_its_app,
    transitions_compare_and_swap_and_repeats_write_nothing,
    set_scopes_replaces_granted_within_what_is_requested,
    upgrade_keeps_granted_only_what_is_still_requested,
    changed_since_sees_every_write_of_every_state,
);

pub(crate) const T: i64 = 1_700_000_000_000;
pub(crate) const CANARY: &str = "canary-7f3e-do-not-log";

fn events() -> ScopeSet {
    ScopeSet::of([Scope::EventsSubscribe])
}

/// A pending app (no installation) with one active key; the canary in its
/// manifest's description.
async fn pending_app(store: &DynStore) -> (Uuid, String) {
    let mut m = werewolf();
    m.description = format!("a game {CANARY}");
    let p = principal(PrincipalKind::App, "Werewolf");
    let (_, key) = new_key(PrincipalKind::App);
    let got = store.create_app(&p, &m, &key, None, None).await.unwrap();
    assert_eq!(got, None, "no install asked, none written");
    (p.id, key.key_id)
}

/// The operator's install of `app_id`, which requests what a seed-000
/// manifest does; `None` grants all of it.
pub(crate) fn operator_install(
    app_id: Uuid,
    granted: Option<ScopeSet>,
    now: i64,
) -> NewInstallation {
    NewInstallation {
        id: Uuid::now_v7(),
        app_id,
        requested: events(),
        granted: granted.unwrap_or(events()),
        key: None,
        idem: None,
        actor: Actor::Operator,
        now,
    }
}

/// A change that tells nobody (the store's callers build the events).
pub(crate) fn no_events(_: &InstallationRecord) -> Vec<NewEvent> {
    Vec::new()
}

/// A change told to its app, as the hub tells `app/installation/changed`.
pub(crate) fn told(i: &InstallationRecord) -> Vec<NewEvent> {
    let payload = json!({"installationId": i.id, "granted": i.granted.to_stored()});
    vec![NewEvent::new(i.app_id, "app/installation/changed", payload)]
}

/// An installed, active app.
pub(crate) async fn installed_app(store: &DynStore) -> (Uuid, InstallationRecord) {
    let (app, _) = pending_app(store).await;
    let i = store
        .install(&operator_install(app, None, T), &no_events)
        .await
        .unwrap()
        .installation;
    (app, i)
}

fn conflict<T: std::fmt::Debug>(result: Result<T, StoreError>, says: &str) {
    match result {
        Err(StoreError::Conflict(m)) => assert!(m.contains(says), "{m}"),
        other => panic!("expected a conflict saying {says:?}, got {other:?}"),
    }
}

fn not_found<T: std::fmt::Debug>(result: Result<T, StoreError>) {
    assert!(
        matches!(result, Err(StoreError::NotFound)),
        "expected NotFound, got {result:?}"
    );
}

pub(crate) async fn actions_of(store: &DynStore, app: Uuid) -> Vec<LifecycleAction> {
    let filter = ActionFilter { app: Some(app) };
    let rows = store.actions(filter, None, 100).await.unwrap();
    rows.iter().map(|r| r.action).collect()
}

async fn registration_installs_at_once_or_leaves_the_app_pending(store: DynStore, _raw: LegacyDb) {
    let (pending, _) = pending_app(&store).await;
    assert_eq!(store.installation(pending).await.unwrap(), None);
    assert!(actions_of(&store, pending).await.is_empty());

    let p = principal(PrincipalKind::App, "Auto");
    let (_, key) = new_key(PrincipalKind::App);
    let install = RegistrationInstall::new(p.id, &werewolf(), Actor::App(p.id), p.created_at);
    let written = store
        .create_app(&p, &werewolf(), &key, Some(&install), None)
        .await
        .unwrap()
        .expect("installed at registration");
    assert_eq!(written, install.installation);
    assert_eq!(written.state, InstallationState::Active);
    assert_eq!((written.requested, written.granted), (events(), events()));
    assert_eq!(store.installation(p.id).await.unwrap(), Some(written));
    let audit = store
        .actions(ActionFilter { app: Some(p.id) }, None, 10)
        .await
        .unwrap();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0].action, LifecycleAction::Install);
    assert_eq!(audit[0].actor, Actor::App(p.id));
    assert_eq!(
        (audit[0].scopes_before, audit[0].scopes_after),
        (None, Some(events()))
    );

    // A registration whose app id is taken writes no installation either.
    let (_, other) = new_key(PrincipalKind::App);
    let again = RegistrationInstall::new(p.id, &werewolf(), Actor::Operator, T);
    assert!(store
        .create_app(&p, &werewolf(), &other, Some(&again), None)
        .await
        .is_err());
    assert_eq!(store.installation(p.id).await.unwrap(), Some(written));
}

async fn an_install_is_the_one_live_row_of_its_app(store: DynStore, _raw: LegacyDb) {
    let (app, key_id) = pending_app(&store).await;
    conflict(
        store
            .install(
                &operator_install(app, Some(ScopeSet::of([Scope::MessagesWrite])), T),
                &no_events,
            )
            .await,
        "not requested by the manifest: messages:write",
    );
    assert_eq!(
        store.installation(app).await.unwrap(),
        None,
        "nothing written"
    );
    not_found(
        store
            .install(&operator_install(Uuid::new_v4(), None, T), &no_events)
            .await,
    );
    let agent = agent_in(&store, "not an app").await;
    not_found(
        store
            .install(&operator_install(agent, None, T), &no_events)
            .await,
    );

    // The app still has its key: a key offered is not stored.
    let (_, offered) = new_key(PrincipalKind::App);
    let new = NewInstallation {
        key: Some(offered.clone()),
        ..operator_install(app, Some(ScopeSet::EMPTY), T + 1)
    };
    let installed = store.install(&new, &told).await.unwrap();
    assert!(!installed.key_issued);
    assert_eq!(installed.events.len(), 1, "the event is written with it");
    assert_eq!(
        store.events_after(app, 0, 10).await.unwrap(),
        installed.events
    );
    assert!(store.key(&offered.key_id).await.unwrap().is_none());
    assert!(store
        .key(&key_id)
        .await
        .unwrap()
        .unwrap()
        .revoked_at
        .is_none());
    let i = installed.installation;
    assert_eq!(
        (i.id, i.app_id, i.state),
        (new.id, app, InstallationState::Active)
    );
    assert_eq!((i.requested, i.granted), (events(), ScopeSet::EMPTY));
    assert_eq!(i.effective(), ScopeSet::EMPTY);
    assert_eq!((i.created_at, i.updated_at), (T + 1, T + 1));
    assert_eq!(store.installation(app).await.unwrap(), Some(i));

    conflict(
        store
            .install(&operator_install(app, None, T + 2), &no_events)
            .await,
        "installed already",
    );
    // Racing installs of one app: one row, the others conflict.
    let (racer, _) = pending_app(&store).await;
    let mut racing = Vec::new();
    for n in 0..6 {
        let store = store.clone();
        racing.push(tokio::spawn(async move {
            store
                .install(&operator_install(racer, None, T + n), &no_events)
                .await
        }));
    }
    let mut won = 0;
    for r in racing {
        match r.await.unwrap() {
            Ok(_) => won += 1,
            Err(e) => conflict(Err::<(), _>(e), "installed already"),
        }
    }
    assert_eq!(won, 1);
    assert_eq!(actions_of(&store, racer).await, [LifecycleAction::Install]);
}

async fn transitions_compare_and_swap_and_repeats_write_nothing(store: DynStore, _raw: LegacyDb) {
    let (app, i) = installed_app(&store).await;
    let op = Actor::Operator;
    let moved = store
        .transition(i.id, Transition::Suspend, op, T + 10, &no_events)
        .await
        .unwrap()
        .change;
    let Transitioned::Moved(c) = moved else {
        panic!("{moved:?}")
    };
    assert_eq!(c.before, i);
    assert_eq!(c.after.state, InstallationState::Suspended);
    assert_eq!(c.after.updated_at, T + 10);
    assert_eq!(store.installation(app).await.unwrap(), Some(c.after));
    let again = store
        .transition(i.id, Transition::Suspend, op, T + 11, &told)
        .await
        .unwrap();
    assert_eq!(again.change, Transitioned::Unchanged(c.after), "no write");
    assert!(again.events.is_empty(), "nor an event");
    assert_eq!(
        store.installation(app).await.unwrap().unwrap().updated_at,
        T + 10
    );

    // Racing resumes: one moves it, the rest find it moved and write nothing.
    let mut racing = Vec::new();
    for n in 0..8 {
        let store = store.clone();
        racing.push(tokio::spawn(async move {
            store
                .transition(
                    i.id,
                    Transition::Resume,
                    Actor::Operator,
                    T + 20 + n,
                    &no_events,
                )
                .await
                .unwrap()
        }));
    }
    let mut moves = 0;
    for r in racing {
        if let Transitioned::Moved(c) = r.await.unwrap().change {
            assert_eq!(c.before.state, InstallationState::Suspended);
            moves += 1;
        }
    }
    assert_eq!(moves, 1, "one resume won the CAS");
    assert_eq!(
        store.installation(app).await.unwrap().unwrap().state,
        InstallationState::Active
    );
    assert_eq!(
        actions_of(&store, app).await,
        [
            LifecycleAction::Install,
            LifecycleAction::Suspend,
            LifecycleAction::Resume
        ],
        "repeats are not audited"
    );

    conflict(
        store
            .transition(i.id, Transition::Uninstall, op, T + 30, &no_events)
            .await,
        "InstallationStore::uninstall",
    );
    assert_eq!(
        store.installation(app).await.unwrap().unwrap().state,
        InstallationState::Active
    );
    not_found(
        store
            .transition(Uuid::now_v7(), Transition::Suspend, op, T, &no_events)
            .await,
    );
    store
        .uninstall(i.id, op, T + 40, &|_| Vec::new())
        .await
        .unwrap();
    for t in [Transition::Suspend, Transition::Resume] {
        conflict(
            store.transition(i.id, t, op, T + 41, &no_events).await,
            "is uninstalled",
        );
    }
    conflict(
        store.uninstall(i.id, op, T + 42, &|_| Vec::new()).await,
        "is uninstalled",
    );
}

async fn set_scopes_replaces_granted_within_what_is_requested(store: DynStore, _raw: LegacyDb) {
    let (app, i) = installed_app(&store).await;
    let person = Uuid::now_v7();
    let written = store
        .set_scopes(app, ScopeSet::EMPTY, Actor::Person(person), T + 5, &told)
        .await
        .unwrap();
    let c = written.change;
    assert_eq!(c.before, i);
    // The events the caller built of the new row, written with it.
    assert_eq!(written.events.len(), 1);
    assert_eq!(written.events[0].audience, app);
    let logged = store.events_after(app, 0, 10).await.unwrap();
    assert_eq!(logged, written.events);
    assert_eq!(
        logged[0].payload.to_value(),
        json!({"installationId": i.id, "granted": ""})
    );
    assert_eq!(
        (c.after.requested, c.after.granted),
        (events(), ScopeSet::EMPTY)
    );
    assert_eq!(c.after.updated_at, T + 5);
    assert_eq!(store.installation(app).await.unwrap(), Some(c.after));
    conflict(
        store
            .set_scopes(
                app,
                ScopeSet::of([Scope::EventsSubscribe, Scope::CommandsWrite]),
                Actor::Operator,
                T + 6,
                &no_events,
            )
            .await,
        "not requested by the manifest: commands:write",
    );
    assert_eq!(store.installation(app).await.unwrap(), Some(c.after));
    let back = store
        .set_scopes(app, events(), Actor::Operator, T + 7, &no_events)
        .await
        .unwrap();
    assert_eq!(back.change.after.effective(), events());
    assert!(back.events.is_empty());
    let (pending, _) = pending_app(&store).await;
    not_found(
        store
            .set_scopes(pending, ScopeSet::EMPTY, Actor::Operator, T, &no_events)
            .await,
    );
    let audit = store
        .actions(ActionFilter { app: Some(app) }, None, 10)
        .await
        .unwrap();
    let set: Vec<_> = audit
        .iter()
        .filter(|r| r.action == LifecycleAction::ScopesUpdate)
        .map(|r| (r.actor, r.scopes_before, r.scopes_after))
        .collect();
    assert_eq!(
        set,
        [
            (Actor::Person(person), Some(events()), Some(ScopeSet::EMPTY)),
            (Actor::Operator, Some(ScopeSet::EMPTY), Some(events())),
        ]
    );
}

async fn upgrade_keeps_granted_only_what_is_still_requested(store: DynStore, raw: LegacyDb) {
    let (app, i) = installed_app(&store).await;
    // As a manifest asking for more would have left it: requested and
    // granted beyond what the next manifest asks.
    raw.exec(
        "UPDATE installations SET requested_scopes = 'messages:write,events:subscribe', \
         granted_scopes = 'messages:write,events:subscribe' WHERE id = $1",
        &[switchboard_id(i.id)],
    )
    .await;
    let mut next = werewolf();
    next.description = "the second edition".into();
    let up = store
        .upgrade(app, &next, Actor::App(app), T + 50, &no_events)
        .await
        .unwrap();
    assert_eq!(up.previous.description, format!("a game {CANARY}"));
    let c = up.installation.expect("a live installation");
    let both = ScopeSet::of([Scope::MessagesWrite, Scope::EventsSubscribe]);
    assert_eq!((c.before.requested, c.before.granted), (both, both));
    assert_eq!(
        (c.after.requested, c.after.granted),
        (events(), events()),
        "granted ∩ requested: the dropped scope is gone"
    );
    assert_eq!(c.after.updated_at, T + 50);
    assert_eq!(store.installation(app).await.unwrap(), Some(c.after));
    assert_eq!(store.app(app).await.unwrap().unwrap().manifest, next);

    // Withheld before the upgrade, still withheld after: a scope the new
    // manifest requests again waits for consent.
    store
        .set_scopes(app, ScopeSet::EMPTY, Actor::Operator, T + 51, &no_events)
        .await
        .unwrap();
    let up = store
        .upgrade(app, &werewolf(), Actor::Operator, T + 52, &no_events)
        .await
        .unwrap();
    let c = up.installation.unwrap();
    assert_eq!(
        (c.after.requested, c.after.granted),
        (events(), ScopeSet::EMPTY)
    );
    assert_eq!(c.after.requested.minus(c.after.granted), events());

    // Without a live installation only the manifest changes.
    let (pending, _) = pending_app(&store).await;
    let up = store
        .upgrade(pending, &next, Actor::Operator, T + 53, &no_events)
        .await
        .unwrap();
    assert_eq!(up.installation, None);
    assert_eq!(store.app(pending).await.unwrap().unwrap().manifest, next);
    assert_eq!(store.installation(pending).await.unwrap(), None);
    assert_eq!(
        actions_of(&store, pending).await,
        [LifecycleAction::Upgrade]
    );
    not_found(
        store
            .upgrade(Uuid::new_v4(), &next, Actor::Operator, T, &no_events)
            .await,
    );
}

/// A binding of `id` as the raw connection stores ids.
fn switchboard_id(id: Uuid) -> crate::support::legacy_db::Val {
    crate::support::legacy_db::Val::Id(id)
}

async fn changed_since_sees_every_write_of_every_state(store: DynStore, _raw: LegacyDb) {
    let (one, first) = installed_app(&store).await;
    let (two, second) = installed_app(&store).await;
    let ids = |rows: Vec<InstallationRecord>| -> Vec<(Uuid, InstallationState)> {
        rows.into_iter().map(|r| (r.id, r.state)).collect()
    };
    assert_eq!(
        ids(store.installations_changed_since(T + 1).await.unwrap()),
        []
    );
    store
        .transition(
            first.id,
            Transition::Suspend,
            Actor::Operator,
            T + 10,
            &no_events,
        )
        .await
        .unwrap();
    store
        .uninstall(second.id, Actor::Operator, T + 20, &|_| Vec::new())
        .await
        .unwrap();
    assert_eq!(
        ids(store.installations_changed_since(T + 10).await.unwrap()),
        [
            (first.id, InstallationState::Suspended),
            (second.id, InstallationState::Uninstalled)
        ]
    );
    assert_eq!(
        ids(store.installations_changed_since(T + 11).await.unwrap()),
        [(second.id, InstallationState::Uninstalled)]
    );
    store
        .set_scopes(one, ScopeSet::EMPTY, Actor::Operator, T + 30, &no_events)
        .await
        .unwrap();
    store
        .upgrade(two, &werewolf(), Actor::Operator, T + 40, &no_events)
        .await
        .unwrap();
    assert_eq!(
        ids(store.installations_changed_since(T + 21).await.unwrap()),
        [(first.id, InstallationState::Suspended)],
        "set scopes moves updated_at; an upgrade without a live row writes none"
    );
}
