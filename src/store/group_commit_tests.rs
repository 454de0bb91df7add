//! The lone-write path of [`GroupCommit`]: taken only with the feed's turn
//! free, publishing before the turn goes, and releasing both locks when
//! the write dies unanswered.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use uuid::Uuid;

use super::{GroupCommit, GroupWriter, LoneFinish};
use crate::domain::event::{EventPayload, StoredEvent};
use crate::store::commit_feed::{CommitFeed, CommitListener, Committed};
use crate::store::StoreResult;

#[derive(Clone, Debug)]
struct Written(Vec<StoredEvent>);

impl Committed for Written {
    fn committed_events(&self) -> &[StoredEvent] {
        &self.0
    }
}

fn event(seq: u64) -> StoredEvent {
    StoredEvent {
        id: Uuid::now_v7(),
        audience: Uuid::nil(),
        seq,
        event_type: "test".into(),
        occurred_at: 0,
        payload: EventPayload::Value(Arc::new(serde_json::json!({}))),
    }
}

/// Writes on a thread of its own, as SQLite's writer does, unless told to
/// drop the work unanswered (a panicked job).
#[derive(Default)]
struct Backend {
    lone: AtomicUsize,
    grouped: AtomicUsize,
    drop_lone: std::sync::atomic::AtomicBool,
    /// No lone path, as PostgreSQL has none.
    no_lone: std::sync::atomic::AtomicBool,
    /// The items in the order they were written (commit order).
    written: Mutex<Vec<u64>>,
}

#[async_trait]
impl GroupWriter<u64, Written> for Backend {
    async fn write_one(&self, item: &u64) -> StoreResult<Written> {
        self.grouped.fetch_add(1, Ordering::SeqCst);
        self.written.lock().unwrap().push(*item);
        Ok(Written(vec![event(*item)]))
    }

    async fn write_group(&self, group: &[&u64]) -> StoreResult<Vec<Written>> {
        self.grouped.fetch_add(group.len(), Ordering::SeqCst);
        self.written
            .lock()
            .unwrap()
            .extend(group.iter().map(|i| **i));
        Ok(group.iter().map(|i| Written(vec![event(**i)])).collect())
    }

    fn write_lone(
        &self,
        item: &u64,
        finish: LoneFinish<Written>,
    ) -> Result<(), LoneFinish<Written>> {
        if self.no_lone.load(Ordering::SeqCst) {
            return Err(finish);
        }
        self.lone.fetch_add(1, Ordering::SeqCst);
        let (seq, unanswered) = (*item, self.drop_lone.load(Ordering::SeqCst));
        std::thread::spawn(move || {
            if unanswered {
                drop(finish);
            } else {
                finish.done(Ok(Written(vec![event(seq)])), 3);
            }
        });
        Ok(())
    }
}

/// Records what was published, and whether the feed's turn was still
/// held then.
struct Published {
    feed: CommitFeed,
    seen: Mutex<Vec<(u64, bool)>>,
}

impl CommitListener for Published {
    fn committed(&self, events: &[StoredEvent]) {
        let turn_held = self.feed.try_turn().is_none();
        let mut seen = self.seen.lock().unwrap();
        seen.extend(events.iter().map(|e| (e.seq, turn_held)));
    }
}

fn commit() -> (
    GroupCommit<u64, Written>,
    Arc<Backend>,
    Arc<Published>,
    CommitFeed,
) {
    let feed = CommitFeed::default();
    let published = Arc::new(Published {
        feed: feed.clone(),
        seen: Mutex::new(Vec::new()),
    });
    assert!(feed.listen(published.clone()));
    let backend = Arc::new(Backend::default());
    let lock = Arc::new(tokio::sync::Mutex::new(()));
    let commit = GroupCommit::new(lock, backend.clone(), feed.clone());
    (commit, backend, published, feed)
}

#[tokio::test]
async fn a_lone_write_is_finished_where_it_is_written_and_published_under_the_turn() {
    let (commit, backend, published, feed) = commit();
    let (done, statements) = crate::store::sql::count_statements(commit.submit(&7)).await;
    assert_eq!(done.expect("answered").0[0].seq, 7);
    assert_eq!(
        statements, 3,
        "the thread's statements count for the caller"
    );
    assert_eq!(backend.lone.load(Ordering::SeqCst), 1);
    assert_eq!(backend.grouped.load(Ordering::SeqCst), 0);
    // Answered first, published next: the turn comes back after both.
    drop(feed.turn().await);
    assert_eq!(*published.seen.lock().unwrap(), vec![(7, true)]);
}

#[tokio::test]
async fn a_lone_write_behind_a_publishing_group_takes_the_group_path() {
    let (commit, backend, published, feed) = commit();
    let turn = feed.try_turn().expect("free");
    let write = tokio::spawn(async move { commit.submit(&8).await.map(|w| w.0[0].seq) });
    // The write cannot publish while the turn is held: it waits for it.
    while backend.grouped.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    assert!(published.seen.lock().unwrap().is_empty());
    drop(turn);
    assert_eq!(write.await.unwrap().expect("answered"), 8);
    assert_eq!(backend.lone.load(Ordering::SeqCst), 0);
    drop(feed.turn().await);
    assert_eq!(*published.seen.lock().unwrap(), vec![(8, true)]);
}

#[tokio::test]
async fn a_lone_write_that_dies_unanswered_fails_and_frees_both_locks() {
    let (commit, backend, published, feed) = commit();
    backend.drop_lone.store(true, Ordering::SeqCst);
    let err = commit.submit(&9).await.expect_err("no answer");
    assert!(err.to_string().contains("ended without an answer"), "{err}");
    assert!(feed.try_turn().is_some(), "the turn was released");
    backend.drop_lone.store(false, Ordering::SeqCst);
    assert_eq!(
        commit.submit(&10).await.expect("the lock was released").0[0].seq,
        10
    );
    drop(feed.turn().await);
    assert_eq!(*published.seen.lock().unwrap(), vec![(10, true)]);
}

/// PostgreSQL's way (ADR 0037): group tasks on a writer runtime of their
/// own, each going on to the groups queued behind it. Every write is
/// answered and published once, publishes keep the order writes took,
/// and the lock and the turn are free once the queue is empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_on_a_writer_runtime_answers_and_publishes_every_write_once() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let writer = runtime.handle().clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        runtime.block_on(async {
            let _ = stopped.await;
        })
    });
    let (commit, backend, published, feed) = commit();
    backend.no_lone.store(true, Ordering::SeqCst);
    let commit = Arc::new(commit.draining_on(writer));
    let writes: Vec<_> = (1..=200u64)
        .map(|seq| {
            let commit = commit.clone();
            tokio::spawn(async move { commit.submit(&seq).await })
        })
        .collect();
    for (seq, w) in (1..=200u64).zip(writes) {
        let done = w.await.unwrap().expect("answered");
        assert_eq!(done.0[0].seq, seq);
    }
    assert_eq!(backend.grouped.load(Ordering::SeqCst), 200);
    assert_eq!(backend.lone.load(Ordering::SeqCst), 0);
    // Every publish done: the last one gives the turn back.
    drop(feed.turn().await);
    let seen: Vec<u64> = published.seen.lock().unwrap().iter().map(|s| s.0).collect();
    assert_eq!(seen.len(), 200, "each write published once");
    assert_eq!(
        seen,
        *backend.written.lock().unwrap(),
        "published in the order written"
    );
    // The lock was let go: a later write goes through.
    let later = commit.submit(&201).await.expect("answered");
    assert_eq!(later.0[0].seq, 201);
    let _ = stop.send(());
    thread.join().unwrap();
}
