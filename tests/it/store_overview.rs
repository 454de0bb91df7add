//! The console's reads (`store::OverviewStore`, ADR 0030), on SQLite and a
//! throwaway PostgreSQL: counts are whole, lists are bounded and ordered as
//! documented, and an empty store reads as nothing.

use switchboard::domain::authz::{Action, Reason, ResourceKind};
use switchboard::domain::installation::InstallationState;
use switchboard::domain::task::{TaskParticipant, TaskRole};
use switchboard::domain::PrincipalKind;
use switchboard::store::{
    AuditRecord, DenialRecord, DynStore, EventBacklog, JobBacklog, JobKind, NewJob, NewTask,
    Overview,
};
use uuid::Uuid;

use crate::store_contract::{agent_in, app_in, contract, group_of, postgres, send_to, sqlite};

contract!(
    an_empty_store_reads_as_nothing,
    the_overview_counts_whole_and_lists_bounded,
    the_event_backlog_is_what_readers_have_not_acknowledged,
    live_leases_are_counted_and_listed_oldest_first,
    the_event_backlog_counts_only_events_that_still_exist,
);

async fn an_empty_store_reads_as_nothing(store: DynStore) {
    assert_eq!(
        store.overview(1_000, 10).await.unwrap(),
        Overview::default()
    );
    assert!(store.apps_overview(10).await.unwrap().is_empty());
    assert!(store.principal_names(&[]).await.unwrap().is_empty());
    assert!(store
        .principal_names(&[Uuid::now_v7()])
        .await
        .unwrap()
        .is_empty());
}

fn denial(actor: Uuid, last_at: i64) -> AuditRecord {
    AuditRecord {
        id: Uuid::now_v7(),
        denial: DenialRecord {
            actor_id: actor,
            actor_kind: PrincipalKind::Agent,
            action: Action::MessageCreate,
            reason: Reason::LevelInsufficient,
            resource_kind: ResourceKind::Conversation,
            resource_id: Uuid::now_v7(),
        },
        first_at: last_at - 5,
        last_at,
        count: 2,
    }
}

async fn the_overview_counts_whole_and_lists_bounded(store: DynStore) {
    let app = app_in(&store).await;
    let alice = agent_in(&store, "alice").await;
    let mut jobs = Vec::new();
    let mut tasks = Vec::new();
    for i in 0..3 {
        let task = NewTask {
            id: Uuid::now_v7(),
            app_id: app,
            initiator_id: alice,
            participants: vec![TaskParticipant {
                agent_id: alice,
                role: TaskRole::Initiator,
            }],
            initial_conversation: None,
            created_at: 30 - i * 10,
        };
        let job = NewJob::new(JobKind::TaskCreate, task.id, 100 + i);
        store.create_task(&task, &job).await.unwrap();
        tasks.push(task.id);
        jobs.push(job.id);
    }
    // One job held by a worker until 5000.
    store.claim_job(jobs[0], 101, 5_000).await.unwrap().unwrap();
    let records = [
        denial(alice, 2_000),
        denial(alice, 3_000),
        denial(app, 1_000),
    ];
    store.flush_denials(&records).await.unwrap();

    let o = store.overview(101, 2).await.unwrap();
    assert_eq!(
        o.tasks,
        vec![("waiting".to_string(), 3)],
        "counts are whole"
    );
    let waiting: Vec<Uuid> = o.waiting.iter().map(|t| t.id).collect();
    assert_eq!(
        waiting,
        [tasks[2], tasks[1]],
        "the longest waiting first, at most 2"
    );
    assert_eq!(
        (o.waiting[0].app_id, o.waiting[0].initiator_id),
        (app, alice)
    );
    assert_eq!(o.waiting[0].updated_at, 10);
    assert_eq!(
        o.jobs,
        vec![JobBacklog {
            kind: JobKind::TaskCreate.as_str().to_string(),
            total: 3,
            due: 2,
            locked: 1,
            oldest_run_at: Some(100),
        }]
    );
    let denials: Vec<i64> = o.denials.iter().map(|d| d.last_at).collect();
    assert_eq!(
        denials,
        [3_000, 2_000],
        "the latest denials first, at most 2"
    );
    assert_eq!(o.denials[0], records[1]);
    assert!(o.leases.is_empty() && o.live_leases.is_empty());
    assert_eq!(o.events, EventBacklog::default());

    let apps = store.apps_overview(10).await.unwrap();
    assert_eq!(apps.len(), 1);
    assert_eq!(apps[0].app.principal.id, app);
    let installation = apps[0].installation.expect("installed");
    assert_eq!(installation.state, InstallationState::Active);

    let names = store
        .principal_names(&[app, alice, Uuid::now_v7()])
        .await
        .unwrap();
    assert_eq!(names.len(), 2);
    assert_eq!(names[&alice], "alice");
    assert_eq!(names[&app], "app");
}

