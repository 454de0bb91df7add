//! Uninstall's effects, row by row (ADR 0023 §5): the installation, the
//! keys, the grants and the rights version, the tasks and their events, the
//! leases and their jobs, in one transaction; the messages stay; a
//! re-install is a new row with a new key.

use std::collections::BTreeSet;

use serde_json::json;
use switchboard::domain::authz::level::{GrantPlace, Holder};
use switchboard::domain::authz::Level;
use switchboard::domain::conversation::ConversationKind;
use switchboard::domain::event::NewEvent;
use switchboard::domain::installation::{Actor, InstallationState, LifecycleAction};
use switchboard::domain::lease::LeaseState;
use switchboard::domain::task::{TaskParticipant, TaskRole, TaskState};
use switchboard::domain::PrincipalKind;
use switchboard::store::{
    CreatedLease, DynStore, Effects, FailedTask, GrantRecord, InstallationRecord, JobKind,
    LeaseChange, NewConversation, NewInstallation, NewJob, NewLease, NewTask, Uninstalled,
};
use uuid::Uuid;

use super::{
    actions_of, installed_app, no_events, operator_install, postgres_store, sqlite_store, T,
};
use crate::store_contract::{agent_in, new_key, send_to};
use crate::store_places::{channel, grant, someone, space};
use crate::support::legacy_db::LegacyDb;

contract_raw!(uninstall_ends_keys_grants_tasks_and_leases_at_once);

/// The count `sql` (one `COUNT(*) AS n`) answers, on either dialect.
async fn count(raw: &LegacyDb, sql: &str) -> i64 {
    let sql = sql.replace("COUNT(*) AS n", "CAST(COUNT(*) AS TEXT) AS t");
    raw.texts(&sql, &sql, None).await[0].parse().unwrap()
}

/// A task of `app` with `agents` (the first initiates), waiting.
async fn task(store: &DynStore, app: Uuid, agents: &[Uuid]) -> Uuid {
    let id = Uuid::now_v7();
    let participants = agents
        .iter()
        .enumerate()
        .map(|(i, a)| TaskParticipant {
            agent_id: *a,
            role: if i == 0 {
                TaskRole::Initiator
            } else {
                TaskRole::Invited
            },
        })
        .collect();
    let new = NewTask {
        id,
        app_id: app,
        initiator_id: agents[0],
        participants,
        initial_conversation: None,
        created_at: T,
    };
    let job = NewJob::new(JobKind::TaskCreate, id, T + 1_000_000);
    store.create_task(&new, &job).await.unwrap();
    id
}

/// Accepts task `id`, opening its conversation; returns the conversation.
async fn accept(store: &DynStore, app: Uuid, id: Uuid, agents: &[Uuid]) -> Uuid {
    let conversation = Uuid::now_v7();
    let effects = Effects {
        conversations: vec![NewConversation {
            id: conversation,
            kind: ConversationKind::Task,
            name: Some("game".into()),
            task_id: Some(id),
            direct_key: None,
            template_key: None,
            created_by: app,
            participants: agents.to_vec(),
            created_at: T + 2,
        }],
        ..Default::default()
    };
    store
        .transition_task(
            id,
            TaskState::Waiting,
            TaskState::Active,
            None,
            &effects,
            T + 2,
        )
        .await
        .unwrap()
        .expect("accepted");
    conversation
}

