//! The writer thread's send group (ADR 0022) against the sqlx send path it
//! replaced: the same rows and the same results as the messages written one
//! by one, and one item's fault is still only that item's.

use std::sync::Arc;

use rusqlite::types::Value;
use uuid::Uuid;

use super::send_writer::ThreadSends;
use super::SqliteStore;
use crate::domain::conversation::ConversationKind;
use crate::domain::message::{Origin, Part};
use crate::domain::PrincipalKind;
use crate::store::group_commit::GroupWriter;
use crate::store::messages::{insert_one, Fanout, InsertedMessage, NewMessage};
use crate::store::sql::is_unique_violation;
use crate::store::{
    BaseStore, ConversationStore, IdentityStore, JobKind, NewConversation, NewJob, NewKey,
    NewPrincipal, PersonCopies,
};

async fn store() -> (SqliteStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let s = SqliteStore::open(&url, 4, 5_000, crate::config::SqliteSynchronous::Full)
        .await
        .unwrap();
    s.migrate().await.unwrap();
    (s, dir)
}

/// The same agents and conversations, under the same ids, in `s`.
struct World {
    sender: Uuid,
    members: Vec<Uuid>,
    big: Uuid,
    small: Uuid,
}

impl World {
    fn new() -> World {
        World {
            sender: Uuid::now_v7(),
            members: (0..40).map(|_| Uuid::now_v7()).collect(),
            big: Uuid::now_v7(),
            small: Uuid::now_v7(),
        }
    }

    async fn build(&self, s: &SqliteStore) {
        for id in std::iter::once(self.sender).chain(self.members.iter().copied()) {
            let p = NewPrincipal {
                id,
                kind: PrincipalKind::Agent,
                name: "a".into(),
                description: None,
                created_at: 1,
            };
            let key = NewKey {
                key_id: format!("k{}", id.simple()),
                secret_hash: [1; 32],
            };
            s.create_agent(&p, &key, None).await.unwrap();
        }
        let mut everyone = vec![self.sender];
        everyone.extend(&self.members);
        for (id, participants) in [
            (self.big, everyone),
            (self.small, vec![self.sender, self.members[0]]),
        ] {
            let c = NewConversation {
                id,
                kind: ConversationKind::Group,
                name: None,
                task_id: None,
                direct_key: None,
                template_key: None,
                created_by: self.sender,
                participants,
                created_at: 1,
            };
            s.create_conversation(&c, &[]).await.unwrap();
        }
    }

    fn forward(&self, conversation: Uuid, recipients: &[Uuid]) -> NewMessage {
        self.message(
            conversation,
            Fanout::Forward {
                recipients: recipients.to_vec(),
                event_type: "agent/message/received",
                people: PersonCopies::NONE,
                apps: crate::store::AppCopies::NONE,
            },
        )
    }

    fn message(&self, conversation: Uuid, fanout: Fanout) -> NewMessage {
        let id = Uuid::now_v7();
        let pending = matches!(fanout, Fanout::Pending);
        NewMessage {
            id,
            conversation_id: conversation,
            sender_id: self.sender,
            origin: Origin::Agent,
            parts: vec![Part::Text {
                text: format!("text of {id}"),
            }],
            reply_to: None,
            thread_id: None,
            in_channel: false,
            client_msg_id: None,
            request_hash: None,
            created_at: 5,
            fanout,
            jobs: pending
                .then(|| NewJob::new(JobKind::MessageAuthorize, id, 7))
                .into_iter()
                .collect(),
            card: None,
            reply_to_interaction: None,
        }
    }
}

/// Every row a send writes, in an order that does not depend on which
/// stream key an audience got; without the events' ids, which are new
/// for each write.
fn rows_written(path: &std::path::Path) -> Vec<Vec<Value>> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut out = Vec::new();
    for sql in [
        "SELECT * FROM messages ORDER BY id",
        "SELECT * FROM message_recipients ORDER BY message_id, recipient_id",
        "SELECT * FROM jobs ORDER BY id",
        "SELECT id, last_message_seq FROM conversations ORDER BY id",
        "SELECT audience, last_seq FROM event_streams ORDER BY audience",
        "SELECT s.audience, i.seq, p.type, p.occurred_at, p.message_id, p.body, p.refs \
         FROM event_index i JOIN event_streams s ON s.stream = i.stream \
         JOIN event_payloads p ON p.id = i.payload ORDER BY s.audience, i.seq",
    ] {
        let mut stmt = conn.prepare(sql).unwrap();
        let n = stmt.column_count();
        let rows = stmt
            .query_map([], |r| (0..n).map(|i| r.get::<_, Value>(i)).collect())
            .unwrap();
        out.extend(rows.map(Result::unwrap));
    }
    out
}