async fn the_event_backlog_is_what_readers_have_not_acknowledged(store: DynStore) {
    let a = agent_in(&store, "a").await;
    let b = agent_in(&store, "b").await;
    let c = agent_in(&store, "c").await;
    let group = group_of(&store, &[a, b, c]).await;
    for _ in 0..5 {
        send_to(&store, group, a, &[b, c]).await;
    }
    let backlog = |o: Overview| o.events;
    let read = backlog(store.overview(0, 10).await.unwrap());
    assert_eq!(
        read,
        EventBacklog {
            streams: 2,
            unacked: 10
        }
    );
    store.ack_events(b, 5).await.unwrap();
    store.ack_events(c, 2).await.unwrap();
    let read = backlog(store.overview(0, 10).await.unwrap());
    assert_eq!(
        read,
        EventBacklog {
            streams: 1,
            unacked: 3
        }
    );
}

async fn live_leases_are_counted_and_listed_oldest_first(store: DynStore) {
    use switchboard::domain::lease::LeaseState;
    use switchboard::store::{Effects, LeaseChange, NewLease};
    let a = agent_in(&store, "a").await;
    let b = agent_in(&store, "b").await;
    let c = agent_in(&store, "c").await;
    let group = group_of(&store, &[a, b, c]).await;
    let events = send_to(&store, group, a, &[b, c]).await;
    let message_id: Uuid = events[0].payload.to_value()["message"]["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let mut ids = Vec::new();
    for (recipient, created_at) in [(c, 40), (b, 20)] {
        let id = Uuid::now_v7();
        let lease = NewLease {
            id,
            message_id,
            conversation_id: group,
            recipient_id: recipient,
            created_at,
        };
        store
            .create_lease(&lease, &NewJob::new(JobKind::DispatchAuthorize, id, 50))
            .await
            .unwrap();
        ids.push(id);
    }
    let o = store.overview(0, 10).await.unwrap();
    assert_eq!(o.leases, vec![("pending".to_string(), 2)]);
    let listed: Vec<(Uuid, i64)> = o.live_leases.iter().map(|l| (l.id, l.created_at)).collect();
    assert_eq!(listed, [(ids[1], 20), (ids[0], 40)], "oldest first");
    assert_eq!(o.live_leases[0].recipient_id, b);
    assert_eq!(o.live_leases[0].state, "pending");
    // A lease granted (neither pending nor held) is no longer live here.
    let grant = LeaseChange {
        lease_id: ids[1],
        from: vec![LeaseState::Pending],
        to: LeaseState::Granted,
        reason: None,
        expires_at: Some(99),
        now: 21,
    };
    store
        .transition_lease(&grant, &Effects::default())
        .await
        .unwrap()
        .unwrap();
    let o = store.overview(0, 1).await.unwrap();
    assert_eq!(o.leases, vec![("pending".to_string(), 1)]);
    assert_eq!(o.live_leases.len(), 1);
    assert_eq!(o.live_leases[0].id, ids[0]);
}

async fn the_event_backlog_counts_only_events_that_still_exist(store: DynStore) {
    let a = agent_in(&store, "a").await;
    let b = agent_in(&store, "b").await;
    let c = agent_in(&store, "c").await;
    let group = group_of(&store, &[a, b, c]).await;
    for _ in 0..5 {
        send_to(&store, group, a, &[b, c]).await;
    }
    store.ack_events(c, 4).await.unwrap();
    // Retention keeps each log's newest two: b's first three are gone
    // unread, c has one left to read of the two kept.
    assert!(store.prune_events(0, 2).await.unwrap() > 0);
    let read = store.overview(0, 10).await.unwrap().events;
    assert_eq!(
        read,
        EventBacklog {
            streams: 2,
            unacked: 3
        }
    );
}
