//! The command store (ADR 0027 §2, §4) on SQLite and a throwaway
//! PostgreSQL: the manifest's commands written by the install, diffed by an
//! upgrade and removed by an uninstall, in those transactions and in their
//! audit rows; API commands within the owner's limit and one live name per
//! place; an invoke's one transaction (row, event, job) and what it refuses.

use serde_json::json;
use switchboard::config::Config;
use switchboard::domain::event::NewEvent;
use switchboard::domain::installation::{Actor, InstallationState, Scope, ScopeSet, Transition};
use switchboard::domain::manifest::{self, CommandDecl, Manifest};
use switchboard::domain::PrincipalKind;
use switchboard::store::{
    ActionFilter, DynStore, IdempotencyRecord, IdempotentResponse, InstallationRecord,
    InvocationRecord, Invoked, NewChannel, NewCommand, NewInvocation, NewSpace, Registered,
    RegistrationInstall, StoreError, COMMAND_LIMIT,
};
use uuid::Uuid;

use crate::commands::poll_manifest;
use crate::store_contract::{new_key, principal};
use crate::store_installations::{postgres_store, sqlite_store};
use crate::support::legacy_db::LegacyDb;

macro_rules! contract {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test] async fn $case() { let (s, r, _g) = super::sqlite_store().await; super::$case(s, r).await; })*
        }
        mod postgres {
            $(#[tokio::test] async fn $case() { let (s, r, _g) = super::postgres_store().await; super::$case(s, r).await; })*
        }
    };
}

contract!(
    install_upgrade_and_uninstall_carry_the_manifest_commands,
    api_commands_keep_their_limit_and_one_name_per_place,
    an_invoke_writes_its_row_event_and_job_or_nothing,
);

const T: i64 = 1_700_000_000_000;

pub(crate) fn poll() -> Manifest {
    manifest::validate(&poll_manifest(), &Config::default().manifest_bounds()).unwrap()
}

pub(crate) fn no_events(_: &InstallationRecord) -> Vec<NewEvent> {
    Vec::new()
}

/// The Poll app, installed at registration (`registration.install = "auto"`).
pub(crate) async fn poll_app(store: &DynStore, manifest: &Manifest) -> Uuid {
    let p = principal(PrincipalKind::App, "Poll");
    let (_, key) = new_key(PrincipalKind::App);
    let install = RegistrationInstall::new(p.id, manifest, Actor::Operator, T);
    store
        .create_app(&p, manifest, &key, Some(&install), None)
        .await
        .unwrap();
    p.id
}

fn names(mut n: Vec<String>) -> Vec<String> {
    n.sort();
    n
}

pub(crate) async fn live_names(store: &DynStore, app: Uuid) -> Vec<String> {
    names(
        store
            .commands_of(app)
            .await
            .unwrap()
            .into_iter()
            .map(|c| c.name)
            .collect(),
    )
}

pub(crate) fn decl(name: &str) -> CommandDecl {
    serde_json::from_value(json!({"name": name, "description": "An API command"})).unwrap()
}

