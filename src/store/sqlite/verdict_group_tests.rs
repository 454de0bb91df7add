//! The verdict group commit, driven deterministically: verdicts submitted
//! while the writer lock is held all queue, and the first to get the lock
//! writes them as one group.

use std::sync::Arc;

use serde_json::json;
use uuid::Uuid;

use super::SqliteStore;
use crate::domain::conversation::ConversationKind;
use crate::domain::event::NewEvent;
use crate::domain::manifest;
use crate::domain::message::{Origin, Part};
use crate::domain::task::{TaskParticipant, TaskRole, TaskState};
use crate::domain::PrincipalKind;
use crate::store::{
    BaseStore, ConversationStore, Effects, EventStore, Fanout, IdentityStore, JobKind, JobStore,
    MessageDecided, MessageOutcome, NewConversation, NewJob, NewKey, NewMessage, NewPrincipal,
    NewTask, TaskStore, Verdict,
};

async fn store() -> (Arc<SqliteStore>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let s = SqliteStore::open(&url, 4, 5_000, crate::config::SqliteSynchronous::Full)
        .await
        .unwrap();
    s.migrate().await.unwrap();
    (Arc::new(s), dir)
}

async fn principal(s: &SqliteStore, kind: PrincipalKind) -> Uuid {
    let id = Uuid::now_v7();
    let p = NewPrincipal {
        id,
        kind,
        name: "p".into(),
        description: None,
        created_at: 1,
    };
    let key = NewKey {
        key_id: format!("k{}", id.simple()),
        secret_hash: [1; 32],
    };
    match kind {
        PrincipalKind::App => {
            let m = manifest::validate(
                &json!({
                    "name": "Gated",
                    "description": "hooks decide",
                    "limits": { "maxParticipants": 12 },
                    "conversations": [{ "key": "town", "name": "Town", "participantFilter": "all" }],
                    "hooks": {
                        "dispatch_authorize": { "kind": "hook", "timeoutMs": 5000 },
                        "message_authorize": { "kind": "hook", "timeoutMs": 5000 },
                        "task_create": { "kind": "accept" }
                    }
                }),
                &crate::config::Config::default().manifest_bounds(),
            )
            .unwrap();
            {
                // Installed: an accept needs an active installation.
                let install = crate::store::RegistrationInstall::new(
                    id,
                    &m,
                    crate::domain::installation::Actor::Operator,
                    1,
                );
                s.create_app(&p, &m, &key, Some(&install), None)
                    .await
                    .unwrap();
            }
        }
        _ => s.create_agent(&p, &key, None).await.unwrap(),
    }
    id
}

/// An active task of `agents` (the first initiates) with one conversation.
async fn task_room(s: &SqliteStore, app: Uuid, agents: &[Uuid]) -> (Uuid, Uuid) {
    let t = NewTask {
        id: Uuid::now_v7(),
        app_id: app,
        initiator_id: agents[0],
        participants: agents
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
            .collect(),
        initial_conversation: None,
        created_at: 2,
    };
    let create = NewJob::new(JobKind::TaskCreate, t.id, 3);
    s.create_task(&t, &create).await.unwrap();
    let room = NewConversation {
        id: Uuid::now_v7(),
        kind: ConversationKind::Task,
        name: Some("town".into()),
        task_id: Some(t.id),
        direct_key: None,
        template_key: Some("town".into()),
        created_by: app,
        participants: agents.to_vec(),
        created_at: 4,
    };
    let accept = Effects {
        conversations: vec![room.clone()],
        finish_job: Some(create.id),
        ..Effects::default()
    };
    let moved = s
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
    (t.id, room.id)
}

/// A pending message from `sender` and the job deciding it.
async fn pending(s: &SqliteStore, room: Uuid, sender: Uuid) -> (Uuid, Uuid) {
    let id = Uuid::now_v7();
    let job = NewJob::new(JobKind::MessageAuthorize, id, 10);
    let m = NewMessage {
        id,
        conversation_id: room,
        sender_id: sender,
        origin: Origin::Agent,
        parts: vec![Part::Text { text: "g".into() }],
        reply_to: None,
        thread_id: None,
        in_channel: false,
        client_msg_id: None,
        request_hash: None,
        created_at: 5,
        fanout: Fanout::Pending,
        jobs: vec![job.clone()],
        card: None,
        reply_to_interaction: None,
    };
    s.insert_message(&m).await.unwrap();
    (id, job.id)
}

/// A verdict as the gate hands it: a forward's copies as its events.
async fn verdict(
    s: &SqliteStore,
    message: Uuid,
    job: Uuid,
    outcome: MessageOutcome,
) -> (Uuid, MessageOutcome, Effects) {
    let (stored, _) = s.message(message).await.unwrap().unwrap();
    let events = match &outcome {
        MessageOutcome::Forward { recipients } => NewEvent::message_copies(
            recipients,
            "agent/message/received",
            message,
            Arc::new(json!({ "message": stored })),
        ),
        MessageOutcome::Block { .. } => Vec::new(),
    };
    let effects = Effects {
        events,
        finish_job: Some(job),
        ..Effects::default()
    };
    (message, outcome, effects)
}

