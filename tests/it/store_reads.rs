//! The store contract, continued: paging and visibility, idempotency records
//! and verdicts, on both backends. These are the queries whose SQL changed
//! spelling when each pair of dialect copies became one text (ADR 0014):
//! the optional cursor, the participants' order, the `integer` status
//! column, and the verdict write that each dialect guards its own way.

use switchboard::domain::conversation::ConversationKind;
use switchboard::domain::message::{Origin, Part};
use switchboard::domain::task::{TaskParticipant, TaskRole, TaskState};
use switchboard::domain::PrincipalKind;
use switchboard::store::{
    DynStore, Effects, Fanout, IdempotencyRecord, IdempotentResponse, InsertedMessage, JobKind,
    MessageDecided, MessageOutcome, MessagePage, NewConversation, NewJob, NewMessage, NewTask,
    StoreError, Verdict,
};
use uuid::Uuid;

use crate::store_contract::{
    agent_in, app_in, contract, group_of, new_key, postgres, principal, send_to, sqlite,
};

contract!(
    conversations_page_by_id,
    messages_page_by_seq_as_each_viewer_sees_them,
    tasks_page_by_id,
    idempotency_records_replay,
    forwards_need_an_active_task,
);

async fn conversations_page_by_id(store: DynStore) {
    let (a, b, c) = (
        agent_in(&store, "a").await,
        agent_in(&store, "b").await,
        agent_in(&store, "c").await,
    );
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(group_of(&store, &[c, a, b]).await);
    }
    let page = |after, limit| {
        let store = store.clone();
        async move {
            let list = store.conversations_of(a, after, limit).await.unwrap();
            list.into_iter().map(|c| c.id).collect::<Vec<_>>()
        }
    };
    assert_eq!(page(None, 2).await, ids[..2]);
    assert_eq!(page(Some(ids[1]), 10).await, ids[2..]);
    assert!(page(Some(ids[2]), 10).await.is_empty());
    assert!(store
        .conversations_of(Uuid::new_v4(), None, 10)
        .await
        .unwrap()
        .is_empty());

    // Those who joined together come in id order, later joiners after.
    let mut members = vec![a, b, c];
    members.sort_by_key(|m| m.to_string());
    let first = store.conversation(ids[0]).await.unwrap().unwrap();
    assert_eq!(first.participants, members);
    let d = agent_in(&store, "d").await;
    store
        .add_participants(ids[0], &[d, a], &[], 99)
        .await
        .unwrap();
    members.push(d);
    let first = store.conversation(ids[0]).await.unwrap().unwrap();
    assert_eq!(first.participants, members, "a joins once");
}

async fn seqs(store: &DynStore, conversation: Uuid, page: MessagePage) -> Vec<u64> {
    let list = store.messages(conversation, page).await.unwrap();
    list.into_iter().map(|m| m.seq).collect()
}

fn page(viewer: Uuid, after: Option<u64>, before: Option<u64>, limit: u32) -> MessagePage {
    MessagePage {
        viewer,
        after,
        before,
        limit,
        place: switchboard::store::PagePlace::Seen,
    }
}