async fn install_upgrade_and_uninstall_carry_the_manifest_commands(store: DynStore, _: LegacyDb) {
    let app = poll_app(&store, &poll()).await;
    assert_eq!(live_names(&store, app).await, ["find", "purge", "vote"]);
    let api = NewCommand {
        owner_id: app,
        decl: decl("mine"),
        conversation_id: None,
        max: 10,
        now: T + 1,
    };
    assert!(matches!(
        store.register_command(&api).await.unwrap(),
        Registered::Written(_)
    ));
    let vote = store
        .commands_of(app)
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.name == "vote")
        .unwrap();
    let mut next = poll_manifest();
    next["commands"][0]["requiredLevel"] = json!("trigger");
    next["commands"][2] = json!({"name": "tally", "description": "Count"});
    let next = manifest::validate(&next, &Config::default().manifest_bounds()).unwrap();
    let up = store
        .upgrade(app, &next, Actor::App(app), T + 2, &no_events)
        .await
        .unwrap();
    assert_eq!(up.commands.added, ["tally"]);
    assert_eq!(up.commands.changed, ["vote"]);
    assert_eq!(up.commands.removed, ["purge"]);
    assert_eq!(
        live_names(&store, app).await,
        ["find", "mine", "tally", "vote"]
    );
    let after = store.command(vote.id).await.unwrap().unwrap();
    assert_eq!(
        (after.version, after.required_level.as_str()),
        (2, "trigger")
    );
    let uninstalled = store.installation(app).await.unwrap().unwrap();
    let gone = store
        .uninstall(uninstalled.id, Actor::Operator, T + 3, &|_| Vec::new())
        .await
        .unwrap();
    assert_eq!(gone.removed_commands, ["find", "mine", "tally", "vote"]);
    assert!(store.commands_of(app).await.unwrap().is_empty());
    assert_eq!(store.command(vote.id).await.unwrap(), None);
    // Without a live installation an upgrade changes the manifest only.
    let up = store
        .upgrade(app, &poll(), Actor::Operator, T + 4, &no_events)
        .await
        .unwrap();
    assert_eq!(up.commands, Default::default());
    assert!(store.commands_of(app).await.unwrap().is_empty());
    let filter = ActionFilter { app: Some(app) };
    let actions = store.actions(filter, None, 10).await.unwrap();
    let details: Vec<_> = actions.iter().map(|a| a.details.clone()).collect();
    let d = |added: &[&str], changed: &[&str], removed: &[&str]| {
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        Some(switchboard::store::ActionDetails {
            commands_added: v(added),
            commands_changed: v(changed),
            commands_removed: v(removed),
            components_disabled: 0,
            subscription_id: None,
        })
    };
    assert_eq!(
        details,
        [
            d(&["vote", "find", "purge"], &[], &[]),
            d(&["tally"], &["vote"], &["purge"]),
            d(&[], &[], &["find", "mine", "tally", "vote"]),
            None,
        ]
    );
}

async fn api_commands_keep_their_limit_and_one_name_per_place(store: DynStore, _: LegacyDb) {
    let app = poll_app(&store, &poll()).await;
    let new = |name: &str, place: Option<Uuid>, max: usize| NewCommand {
        owner_id: app,
        decl: decl(name),
        conversation_id: place,
        max,
        now: T,
    };
    let conflict = |r: Result<_, StoreError>, says: &str| match r {
        Err(StoreError::Conflict(m)) => assert!(m.contains(says), "{m}"),
        other => panic!("expected a conflict with {says:?}, got {other:?}"),
    };
    conflict(store.register_command(&new("vote", None, 10)).await, "vote");
    conflict(
        store.register_command(&new("one", None, 3)).await,
        COMMAND_LIMIT,
    );
    // A place-scoped command may share a hub-wide one's name, once.
    let person = principal(PrincipalKind::Person, "sam");
    let (_, key) = new_key(PrincipalKind::Person);
    store.create_person(&person, &key, None).await.unwrap();
    let place = channel(&store, person.id).await;
    let Registered::Written(scoped) = store
        .register_command(&new("vote", Some(place), 10))
        .await
        .unwrap()
    else {
        panic!("not registered");
    };
    assert_eq!(scoped.conversation_id, Some(place));
    conflict(
        store.register_command(&new("vote", Some(place), 10)).await,
        "vote",
    );
    let offered = store.commands_offered(place).await.unwrap();
    assert_eq!(offered.len(), 4, "three hub-wide and the scoped one");
    assert_eq!(
        store.commands_offered(Uuid::new_v4()).await.unwrap().len(),
        3
    );
    // Remove: the owner's own only; a second time it is gone.
    let other = Uuid::new_v4();
    assert!(matches!(
        store.remove_command(other, scoped.id, T).await,
        Err(StoreError::NotFound)
    ));
    store.remove_command(app, scoped.id, T).await.unwrap();
    assert!(matches!(
        store.remove_command(app, scoped.id, T).await,
        Err(StoreError::NotFound)
    ));
    // Without commands:write, or suspended, nothing is registered: the
    // refusal says what the transaction held.
    store
        .set_scopes(
            app,
            ScopeSet::of([Scope::EventsSubscribe]),
            Actor::Operator,
            T + 1,
            &no_events,
        )
        .await
        .unwrap();
    let refused = store.register_command(&new("late", None, 10)).await;
    let Ok(Registered::Refused(Some(facts))) = refused else {
        panic!("not refused: {refused:?}");
    };
    assert_eq!(facts.state, InstallationState::Active);
    assert!(!facts.scopes.contains(Scope::CommandsWrite));
    let all = ScopeSet::of([Scope::CommandsWrite, Scope::EventsSubscribe]);
    store
        .set_scopes(app, all, Actor::Operator, T + 2, &no_events)
        .await
        .unwrap();
    let live = store.installation(app).await.unwrap().unwrap();
    store
        .transition(
            live.id,
            Transition::Suspend,
            Actor::Operator,
            T + 3,
            &no_events,
        )
        .await
        .unwrap();
    let refused = store.register_command(&new("late", None, 10)).await;
    let Ok(Registered::Refused(Some(facts))) = refused else {
        panic!("not refused: {refused:?}");
    };
    assert_eq!(facts.state, InstallationState::Suspended);
    assert_eq!(live_names(&store, app).await, ["find", "purge", "vote"]);
}

