//! Gates whose every run fails in the store: each fails closed.

use super::*;

/// An in-process hub on a fresh SQLite file, for tests that must reach
/// states no client can produce (a gate whose every run fails).
async fn in_process_hub() -> (switchboard::server::Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = switchboard::config::Config::default();
    config.server.listen = "127.0.0.1:0".parse().unwrap();
    config.server.data_dir = dir.path().to_path_buf();
    (
        switchboard::server::Server::start(config).await.unwrap(),
        dir,
    )
}

async fn stored_agent(hub: &switchboard::hub::Hub, name: &str) -> Uuid {
    use switchboard::domain::PrincipalKind;
    use switchboard::store::{NewKey, NewPrincipal};
    let id = Uuid::now_v7();
    hub.store
        .create_agent(
            &NewPrincipal {
                id,
                kind: PrincipalKind::Agent,
                name: name.into(),
                description: None,
                created_at: 1,
            },
            &NewKey {
                key_id: format!("k{}", id.simple()),
                secret_hash: [7; 32],
            },
            None,
        )
        .await
        .unwrap();
    id
}

/// A message stored in a task conversation whose task does not exist, so
/// every run of a gate about it fails in the store. Returns the
/// conversation's id and what the insert answered.
async fn orphan_message(
    hub: &switchboard::hub::Hub,
    message: &switchboard::store::NewMessage,
    participants: Vec<Uuid>,
) -> (Uuid, switchboard::store::InsertedMessage) {
    use switchboard::domain::conversation::ConversationKind;
    use switchboard::store::NewConversation;
    let conversation = NewConversation {
        id: message.conversation_id,
        kind: ConversationKind::Task,
        name: Some("orphan".into()),
        task_id: Some(Uuid::now_v7()),
        direct_key: None,
        template_key: None,
        created_by: message.sender_id,
        participants,
        created_at: 1,
    };
    hub.store
        .create_conversation(&conversation, &[])
        .await
        .unwrap();
    (
        conversation.id,
        hub.store.insert_message(message).await.unwrap(),
    )
}

fn stored_message(
    sender: Uuid,
    body: &str,
    fanout: switchboard::store::Fanout,
    job: Option<switchboard::store::NewJob>,
) -> switchboard::store::NewMessage {
    use switchboard::domain::message::Origin;
    switchboard::store::NewMessage {
        id: job.as_ref().map(|j| j.subject).unwrap_or_else(Uuid::now_v7),
        conversation_id: Uuid::now_v7(),
        sender_id: sender,
        origin: Origin::Agent,
        parts: text(body),
        reply_to: None,
        thread_id: None,
        in_channel: false,
        client_msg_id: None,
        request_hash: None,
        created_at: 1,
        fanout,
        jobs: job.into_iter().collect(),
        card: None,
        reply_to_interaction: None,
    }
}