/// What a sender gets back, without the events' fresh ids.
fn results(done: &[InsertedMessage]) -> Vec<String> {
    done.iter()
        .map(|r| match r {
            InsertedMessage::Inserted {
                message,
                verdict,
                events,
            } => {
                let events: Vec<_> = events
                    .iter()
                    .map(|e| {
                        let payload = e.payload.to_value();
                        (e.audience, e.seq, &e.event_type, e.occurred_at, payload)
                    })
                    .collect();
                format!("{message:?} {verdict:?} {events:?}")
            }
            other => panic!("{other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn a_group_on_the_writer_thread_equals_its_messages_written_one_by_one() {
    let world = World::new();
    let (threaded, threaded_dir) = store().await;
    let (one_by_one, one_by_one_dir) = store().await;
    world.build(&threaded).await;
    world.build(&one_by_one).await;
    let all = &world.members[..];
    let mut with_id = world.forward(world.small, &all[..1]);
    with_id.client_msg_id = Some("c-1".into());
    with_id.request_hash = Some("h".into());
    let group = [
        world.forward(world.big, all),
        world.message(world.small, Fanout::Pending),
        // A subset of the participants: its recipients are listed.
        world.forward(world.big, &all[3..9]),
        with_id,
        world.forward(world.big, all),
    ];
    let refs: Vec<&NewMessage> = group.iter().collect();
    let grouped = ThreadSends::new(threaded.thread.clone())
        .write_group(&refs)
        .await
        .unwrap();
    let mut single = Vec::new();
    for m in &group {
        let mut tx = one_by_one.pool.begin().await.unwrap();
        single.push(insert_one(&mut *tx, m).await.unwrap());
        tx.commit().await.unwrap();
    }
    assert_eq!(results(&grouped), results(&single));
    let written = rows_written(&threaded_dir.path().join("t.db"));
    assert!(written.len() > 100, "the group wrote its rows");
    assert_eq!(written, rows_written(&one_by_one_dir.path().join("t.db")));
}

#[tokio::test]
async fn a_duplicate_client_id_in_a_group_fails_only_that_send() {
    let world = World::new();
    let (s, _dir) = store().await;
    world.build(&s).await;
    let mut first = world.forward(world.small, &world.members[..1]);
    first.client_msg_id = Some("same".into());
    s.insert_message(&first).await.unwrap();
    let mut again = world.forward(world.small, &world.members[..1]);
    again.client_msg_id = Some("same".into());
    let group = [
        world.forward(world.big, &world.members),
        again,
        world.forward(world.small, &world.members[..1]),
    ];

    // Written together, the group is refused whole as one item's fault,
    // and nothing of it stays.
    let refs: Vec<&NewMessage> = group.iter().collect();
    let whole = ThreadSends::new(s.thread.clone()).write_group(&refs).await;
    assert!(is_unique_violation(&whole.unwrap_err()));
    assert!(
        s.message(group[0].id).await.unwrap().is_none(),
        "rolled back"
    );

    // Through the group commit, queued behind the writer lock so they form
    // one group: only the duplicate fails.
    let s = Arc::new(s);
    let held = s.writer.clone().lock_owned().await;
    let sends: Vec<_> = group
        .iter()
        .cloned()
        .map(|m| {
            let s = s.clone();
            tokio::spawn(async move { s.sends.submit(&m).await })
        })
        .collect();
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while s.sends.queued_len() < group.len() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("all three queued");
    drop(held);
    let mut answers = Vec::new();
    for send in sends {
        answers.push(send.await.unwrap());
    }
    assert!(is_unique_violation(answers[1].as_ref().unwrap_err()));
    for (i, answer) in [(0, &answers[0]), (2, &answers[2])] {
        assert!(
            matches!(answer, Ok(InsertedMessage::Inserted { .. })),
            "send {i}: {answer:?}"
        );
        assert!(s.message(group[i].id).await.unwrap().is_some());
    }
    assert!(s.message(group[1].id).await.unwrap().is_none());
}

#[tokio::test]
async fn the_writer_connection_has_the_pools_settings() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let s = SqliteStore::open(&url, 2, 4_321, crate::config::SqliteSynchronous::Normal)
        .await
        .unwrap();
    let settings = s
        .thread
        .run(|conn| {
            let read = |p: &str| -> Value {
                conn.query_row(&format!("PRAGMA {p}"), [], |r| r.get(0))
                    .unwrap()
            };
            Ok([
                read("journal_mode"),
                read("synchronous"),
                read("foreign_keys"),
                read("temp_store"),
                read("busy_timeout"),
            ])
        })
        .await
        .unwrap();
    assert_eq!(
        settings,
        [
            Value::Text("wal".into()),
            Value::Integer(1),
            Value::Integer(1),
            Value::Integer(2),
            Value::Integer(4_321),
        ],
        "WAL, NORMAL, foreign keys on, temp_store MEMORY, the busy timeout"
    );
}

/// A panic in one job costs that job's answer, not the thread: the next
/// job runs, and a transaction the panic left open was rolled back.
#[tokio::test]
async fn the_writer_thread_survives_a_panicking_job() {
    let (s, _dir) = store().await;
    let panicked = s
        .thread
        .run(|conn| -> crate::store::StoreResult<()> {
            conn.execute_batch("BEGIN IMMEDIATE").unwrap();
            panic!("a bug in one group's code");
        })
        .await;
    let err = panicked.expect_err("a panicked job has no answer");
    assert!(err.to_string().contains("without an answer"), "{err}");
    let autocommit = s
        .thread
        .run(|conn| Ok(conn.is_autocommit()))
        .await
        .expect("the thread still runs jobs");
    assert!(autocommit, "the panicked job's transaction was rolled back");
}

/// The writer opens the pool's file; an in-memory database would be
/// another one per connection, so every spelling of it is refused.
#[tokio::test]
async fn an_in_memory_database_is_refused_naming_the_key() {
    for url in ["sqlite::memory:", "sqlite://hub.db?mode=memory"] {
        let opened = SqliteStore::open(url, 2, 1_000, crate::config::SqliteSynchronous::Full).await;
        let err = opened.err().unwrap_or_else(|| panic!("{url} was opened"));
        assert!(
            err.to_string().contains("storage.database_url"),
            "{url}: {err}"
        );
    }
}