/// Submits every verdict while the writer lock is held, then lets them go
/// as one group; their answers in submission order.
async fn as_one_group(
    s: &Arc<SqliteStore>,
    verdicts: Vec<(Uuid, MessageOutcome, Effects)>,
) -> Vec<MessageDecided> {
    let held = s.writer.clone().lock_owned().await;
    let n = verdicts.len();
    let mut answers = Vec::new();
    for (message, outcome, effects) in verdicts {
        let deciding = s.clone();
        answers.push(tokio::spawn(async move {
            deciding
                .decide_message(message, &outcome, &effects, 50)
                .await
        }));
        // One at a time into the queue, so the group keeps this order.
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while s.verdicts.queued_len() < answers.len() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the verdict queued");
    }
    assert_eq!(s.verdicts.queued_len(), n);
    drop(held);
    let mut out = Vec::new();
    for a in answers {
        out.push(a.await.unwrap().unwrap());
    }
    out
}

/// A store with an app, agents a, b and c, and their active task's room.
struct World {
    s: Arc<SqliteStore>,
    _dir: tempfile::TempDir,
    agents: [Uuid; 3],
    task: Uuid,
    room: Uuid,
}

async fn world() -> World {
    let (s, _dir) = store().await;
    let app = principal(&s, PrincipalKind::App).await;
    let agents = [
        principal(&s, PrincipalKind::Agent).await,
        principal(&s, PrincipalKind::Agent).await,
        principal(&s, PrincipalKind::Agent).await,
    ];
    let (task, room) = task_room(&s, app, &agents).await;
    World {
        s,
        _dir,
        agents,
        task,
        room,
    }
}

fn forward(r: &[Uuid]) -> MessageOutcome {
    MessageOutcome::Forward {
        recipients: r.to_vec(),
    }
}

#[tokio::test]
async fn a_group_of_verdicts_is_written_like_each_on_its_own() {
    let w = world().await;
    let (s, room, [a, b, c]) = (&w.s, w.room, w.agents);
    let (all, all_job) = pending(s, room, a).await;
    let (some, some_job) = pending(s, room, a).await;
    let (blocked, blocked_job) = pending(s, room, a).await;
    let verdicts = vec![
        verdict(s, all, all_job, forward(&[b, c])).await,
        verdict(s, some, some_job, forward(&[b])).await,
        verdict(
            s,
            blocked,
            blocked_job,
            MessageOutcome::Block {
                reason: "no".into(),
            },
        )
        .await,
        // The same message twice in one group: the second finds it decided.
        verdict(s, all, all_job, forward(&[b, c])).await,
    ];
    let decided = as_one_group(s, verdicts).await;

    let MessageDecided::Applied(to_all) = &decided[0] else {
        panic!("{:?}", decided[0]);
    };
    assert_eq!(to_all.len(), 2);
    assert!(to_all.iter().all(|e| e.id == to_all[0].id));
    assert!(matches!(&decided[1], MessageDecided::Applied(e) if e.len() == 1));
    assert!(matches!(&decided[2], MessageDecided::Applied(e) if e.is_empty()));
    assert!(matches!(decided[3], MessageDecided::AlreadyDecided));

    assert_eq!(
        s.message(all).await.unwrap().unwrap().1,
        Verdict::Forwarded { recipients: 2 }
    );
    assert_eq!(
        s.message(some).await.unwrap().unwrap().1,
        Verdict::Forwarded { recipients: 1 }
    );
    assert_eq!(
        s.message(blocked).await.unwrap().unwrap().1,
        Verdict::Blocked {
            reason: "no".into()
        }
    );
    assert!(s.is_recipient(all, c).await.unwrap(), "unlisted: everyone");
    assert!(s.is_recipient(some, b).await.unwrap());
    assert!(!s.is_recipient(some, c).await.unwrap(), "listed: only b");
    assert!(!s.is_recipient(blocked, b).await.unwrap());
    for job in [all_job, some_job, blocked_job] {
        assert!(s.claim_job(job, 0, 1).await.unwrap().is_none(), "finished");
    }
    let to_b = s.events_after(b, 0, 10).await.unwrap();
    assert_eq!(to_b.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2]);
}

/// Closed: a forward in a group writes nothing and keeps its job; a block
/// beside it still applies.
#[tokio::test]
async fn a_forward_in_a_group_finds_its_task_closed() {
    let w = world().await;
    let (s, room, task, [a, b, c]) = (&w.s, w.room, w.task, w.agents);
    let (late, late_job) = pending(s, room, a).await;
    let (late_block, late_block_job) = pending(s, room, a).await;
    let closed = s
        .transition_task(
            task,
            TaskState::Active,
            TaskState::Closed,
            None,
            &Effects::default(),
            60,
        )
        .await
        .unwrap();
    assert!(closed.is_some());
    let verdicts = vec![
        verdict(s, late, late_job, forward(&[b, c])).await,
        verdict(
            s,
            late_block,
            late_block_job,
            MessageOutcome::Block {
                reason: "task is closed".into(),
            },
        )
        .await,
    ];
    let decided = as_one_group(s, verdicts).await;
    assert!(matches!(decided[0], MessageDecided::NotApplicable));
    assert!(matches!(decided[1], MessageDecided::Applied(_)));
    assert_eq!(s.message(late).await.unwrap().unwrap().1, Verdict::Pending);
    assert!(
        s.claim_job(late_job, 0, 1).await.unwrap().is_some(),
        "still to decide"
    );
    assert!(s.claim_job(late_block_job, 0, 1).await.unwrap().is_none());
}