async fn lease_on(store: &DynStore, conversation: Uuid, from: Uuid, to: Uuid) -> Uuid {
    let events = send_to(store, conversation, from, &[to]).await;
    let message_id: Uuid = events[0].payload.to_value()["message"]["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let id = Uuid::now_v7();
    let lease = NewLease {
        id,
        message_id,
        conversation_id: conversation,
        recipient_id: to,
        created_at: T + 3,
    };
    let job = NewJob::new(JobKind::DispatchAuthorize, id, T + 1_000_000);
    let created = store.create_lease(&lease, &job).await.unwrap();
    assert!(matches!(created, CreatedLease::Created(_)));
    id
}

async fn jobs_about(raw: &LegacyDb, subject: Uuid) -> i64 {
    count(
        raw,
        &format!("SELECT COUNT(*) AS n FROM jobs WHERE CAST(subject AS TEXT) = '{subject}'"),
    )
    .await
}

/// Everyone who took part: `agent/task/failed` to each participant of an
/// active task, to the initiator of a waiting one (as a rejection tells).
fn failed_events(f: &FailedTask) -> Vec<NewEvent> {
    let audience = match f.was {
        TaskState::Active => f.task.participant_ids(),
        _ => vec![f.task.initiator_id],
    };
    audience
        .into_iter()
        .map(|a| NewEvent::new(a, "agent/task/failed", json!({ "task": f.task })))
        .collect()
}

/// The app about to be uninstalled, and everything it touches.
struct Setup {
    app: Uuid,
    installation: InstallationRecord,
    agents: [Uuid; 3],
    waiting: Uuid,
    active: Uuid,
    closed: Uuid,
    other_task: Uuid,
    pending_lease: Uuid,
    granted_lease: Uuid,
    other_lease: Uuid,
    app_grant: GrantRecord,
    other_grant: GrantRecord,
    live_key: String,
    rights: i64,
    a_events: usize,
}

async fn grant_lease(store: &DynStore, lease: Uuid) {
    let change = LeaseChange {
        lease_id: lease,
        from: vec![LeaseState::Pending],
        to: LeaseState::Granted,
        reason: None,
        expires_at: Some(T + 9_000_000),
        now: T + 4,
    };
    let effects = Effects {
        schedule: vec![NewJob::new(JobKind::LeaseExpire, lease, T + 9_000_000)],
        ..Default::default()
    };
    store
        .transition_lease(&change, &effects)
        .await
        .unwrap()
        .unwrap();
}

/// Tasks: one waiting, one active with a conversation, messages and
/// leases (one pending, one granted), one closed; the bystander app's
/// active task with its lease. Grants: the app's and a person's.
async fn setup(store: &DynStore) -> Setup {
    let (app, installation) = installed_app(store).await;
    let (bystander, _) = installed_app(store).await;
    let agents = [
        agent_in(store, "a").await,
        agent_in(store, "b").await,
        agent_in(store, "c").await,
    ];
    let [a, b, c] = agents;
    let waiting = task(store, app, &[a, c]).await;
    let active = task(store, app, &[a, b]).await;
    let conversation = accept(store, app, active, &[a, b]).await;
    let pending_lease = lease_on(store, conversation, a, b).await;
    let granted_lease = lease_on(store, conversation, b, a).await;
    grant_lease(store, granted_lease).await;
    let closed = task(store, app, &[c]).await;
    accept(store, app, closed, &[c]).await;
    let effects = Effects::default();
    store
        .transition_task(
            closed,
            TaskState::Active,
            TaskState::Closed,
            None,
            &effects,
            T + 5,
        )
        .await
        .unwrap()
        .unwrap();
    let other_task = task(store, bystander, &[a, b]).await;
    let other_conversation = accept(store, bystander, other_task, &[a, b]).await;
    let other_lease = lease_on(store, other_conversation, a, b).await;
    let robin = someone(store, PrincipalKind::Person, "Robin").await;
    let s = space(store, "games").await;
    let room = GrantPlace::Channel(channel(store, s, "room", robin).await.id);
    let app_grant = store
        .put_grant(&grant(Holder::Principal(app), room, Level::Write))
        .await
        .unwrap();
    let other_grant = store
        .put_grant(&grant(Holder::Principal(robin), room, Level::Admin))
        .await
        .unwrap();
    // A rotation first: the uninstall revokes the one active key.
    let (_, live) = new_key(PrincipalKind::App);
    assert_eq!(
        store
            .rotate_keys(app, &live, T + 6, None)
            .await
            .unwrap()
            .len(),
        1
    );
    Setup {
        app,
        installation,
        agents,
        waiting,
        active,
        closed,
        other_task,
        pending_lease,
        granted_lease,
        other_lease,
        app_grant,
        other_grant,
        live_key: live.key_id,
        rights: store.rights_version().await.unwrap(),
        a_events: store.events_after(a, 0, 100).await.unwrap().len(),
    }
}

async fn check_row_keys_grants(store: &DynStore, s: &Setup, gone: &Uninstalled) {
    assert_eq!(gone.change.before, s.installation);
    assert_eq!(gone.change.after.state, InstallationState::Uninstalled);
    assert_eq!(store.installation(s.app).await.unwrap(), None);
    assert_eq!(gone.revoked_keys, vec![s.live_key.clone()]);
    let key = store.key(&s.live_key).await.unwrap().unwrap();
    assert_eq!(key.revoked_at, Some(T + 100));
    assert!(store.grant(s.app_grant.id).await.unwrap().is_none());
    assert!(store.grant(s.other_grant.id).await.unwrap().is_some());
    assert!(
        store.rights_version().await.unwrap() > s.rights,
        "other processes learn the grants went"
    );
}

/// Waiting and active failed, the closed one left, the gate job gone, the
/// bystander's task untouched.
async fn check_tasks(store: &DynStore, raw: &LegacyDb, s: &Setup, gone: &Uninstalled) {
    let mut failed: Vec<(Uuid, TaskState)> = gone
        .failed_tasks
        .iter()
        .map(|f| (f.task.id, f.was))
        .collect();
    failed.sort_by_key(|(id, _)| *id);
    assert_eq!(
        failed,
        [
            (s.waiting, TaskState::Waiting),
            (s.active, TaskState::Active)
        ]
    );
    for id in [s.waiting, s.active] {
        let t = store.task(id).await.unwrap().unwrap().task;
        assert_eq!(t.state, TaskState::Failed);
        let failure = t.failure.unwrap();
        assert_eq!(
            (failure.code.as_str(), failure.reason),
            ("app_uninstalled", None)
        );
    }
    assert_eq!(jobs_about(raw, s.waiting).await, 0, "the gate job went");
    let state = |id| async move { store.task(id).await.unwrap().unwrap().task.state };
    assert_eq!(state(s.closed).await, TaskState::Closed);
    assert_eq!(state(s.other_task).await, TaskState::Active);
}

/// Pending denied, granted expired, their jobs gone, their messages kept
/// with their author; the bystander's lease live.
async fn check_leases(store: &DynStore, raw: &LegacyDb, s: &Setup, gone: &Uninstalled) {
    let ended: BTreeSet<Uuid> = gone.ended_leases.iter().copied().collect();
    assert_eq!(ended, BTreeSet::from([s.pending_lease, s.granted_lease]));
    let [a, b, _] = s.agents;
    for (id, state, author) in [
        (s.pending_lease, LeaseState::Denied, a),
        (s.granted_lease, LeaseState::Expired, b),
    ] {
        let l = store.lease(id).await.unwrap().unwrap();
        assert_eq!(
            (l.state, l.reason.as_deref()),
            (state, Some("app_uninstalled"))
        );
        assert_eq!(jobs_about(raw, id).await, 0);
        let (message, _) = store.message(l.message_id).await.unwrap().unwrap();
        assert_eq!(
            message.sender_id, author,
            "the message stays, with its author"
        );
    }
    let other = store.lease(s.other_lease).await.unwrap().unwrap();
    assert_eq!(other.state, LeaseState::Pending);
    assert_eq!(jobs_about(raw, s.other_lease).await, 1);
}

/// The active task's participants both, the waiting task's initiator only;
/// written in the same transaction, in the logs.
async fn check_events(store: &DynStore, s: &Setup, gone: &Uninstalled) {
    let [a, b, c] = s.agents;
    let task_of = |e: &switchboard::domain::event::StoredEvent| -> Uuid {
        e.payload.to_value()["task"]["id"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    };
    let audiences: Vec<(Uuid, Uuid)> = gone
        .events
        .iter()
        .map(|e| (task_of(e), e.audience))
        .collect();
    let expected = BTreeSet::from([(s.waiting, a), (s.active, a), (s.active, b)]);
    assert_eq!(audiences.iter().copied().collect::<BTreeSet<_>>(), expected);
    assert_eq!(audiences.len(), 3);
    let logged = store.events_after(a, 0, 100).await.unwrap();
    assert_eq!(logged.len(), s.a_events + 2);
    for e in &logged[s.a_events..] {
        assert_eq!(e.event_type, "agent/task/failed");
        let failure = &e.payload.to_value()["task"]["failure"];
        assert_eq!(failure["code"], json!("app_uninstalled"));
    }
    let c_events = store.events_after(c, 0, 100).await.unwrap();
    assert!(
        c_events.iter().all(|e| e.event_type != "agent/task/failed"),
        "c was only invited to the waiting task"
    );
}

/// A re-install is a new row, issued a key since none is active; the
/// uninstalled row stays for history.
async fn check_reinstall(store: &DynStore, raw: &LegacyDb, s: &Setup) {
    let (_, fresh) = new_key(PrincipalKind::App);
    let new = NewInstallation {
        key: Some(fresh.clone()),
        ..operator_install(s.app, None, T + 200)
    };
    let again = store.install(&new, &no_events).await.unwrap();
    assert!(again.key_issued);
    assert_ne!(again.installation.id, s.installation.id);
    let key = store.key(&fresh.key_id).await.unwrap().unwrap();
    assert!(key.revoked_at.is_none());
    let rows = format!(
        "SELECT COUNT(*) AS n FROM installations WHERE CAST(app_id AS TEXT) = '{}'",
        s.app
    );
    assert_eq!(count(raw, &rows).await, 2);
    assert_eq!(
        actions_of(store, s.app).await,
        [
            LifecycleAction::Install,
            // The setup's grant to the app, audited in its transaction.
            LifecycleAction::GrantManage,
            LifecycleAction::Uninstall,
            LifecycleAction::Install
        ]
    );
}

async fn uninstall_ends_keys_grants_tasks_and_leases_at_once(store: DynStore, raw: LegacyDb) {
    let s = setup(&store).await;
    let messages = count(&raw, "SELECT COUNT(*) AS n FROM messages").await;
    let gone = store
        .uninstall(s.installation.id, Actor::Operator, T + 100, &failed_events)
        .await
        .unwrap();
    check_row_keys_grants(&store, &s, &gone).await;
    check_tasks(&store, &raw, &s, &gone).await;
    check_leases(&store, &raw, &s, &gone).await;
    check_events(&store, &s, &gone).await;
    assert_eq!(
        count(&raw, "SELECT COUNT(*) AS n FROM messages").await,
        messages
    );
    check_reinstall(&store, &raw, &s).await;
}