#[tokio::test]
async fn a_task_gate_that_keeps_failing_fails_the_task() {
    use switchboard::domain::task::{TaskParticipant, TaskRole, TaskState};
    use switchboard::store::{Job, JobKind, NewJob, NewTask};

    // The task names an agent as its app: every run of the gate fails to
    // load the app.
    let (server, _dir) = in_process_hub().await;
    let hub = server.hub.clone();
    let initiator = stored_agent(&hub, "initiator").await;
    let not_an_app = stored_agent(&hub, "not-an-app").await;
    let task_id = Uuid::now_v7();
    let job = NewJob::new(JobKind::TaskCreate, task_id, i64::MAX / 2);
    hub.store
        .create_task(
            &NewTask {
                id: task_id,
                app_id: not_an_app,
                initiator_id: initiator,
                participants: vec![TaskParticipant {
                    agent_id: initiator,
                    role: TaskRole::Initiator,
                }],
                initial_conversation: None,
                created_at: 1,
            },
            &job,
        )
        .await
        .unwrap();
    let run = |attempts| Job {
        id: job.id,
        kind: JobKind::TaskCreate,
        subject: task_id,
        attempts,
    };
    switchboard::jobs::execute(&hub, run(1)).await;
    let state = |hub: std::sync::Arc<switchboard::hub::Hub>| async move {
        hub.store.task(task_id).await.unwrap().unwrap().task
    };
    assert_eq!(state(hub.clone()).await.state, TaskState::Waiting);
    switchboard::jobs::execute(&hub, run(hub.config.jobs.max_attempts)).await;
    let task = state(hub.clone()).await;
    assert_eq!(task.state, TaskState::Failed);
    assert_eq!(task.failure.unwrap().code, "hub_error");
    let events = hub.store.events_after(initiator, 0, 10).await.unwrap();
    assert_eq!(
        events
            .iter()
            .map(|e| e.event_type.as_str())
            .collect::<Vec<_>>(),
        ["agent/task/failed"]
    );
    assert!(hub.store.claim_job(job.id, 0, 1).await.unwrap().is_none());
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_dispatch_gate_that_keeps_failing_denies_the_lease() {
    use switchboard::domain::lease::LeaseState;
    use switchboard::store::{CreatedLease, Fanout, Job, JobKind, NewJob, NewLease};

    // A forwarded message in a conversation whose task does not exist:
    // every run of the dispatch gate fails to load the task.
    let (server, _dir) = in_process_hub().await;
    let hub = server.hub.clone();
    let sender = stored_agent(&hub, "sender").await;
    let recipient = stored_agent(&hub, "recipient").await;
    let message = stored_message(
        sender,
        "act on me",
        Fanout::Forward {
            recipients: vec![recipient],
            event_type: "agent/message/received",
            people: switchboard::store::PersonCopies::NONE,
            apps: switchboard::store::AppCopies::NONE,
        },
        None,
    );
    let message_id = message.id;
    let (conversation_id, _) = orphan_message(&hub, &message, vec![sender, recipient]).await;
    let lease_id = Uuid::now_v7();
    let job = NewJob::new(JobKind::DispatchAuthorize, lease_id, i64::MAX / 2);
    let created = hub
        .store
        .create_lease(
            &NewLease {
                id: lease_id,
                message_id,
                conversation_id,
                recipient_id: recipient,
                created_at: 1,
            },
            &job,
        )
        .await
        .unwrap();
    assert!(matches!(created, CreatedLease::Created(_)));
    let run = |attempts| Job {
        id: job.id,
        kind: JobKind::DispatchAuthorize,
        subject: lease_id,
        attempts,
    };
    switchboard::jobs::execute(&hub, run(1)).await;
    let lease = hub.store.lease(lease_id).await.unwrap().unwrap();
    assert_eq!(lease.state, LeaseState::Pending);
    switchboard::jobs::execute(&hub, run(hub.config.jobs.max_attempts)).await;
    let lease = hub.store.lease(lease_id).await.unwrap().unwrap();
    assert_eq!(lease.state, LeaseState::Denied);
    assert_eq!(lease.reason.as_deref(), Some("infrastructure: hub_error"));
    assert!(hub.store.claim_job(job.id, 0, 1).await.unwrap().is_none());
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_gate_job_that_keeps_failing_fails_closed() {
    use switchboard::store::{Fanout, InsertedMessage, Job, JobKind, NewJob, Verdict};

    // An in-process hub whose message gate cannot run: the conversation
    // names a task that does not exist, so every run fails in the store.
    let (server, _dir) = in_process_hub().await;
    let hub = server.hub.clone();
    let sender = Uuid::now_v7();
    let message_id = Uuid::now_v7();
    let job = NewJob::new(JobKind::MessageAuthorize, message_id, i64::MAX / 2);
    let message = stored_message(sender, "stuck", Fanout::Pending, Some(job.clone()));
    let (_, inserted) = orphan_message(&hub, &message, vec![sender]).await;
    assert!(matches!(
        inserted,
        InsertedMessage::Inserted {
            verdict: Verdict::Pending,
            ..
        }
    ));

    // An early failing run only schedules a retry.
    let run = |attempts| Job {
        id: job.id,
        kind: JobKind::MessageAuthorize,
        subject: message_id,
        attempts,
    };
    switchboard::jobs::execute(&hub, run(1)).await;
    assert_eq!(
        hub.store.message(message_id).await.unwrap().unwrap().1,
        Verdict::Pending
    );
    // The last allowed run applies the fail-closed verdict and ends the job.
    switchboard::jobs::execute(&hub, run(hub.config.jobs.max_attempts)).await;
    let (_, verdict) = hub.store.message(message_id).await.unwrap().unwrap();
    assert_eq!(
        verdict,
        Verdict::Blocked {
            reason: "infrastructure: hub_error".into()
        }
    );
    assert!(
        hub.store.claim_job(job.id, 0, 1).await.unwrap().is_none(),
        "the job is gone"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn dispatch_gate_failures_deny() {
    let w = world(
        TestHub::fast_options(),
        manifest(
            json!({"kind": "accept"}),
            json!({"kind": "forwardAllExceptSender"}),
            json!({"kind": "hook", "timeoutMs": 2000}),
        ),
        2,
    )
    .await;
    let (c0, c1) = (w.client(0).await, w.client(1).await);
    let mut rx = c1.connection.notifications().unwrap();
    let town = w.request(&c0, &[1]).await.unwrap().conversations[0].id;
    let reason = |v: &Value| {
        v["payload"]["lease"]["reason"]
            .as_str()
            .unwrap()
            .to_string()
    };

    // No app socket at all.
    let m = send(&c0, town, "first").await.message.id;
    dispatch(&c1, town, m).await.unwrap();
    let r = next_of(&mut rx, "agent/dispatch/released").await;
    assert_eq!(
        (
            r["payload"]["lease"]["state"].as_str().unwrap(),
            reason(&r).as_str()
        ),
        ("denied", "infrastructure: app_unavailable")
    );

    // An app that answers garbage, then one that answers an error, then one
    // that disconnects mid-call.
    let mut raw = RawSocket::connect_app(&w.hub.ws_url(), &w.app_key).await;
    for (answer, expected) in [
        (
            json!({"result": {"admission": {"decision": "perhaps"}}}),
            "infrastructure: invalid_answer",
        ),
        (
            json!({"error": {"code": -32000, "message": "no"}}),
            "infrastructure: app_error",
        ),
    ] {
        let m = send(&c0, town, "next").await.message.id;
        dispatch(&c1, town, m).await.unwrap();
        let req = raw.recv_request().await;
        assert_eq!(req["method"], json!("app/dispatch/authorize"));
        let mut frame = json!({"jsonrpc": "2.0", "id": req["id"]});
        for (k, v) in answer.as_object().unwrap() {
            frame[k] = v.clone();
        }
        raw.send_json(&frame).await;
        assert_eq!(
            reason(&next_of(&mut rx, "agent/dispatch/released").await),
            expected
        );
    }
    let m = send(&c0, town, "last").await.message.id;
    dispatch(&c1, town, m).await.unwrap();
    raw.recv_request().await;
    drop(raw);
    assert_eq!(
        reason(&next_of(&mut rx, "agent/dispatch/released").await),
        "infrastructure: app_unavailable"
    );
}