async fn messages_page_by_seq_as_each_viewer_sees_them(store: DynStore) {
    let (a, b, c) = (
        agent_in(&store, "a").await,
        agent_in(&store, "b").await,
        agent_in(&store, "c").await,
    );
    let group = group_of(&store, &[a, b, c]).await;
    let to_b = send_to(&store, group, a, &[b]).await;
    send_to(&store, group, a, &[c]).await;
    send_to(&store, group, a, &[b, c]).await;

    assert_eq!(seqs(&store, group, page(b, None, None, 10)).await, [1, 3]);
    assert_eq!(seqs(&store, group, page(c, None, None, 10)).await, [2, 3]);
    assert_eq!(
        seqs(&store, group, page(a, None, None, 10)).await,
        [1, 2, 3]
    );
    let stranger = Uuid::new_v4();
    assert!(seqs(&store, group, page(stranger, None, None, 10))
        .await
        .is_empty());
    assert_eq!(seqs(&store, group, page(a, Some(1), None, 1)).await, [2]);
    assert_eq!(seqs(&store, group, page(a, None, Some(3), 1)).await, [2]);
    assert_eq!(
        seqs(&store, group, page(a, None, Some(3), 5)).await,
        [1, 2],
        "oldest first"
    );

    let first: Uuid = to_b[0].payload.to_value()["message"]["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(store.is_recipient(first, b).await.unwrap());
    assert!(!store.is_recipient(first, c).await.unwrap());
    let (message, verdict) = store.message(first).await.unwrap().unwrap();
    assert_eq!(message.parts, vec![Part::Text { text: "hi".into() }]);
    assert_eq!(verdict, Verdict::Forwarded { recipients: 1 });
}

pub(crate) fn task(app: Uuid, members: &[(Uuid, TaskRole)]) -> NewTask {
    NewTask {
        id: Uuid::now_v7(),
        app_id: app,
        initiator_id: members[0].0,
        participants: members
            .iter()
            .map(|(agent_id, role)| TaskParticipant {
                agent_id: *agent_id,
                role: *role,
            })
            .collect(),
        initial_conversation: Some("{\"name\":\"town\"}".into()),
        created_at: 3,
    }
}

async fn tasks_page_by_id(store: DynStore) {
    let app = app_in(&store).await;
    let (a, b) = (agent_in(&store, "a").await, agent_in(&store, "b").await);
    let mut ids = Vec::new();
    for i in 0..3 {
        let members = if i < 2 {
            vec![(a, TaskRole::Initiator), (b, TaskRole::Invited)]
        } else {
            vec![(a, TaskRole::Initiator)]
        };
        let t = task(app, &members);
        let job = NewJob::new(JobKind::TaskCreate, t.id, 10);
        store.create_task(&t, &job).await.unwrap();
        ids.push(t.id);
    }
    let page = |agent, after, limit| {
        let store = store.clone();
        async move {
            let list = store.tasks_of(agent, after, limit).await.unwrap();
            list.into_iter().map(|t| t.id).collect::<Vec<_>>()
        }
    };
    assert_eq!(page(a, None, 2).await, ids[..2]);
    assert_eq!(page(a, Some(ids[1]), 10).await, ids[2..]);
    assert_eq!(page(b, None, 10).await, ids[..2]);
    assert!(page(b, Some(ids[1]), 10).await.is_empty());

    let record = store.task(ids[0]).await.unwrap().unwrap();
    let roles: Vec<(Uuid, TaskRole)> = record
        .task
        .participants
        .iter()
        .map(|p| (p.agent_id, p.role))
        .collect();
    assert_eq!(roles, [(a, TaskRole::Initiator), (b, TaskRole::Invited)]);
    assert_eq!(record.task.state, TaskState::Waiting);
    assert!(record.task.failure.is_none());
    assert_eq!(
        record.initial_conversation.as_deref(),
        Some("{\"name\":\"town\"}")
    );
}

async fn idempotency_records_replay(store: DynStore) {
    let record = IdempotencyRecord {
        scope: "agent.register".into(),
        key: "k-1".into(),
        result: IdempotentResponse {
            request_hash: "h".into(),
            status: 201,
            response: "{\"ok\":true}".into(),
        },
    };
    let p = principal(PrincipalKind::Agent, "first");
    let (_, key) = new_key(PrincipalKind::Agent);
    store.create_agent(&p, &key, Some(&record)).await.unwrap();
    assert_eq!(
        store
            .idempotent_response("agent.register", "k-1")
            .await
            .unwrap(),
        Some(record.result.clone())
    );
    assert!(store
        .idempotent_response("agent.register", "k-2")
        .await
        .unwrap()
        .is_none());

    let retry = principal(PrincipalKind::Agent, "retry");
    let (_, key) = new_key(PrincipalKind::Agent);
    assert!(matches!(
        store.create_agent(&retry, &key, Some(&record)).await,
        Err(StoreError::IdempotencyTaken)
    ));
    assert!(
        store.principal(retry.id).await.unwrap().is_none(),
        "nothing of the retry is written"
    );
}

/// A pending message of a task conversation, with the job that decides it.
pub(crate) async fn pending(store: &DynStore, conversation: Uuid, sender: Uuid) -> (Uuid, Uuid) {
    let id = Uuid::now_v7();
    let job = NewJob::new(JobKind::MessageAuthorize, id, 10);
    let m = NewMessage {
        id,
        conversation_id: conversation,
        sender_id: sender,
        origin: Origin::Agent,
        parts: vec![Part::Text {
            text: "gated".into(),
        }],
        reply_to: None,
        thread_id: None,
        in_channel: false,
        client_msg_id: None,
        request_hash: None,
        created_at: 20,
        fanout: Fanout::Pending,
        jobs: vec![job.clone()],
        card: None,
        reply_to_interaction: None,
    };
    let inserted = store.insert_message(&m).await.unwrap();
    assert!(matches!(
        inserted,
        InsertedMessage::Inserted {
            verdict: Verdict::Pending,
            ..
        }
    ));
    (id, job.id)
}

/// An active task of `initiator` and `invited` with its "town"
/// conversation.
pub(crate) async fn active_room(
    store: &DynStore,
    app: Uuid,
    initiator: Uuid,
    invited: Uuid,
) -> (NewTask, NewConversation) {
    let t = task(
        app,
        &[
            (initiator, TaskRole::Initiator),
            (invited, TaskRole::Invited),
        ],
    );
    let create = NewJob::new(JobKind::TaskCreate, t.id, 10);
    store.create_task(&t, &create).await.unwrap();
    let town = NewConversation {
        id: Uuid::now_v7(),
        kind: ConversationKind::Task,
        name: Some("town".into()),
        task_id: Some(t.id),
        direct_key: None,
        template_key: Some("town".into()),
        created_by: app,
        participants: vec![initiator, invited],
        created_at: 4,
    };
    let accept = Effects {
        conversations: vec![town.clone()],
        ..finishing(create.id)
    };
    let moved = store
        .transition_task(
            t.id,
            TaskState::Waiting,
            TaskState::Active,
            None,
            &accept,
            4,
        )
        .await
        .unwrap();
    assert!(moved.is_some());
    (t, town)
}

pub(crate) fn finishing(job: Uuid) -> Effects {
    Effects {
        finish_job: Some(job),
        ..Effects::default()
    }
}

async fn forwards_need_an_active_task(store: DynStore) {
    let app = app_in(&store).await;
    let (a, b) = (agent_in(&store, "a").await, agent_in(&store, "b").await);
    let (t, town) = active_room(&store, app, a, b).await;
    let (head, its_app) = store.task_head(t.id).await.unwrap().unwrap();
    assert_eq!(its_app, store.app(app).await.unwrap().unwrap());
    assert_eq!(
        (head.id, head.app_id, head.state),
        (t.id, app, TaskState::Active)
    );
    assert!(store.task_head(Uuid::now_v7()).await.unwrap().is_none());
    let listed = store.task_conversations(t.id).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].key.as_deref(), Some("town"));

    let forward = MessageOutcome::Forward {
        recipients: vec![b],
    };
    let (first, job) = pending(&store, town.id, a).await;
    let decided = store
        .decide_message(first, &forward, &finishing(job), 30)
        .await
        .unwrap();
    assert!(matches!(decided, MessageDecided::Applied(_)));
    assert!(store.is_recipient(first, b).await.unwrap());
    assert!(store.claim_job(job, 0, 1).await.unwrap().is_none(), "done");
    let again = store
        .decide_message(first, &forward, &finishing(job), 31)
        .await
        .unwrap();
    assert!(matches!(again, MessageDecided::AlreadyDecided));

    // Closed while a hook decided: the forward writes nothing.
    let (second, job) = pending(&store, town.id, a).await;
    let closed = store
        .transition_task(
            t.id,
            TaskState::Active,
            TaskState::Closed,
            None,
            &Effects::default(),
            40,
        )
        .await
        .unwrap();
    assert!(closed.is_some());
    let (head, _) = store.task_head(t.id).await.unwrap().unwrap();
    assert_eq!(
        head.state,
        TaskState::Closed,
        "the head reads the state as it now stands"
    );
    let late = store
        .decide_message(second, &forward, &finishing(job), 41)
        .await
        .unwrap();
    assert!(matches!(late, MessageDecided::NotApplicable));
    assert_eq!(
        store.message(second).await.unwrap().unwrap().1,
        Verdict::Pending
    );
    assert!(!store.is_recipient(second, b).await.unwrap());
    assert!(
        store.claim_job(job, 0, 1).await.unwrap().is_some(),
        "the job stays for the next decision"
    );
    let block = MessageOutcome::Block {
        reason: "the task is closed".into(),
    };
    let blocked = store
        .decide_message(second, &block, &finishing(job), 42)
        .await
        .unwrap();
    assert!(matches!(blocked, MessageDecided::Applied(_)));
    assert_eq!(
        store.message(second).await.unwrap().unwrap().1,
        Verdict::Blocked {
            reason: "the task is closed".into()
        }
    );
    assert!(store.claim_job(job, 0, 1).await.unwrap().is_none());
}
