//! Hidden costs what missing costs, counted in store statements (ADR 0020
//! §3), on SQLite and a throwaway PostgreSQL: each read the access layer
//! decides on runs as many statements for an existing row as for a random
//! id. The access unit tests (`src/access/load_tests.rs`) count the whole
//! decision on a fake that costs each read what these tests measure.

use std::future::Future;

use switchboard::domain::conversation::ConversationKind;
use switchboard::domain::task::TaskRole;
use switchboard::domain::PrincipalKind;
use switchboard::hub::Membership;
use switchboard::store::{
    count_statements, CreatedConversation, CreatedLease, DynStore, JobKind, NewChannel,
    NewConversation, NewJob, NewLease, NewSpace,
};
use uuid::Uuid;

use crate::store_contract::{agent_in, app_in, contract, group_of, new_key, postgres, principal};
use crate::store_contract::{send_to, sqlite};
use crate::store_reads::task;

contract!(
    a_conversation_and_its_participants_are_one_statement,
    a_membership_costs_the_same_for_every_kind_and_for_none,
    a_task_and_its_participants_are_one_statement,
    a_lease_brings_its_task_app_in_one_statement,
);

async fn statements<T>(work: impl Future<Output = T>) -> (T, u64) {
    count_statements(work).await
}

async fn a_conversation_and_its_participants_are_one_statement(store: DynStore) {
    let (a, b, c) = (
        agent_in(&store, "a").await,
        agent_in(&store, "b").await,
        agent_in(&store, "c").await,
    );
    let group = group_of(&store, &[a, b, c]).await;
    let (found, n) = statements(store.conversation(group)).await;
    let found = found.unwrap().unwrap();
    assert_eq!(found.participants.len(), 3);
    assert_eq!(n, 1, "an existing conversation");
    let (missing, n) = statements(store.conversation(Uuid::new_v4())).await;
    assert!(missing.unwrap().is_none());
    assert_eq!(n, 1, "a random id");
}

async fn a_membership_costs_the_same_for_every_kind_and_for_none(store: DynStore) {
    let (a, b) = (agent_in(&store, "a").await, agent_in(&store, "b").await);
    let group = group_of(&store, &[a, b]).await;
    let person = principal(PrincipalKind::Person, "sam");
    let (_, key) = new_key(PrincipalKind::Person);
    store.create_person(&person, &key, None).await.unwrap();
    let space = Uuid::now_v7();
    let s = NewSpace {
        id: space,
        name: "support".into(),
        created_at: 1,
    };
    store.create_space(&s).await.unwrap();
    let channel = store
        .create_channel(&NewChannel {
            id: Uuid::now_v7(),
            space_id: space,
            name: "general".into(),
            created_by: person.id,
            created_at: 2,
        })
        .await
        .unwrap()
        .id;
    let mut costs = Vec::new();
    for (id, exists) in [(group, true), (channel, true), (Uuid::new_v4(), false)] {
        let (read, n) = statements(Membership::read(&store, id)).await;
        let read = read.unwrap();
        assert_eq!(read.is_some(), exists);
        if id == channel {
            assert!(read.unwrap().channel.is_some(), "a channel has its place");
        }
        costs.push(n);
    }
    assert_eq!(costs, [3, 3, 3], "group, channel, random id");
}

async fn a_task_and_its_participants_are_one_statement(store: DynStore) {
    let app = app_in(&store).await;
    let (a, b) = (agent_in(&store, "a").await, agent_in(&store, "b").await);
    let t = task(app, &[(a, TaskRole::Initiator), (b, TaskRole::Invited)]);
    let job = NewJob::new(JobKind::TaskCreate, t.id, 10);
    store.create_task(&t, &job).await.unwrap();
    let (found, n) = statements(store.task(t.id)).await;
    let roles: Vec<_> = found.unwrap().unwrap().task.participants;
    assert_eq!(roles.len(), 2);
    assert_eq!(n, 1, "an existing task");
    let (missing, n) = statements(store.task(Uuid::new_v4())).await;
    assert!(missing.unwrap().is_none());
    assert_eq!(n, 1, "a random id");
}

async fn a_lease_brings_its_task_app_in_one_statement(store: DynStore) {
    let app = app_in(&store).await;
    let (a, b) = (agent_in(&store, "a").await, agent_in(&store, "b").await);
    let t = task(app, &[(a, TaskRole::Initiator), (b, TaskRole::Invited)]);
    let job = NewJob::new(JobKind::TaskCreate, t.id, 10);
    store.create_task(&t, &job).await.unwrap();
    let town = NewConversation {
        id: Uuid::now_v7(),
        kind: ConversationKind::Task,
        name: Some("town".into()),
        task_id: Some(t.id),
        direct_key: None,
        template_key: None,
        created_by: app,
        participants: vec![a, b],
        created_at: 5,
    };
    let CreatedConversation::Created(town, _) =
        store.create_conversation(&town, &[]).await.unwrap()
    else {
        panic!("new conversation");
    };
    let group = group_of(&store, &[a, b]).await;
    for (conversation, task_app) in [(town.id, Some(app)), (group, None)] {
        let lease_id = lease_on(&store, conversation, a, b).await;
        let (found, n) = statements(store.lease_for_access(lease_id)).await;
        let found = found.unwrap().unwrap();
        assert_eq!(found.lease.lease_id, lease_id);
        assert_eq!(found.task_app, task_app);
        assert_eq!(n, 1, "an existing lease");
    }
    let (missing, n) = statements(store.lease_for_access(Uuid::new_v4())).await;
    assert!(missing.unwrap().is_none());
    assert_eq!(n, 1, "a random id");
}

/// A lease for `recipient` on a message `sender` sends in `conversation`.
async fn lease_on(store: &DynStore, conversation: Uuid, sender: Uuid, recipient: Uuid) -> Uuid {
    let events = send_to(store, conversation, sender, &[recipient]).await;
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
        recipient_id: recipient,
        created_at: 20,
    };
    let job = NewJob::new(JobKind::DispatchAuthorize, id, 30);
    match store.create_lease(&lease, &job).await.unwrap() {
        CreatedLease::Created(l) => l.lease_id,
        CreatedLease::Existing(_) => panic!("new lease"),
    }
}