/// A channel, for a command scoped to it.
async fn channel(store: &DynStore, creator: Uuid) -> Uuid {
    let space = Uuid::now_v7();
    let s = NewSpace {
        id: space,
        name: "support".into(),
        created_at: 1,
    };
    store.create_space(&s).await.unwrap();
    let c = NewChannel {
        id: Uuid::now_v7(),
        space_id: space,
        name: "general".into(),
        created_by: creator,
        created_at: 2,
    };
    store.create_channel(&c).await.unwrap().id
}

pub(crate) fn invocation(app: Uuid, command: Uuid, client: Option<&str>) -> NewInvocation {
    let i = InvocationRecord {
        id: Uuid::now_v7(),
        command_id: command,
        app_id: app,
        actor_id: Uuid::nil(),
        conversation_id: Uuid::new_v4(),
        thread_id: None,
        client_invocation_id: client.map(str::to_string),
        created_at: T + 10,
    };
    NewInvocation {
        event: NewEvent::new(
            app,
            "app/command/invoked",
            json!({"invocation": {"invocationId": i.id}}),
        ),
        invocation: i,
        idem: None,
    }
}

pub(crate) async fn jobs(raw: &LegacyDb) -> usize {
    raw.texts(
        "SELECT subject AS t FROM jobs WHERE kind = 'app_command_dispatch'",
        "SELECT subject::text AS t FROM jobs WHERE kind = 'app_command_dispatch'",
        None,
    )
    .await
    .len()
}

async fn an_invoke_writes_its_row_event_and_job_or_nothing(store: DynStore, raw: LegacyDb) {
    let app = poll_app(&store, &poll()).await;
    let vote = store
        .commands_of(app)
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.name == "vote")
        .unwrap();
    let first = invocation(app, vote.id, Some("c-1"));
    let Invoked::Written {
        invocation: row,
        events,
    } = store.invoke(&first).await.unwrap()
    else {
        panic!("not written");
    };
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].audience, app);
    assert_eq!(store.invocation(row.id).await.unwrap(), Some(row.clone()));
    assert_eq!(jobs(&raw).await, 1);
    // The same client id: the first, nothing written.
    let again = invocation(app, vote.id, Some("c-1"));
    assert_eq!(store.invoke(&again).await.unwrap(), Invoked::Duplicate(row));
    assert_eq!(jobs(&raw).await, 1);
    // An idempotency record taken already: nothing written.
    let record = IdempotencyRecord {
        scope: "command.invoke|test".into(),
        key: "k".into(),
        result: IdempotentResponse {
            request_hash: "h".into(),
            status: 202,
            response: "{}".into(),
        },
    };
    let mut keyed = invocation(app, vote.id, None);
    keyed.idem = Some(record.clone());
    assert!(matches!(
        store.invoke(&keyed).await.unwrap(),
        Invoked::Written { .. }
    ));
    let mut twin = invocation(app, vote.id, None);
    twin.idem = Some(record);
    assert!(matches!(
        store.invoke(&twin).await,
        Err(StoreError::IdempotencyTaken)
    ));
    assert_eq!(jobs(&raw).await, 2);
    // The same client id on another command is another invoke.
    let find = store
        .commands_of(app)
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.name == "find")
        .unwrap();
    let elsewhere = invocation(app, find.id, Some("c-1"));
    let Invoked::Written {
        invocation: row, ..
    } = store.invoke(&elsewhere).await.unwrap()
    else {
        panic!("another command's client id answered as a duplicate");
    };
    assert_eq!(row.command_id, find.id);
    assert_eq!(jobs(&raw).await, 3);
    // Without events:subscribe the job and the event are written (the
    // event is the options' durable record; reading it needs the scope).
    store
        .set_scopes(
            app,
            ScopeSet::of([Scope::CommandsWrite]),
            Actor::Operator,
            T + 20,
            &no_events,
        )
        .await
        .unwrap();
    let unsubscribed = invocation(app, vote.id, None);
    let Invoked::Written { events, .. } = store.invoke(&unsubscribed).await.unwrap() else {
        panic!("not written");
    };
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].id, unsubscribed.event.id);
    let id = unsubscribed.invocation.id.to_string();
    let linked = raw
        .texts(
            "SELECT event_id AS t FROM command_invocations WHERE id = $1",
            "SELECT event_id::text AS t FROM command_invocations WHERE id = $1::uuid",
            Some(&id),
        )
        .await;
    assert_eq!(linked, [unsubscribed.event.id.to_string()]);
    assert_eq!(jobs(&raw).await, 4);
    // Without commands:write, suspended, or removed: unreachable, nothing.
    store
        .set_scopes(
            app,
            ScopeSet::of([Scope::EventsSubscribe]),
            Actor::Operator,
            T + 21,
            &no_events,
        )
        .await
        .unwrap();
    assert_eq!(
        store.invoke(&invocation(app, vote.id, None)).await.unwrap(),
        Invoked::Unreachable
    );
    store
        .set_scopes(
            app,
            ScopeSet::of(Scope::ALL),
            Actor::Operator,
            T + 22,
            &no_events,
        )
        .await
        .unwrap_err();
    let all = ScopeSet::of([Scope::CommandsWrite, Scope::EventsSubscribe]);
    store
        .set_scopes(app, all, Actor::Operator, T + 22, &no_events)
        .await
        .unwrap();
    let live = store.installation(app).await.unwrap().unwrap();
    store
        .transition(
            live.id,
            Transition::Suspend,
            Actor::Operator,
            T + 23,
            &no_events,
        )
        .await
        .unwrap();
    assert_eq!(
        store.invoke(&invocation(app, vote.id, None)).await.unwrap(),
        Invoked::Unreachable
    );
    store
        .transition(
            live.id,
            Transition::Resume,
            Actor::Operator,
            T + 24,
            &no_events,
        )
        .await
        .unwrap();
    store.remove_command(app, vote.id, T + 25).await.unwrap();
    assert_eq!(
        store.invoke(&invocation(app, vote.id, None)).await.unwrap(),
        Invoked::Unreachable
    );
    assert_eq!(jobs(&raw).await, 4);
}
