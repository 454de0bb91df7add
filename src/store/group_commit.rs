//! Group commit, shared by both stores (ADR 0013): concurrent writes of
//! one kind (sends, verdicts) share one transaction and its sync.
//!
//! Every write queues its item, then waits for the group lock; whoever gets
//! it writes everything queued so far in one transaction through the
//! backend's [`GroupWriter`] and answers each writer. A write answered by
//! an earlier group returns at once; a write given up while still queued
//! is taken back out, so it is never written behind writes that came after
//! it. The group's events go live in group order, after its writers are
//! answered and before any later group's ([`super::commit_feed`]): from the
//! group's task, which lets the next group write meanwhile, or, for a lone
//! send on SQLite, from the writer thread ([`LoneFinish`]). On PostgreSQL
//! a group's task runs on the writer runtime and goes on to the groups
//! queued behind it ([`GroupTasks::Draining`], ADR 0037).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::commit_feed::{CommitFeed, Committed};
use super::{StoreError, StoreResult};
use crate::domain::event::StoredEvent;

/// A backend's two ways of writing items of one kind.
#[async_trait]
pub trait GroupWriter<T, R>: Send + Sync + 'static {
    /// One item in its own transaction: a lone write, and the fallback
    /// when a group's combined write fails on one item's fault.
    async fn write_one(&self, item: &T) -> StoreResult<R>;
    /// The whole group in one transaction, results in group order.
    async fn write_group(&self, group: &[&T]) -> StoreResult<Vec<R>>;
    /// A lone item written and its group finished where it is written
    /// (SQLite's writer thread): no group task, no hop back to one before
    /// the answer. A backend without such a place gives `finish` back.
    fn write_lone(&self, item: &T, finish: LoneFinish<R>) -> Result<(), LoneFinish<R>> {
        let _ = item;
        Err(finish)
    }
}

/// What is left of a lone write's group once it is written: let the next
/// group write, answer, publish. It holds the writer lock and the feed's
/// turn, both taken before the write, so it publishes in commit order.
/// Dropped unfinished (the write panicked), it answers nobody and releases
/// both.
pub struct LoneFinish<R> {
    holding: tokio::sync::OwnedMutexGuard<()>,
    turn: tokio::sync::OwnedMutexGuard<()>,
    feed: CommitFeed,
    reply: Reply<R>,
    ran: tokio::sync::oneshot::Sender<u64>,
}

impl<R: Committed> LoneFinish<R> {
    /// Called after the commit, with the statements the write ran. Runs on
    /// any thread: publishing only queues frames.
    pub fn done(self, result: StoreResult<R>, statements: u64) {
        let LoneFinish {
            holding,
            turn,
            feed,
            reply,
            ran,
        } = self;
        drop(holding);
        let events = match &result {
            Ok(r) => r.committed_events().to_vec(),
            Err(_) => Vec::new(),
        };
        let _ = ran.send(statements);
        let _ = reply.send(result);
        feed.publish(&events);
        drop(turn);
    }
}

struct Queued<T, R> {
    ticket: u64,
    item: T,
    reply: Reply<R>,
}

type Queue<T, R> = Arc<Mutex<Vec<Queued<T, R>>>>;

pub struct GroupCommit<T, R> {
    /// Held while a group is written. SQLite shares it with every other
    /// write transaction (its single writer); PostgreSQL has one per kind.
    lock: Arc<tokio::sync::Mutex<()>>,
    queued: Queue<T, R>,
    tickets: AtomicU64,
    writer: Arc<dyn GroupWriter<T, R>>,
    feed: CommitFeed,
    tasks: GroupTasks,
}

/// Where a group's task runs, and how many groups it writes.
enum GroupTasks {
    /// On the caller's runtime, one group a task. SQLite's: its lock is
    /// every write transaction's, so a task that kept it would hold off
    /// writes of other kinds.
    PerGroup,
    /// On a writer runtime of the backend's own (ADR 0037): a task writes
    /// its group, then every group queued behind it while it holds the
    /// lock, and hands each group's publish back to the caller's runtime.
    /// Only for a lock of this kind alone: whoever waits for it has queued
    /// an item, which the task takes.
    Draining(tokio::runtime::Handle),
}

impl<T, R> GroupCommit<T, R>
where
    T: Clone + Send + Sync + 'static,
    R: Committed + Send + 'static,
{
    pub fn new(
        lock: Arc<tokio::sync::Mutex<()>>,
        writer: Arc<dyn GroupWriter<T, R>>,
        feed: CommitFeed,
    ) -> GroupCommit<T, R> {
        GroupCommit {
            lock,
            queued: Arc::new(Mutex::new(Vec::new())),
            tickets: AtomicU64::new(0),
            writer,
            feed,
            tasks: GroupTasks::PerGroup,
        }
    }

    /// Group tasks on `writer`, each draining the queue (see
    /// [`GroupTasks::Draining`]): a runtime whose threads do nothing else
    /// takes a statement's answer as soon as it arrives, where a busy
    /// runtime's workers get to it after the deliveries they are writing,
    /// and the next group starts as the last one commits instead of when
    /// a waiting caller is next polled.
    pub fn draining_on(mut self, writer: tokio::runtime::Handle) -> Self {
        self.tasks = GroupTasks::Draining(writer);
        self
    }

    pub async fn submit(&self, item: &T) -> StoreResult<R> {
        let (reply, mut answer) = tokio::sync::oneshot::channel();
        let ticket = self.tickets.fetch_add(1, Ordering::Relaxed);
        self.queue().push(Queued {
            ticket,
            item: item.clone(),
            reply,
        });
        let mut unqueue = Unqueue {
            queued: self.queued.clone(),
            ticket,
            armed: true,
        };
        // An earlier group may write this item while we wait for the lock:
        // take its answer at once rather than queueing for the lock behind
        // unrelated writes.
        let holding = tokio::select! {
            biased;
            done = &mut answer => {
                unqueue.armed = false;
                return done.unwrap_or_else(|_| Err(group_ended()));
            }
            holding = self.lock.clone().lock_owned() => holding,
        };
        unqueue.armed = false;
        // Answered while we waited for the lock: an earlier group wrote it.
        if let Ok(done) = answer.try_recv() {
            return done;
        }
        let mut group = std::mem::take(&mut *self.queue());
        if group.is_empty() {
            // Ours is in the group whose task just let the lock go and is
            // answering; it answers us next.
            drop(holding);
            return answer.await.unwrap_or_else(|_| Err(group_ended()));
        }
        let (ran_tx, ran) = tokio::sync::oneshot::channel();
        // Alone, with no earlier group still publishing: the whole group
        // goes where it is written.
        let (holding, ran_tx) = match self.lone(&mut group, holding, ran_tx) {
            Lone::Handed => return answered(ran, answer).await,
            Lone::Kept { holding, ran } => (holding, ran),
        };
        let task = GroupTask {
            writer: self.writer.clone(),
            feed: self.feed.clone(),
            queued: self.queued.clone(),
        };
        // Its own task: the group's other writers wait on this write, so it
        // must finish even if this caller is dropped.
        match &self.tasks {
            GroupTasks::PerGroup => {
                tokio::spawn(task.one(group, holding, ran_tx));
            }
            GroupTasks::Draining(writer) => {
                let publisher = tokio::runtime::Handle::current();
                writer.spawn(task.drain(group, holding, ran_tx, publisher));
            }
        }
        answered(ran, answer).await
    }

    /// Hands a lone group to [`GroupWriter::write_lone`] when the feed's
    /// turn is free now; otherwise (a group is publishing, or the backend
    /// has no such path) keeps it for a group task.
    fn lone(
        &self,
        group: &mut Vec<Queued<T, R>>,
        holding: tokio::sync::OwnedMutexGuard<()>,
        ran: tokio::sync::oneshot::Sender<u64>,
    ) -> Lone {
        let free_turn = (group.len() == 1).then(|| self.feed.try_turn()).flatten();
        let Some(turn) = free_turn else {
            return Lone::Kept { holding, ran };
        };
        let Queued {
            ticket,
            item,
            reply,
        } = group.pop().expect("a lone group");
        let finish = LoneFinish {
            holding,
            turn,
            feed: self.feed.clone(),
            reply,
            ran,
        };
        match self.writer.write_lone(&item, finish) {
            Ok(()) => Lone::Handed,
            Err(finish) => {
                let LoneFinish {
                    holding,
                    reply,
                    ran,
                    ..
                } = finish;
                group.push(Queued {
                    ticket,
                    item,
                    reply,
                });
                Lone::Kept { holding, ran }
            }
        }
    }

    #[cfg(test)]
    pub fn queued_len(&self) -> usize {
        self.queue().len()
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Vec<Queued<T, R>>> {
        self.queued.lock().expect("group queue poisoned")
    }
}

/// What a group's task needs of its [`GroupCommit`].
struct GroupTask<T, R> {
    writer: Arc<dyn GroupWriter<T, R>>,
    feed: CommitFeed,
    queued: Queue<T, R>,
}

impl<T, R> GroupTask<T, R>
where
    T: Send + Sync + 'static,
    R: Committed + Send + 'static,
{
    /// Writes one group, lets the next write while this one publishes,
    /// answers, publishes.
    async fn one(
        self,
        group: Vec<Queued<T, R>>,
        holding: tokio::sync::OwnedMutexGuard<()>,
        ran: tokio::sync::oneshot::Sender<u64>,
    ) {
        let (answers, n) =
            super::sql::count_statements(write_group(self.writer.as_ref(), group)).await;
        let _ = ran.send(n);
        // The next group may write while this one publishes, but not
        // publish before it: the turn is taken in commit order.
        let turn = self.feed.turn().await;
        drop(holding);
        let published = answer(answers);
        publish(&self.feed, &published);
        drop(turn);
    }

    /// Writes groups while any are queued, holding the lock throughout;
    /// each group's publish runs on `publisher` in commit order (its turn
    /// is taken before the next group's write). `publisher` is the runtime
    /// of the caller that started the drain, for every group it writes:
    /// the hub runs its store on one runtime.
    async fn drain(
        self,
        mut group: Vec<Queued<T, R>>,
        holding: tokio::sync::OwnedMutexGuard<()>,
        ran: tokio::sync::oneshot::Sender<u64>,
        publisher: tokio::runtime::Handle,
    ) {
        let mut ran = Some(ran);
        loop {
            let (answers, n) =
                super::sql::count_statements(write_group(self.writer.as_ref(), group)).await;
            if let Some(ran) = ran.take() {
                let _ = ran.send(n);
            }
            let turn = self.feed.turn().await;
            let published = answer(answers);
            let feed = self.feed.clone();
            publisher.spawn(async move {
                publish(&feed, &published);
                drop(turn);
            });
            group = std::mem::take(&mut *self.queued.lock().expect("group queue poisoned"));
            if group.is_empty() {
                drop(holding);
                return;
            }
        }
    }
}

/// Sends each writer its answer; returns the events to publish. Answer
/// first, then publish: each sender's answer is queued ahead of the
/// deliveries the publish wakes, so the next sends come in while this
/// group's frames go out (the commit is durable either way). The answers
/// keep their events; the feed publishes copies (shared payloads, so a
/// copy is small).
fn answer<R: Committed>(answers: Vec<(Reply<R>, StoreResult<R>)>) -> Vec<Vec<StoredEvent>> {
    let mut published = Vec::with_capacity(answers.len());
    for (reply, result) in answers {
        if let Ok(r) = &result {
            published.push(r.committed_events().to_vec());
        }
        let _ = reply.send(result);
    }
    published
}

fn publish(feed: &CommitFeed, published: &[Vec<StoredEvent>]) {
    for events in published {
        feed.publish(events);
    }
}

enum Lone {
    Handed,
    Kept {
        holding: tokio::sync::OwnedMutexGuard<()>,
        ran: tokio::sync::oneshot::Sender<u64>,
    },
}

/// The caller's answer. The group's statements count for the caller that
/// wrote it ([`super::count_statements`]): a lone write's are exactly its
/// own.
async fn answered<R>(
    ran: tokio::sync::oneshot::Receiver<u64>,
    answer: tokio::sync::oneshot::Receiver<StoreResult<R>>,
) -> StoreResult<R> {
    if let Ok(n) = ran.await {
        super::sql::note_statements(n);
    }
    answer.await.unwrap_or_else(|_| Err(group_ended()))
}

fn group_ended() -> StoreError {
    StoreError::Database(sqlx::Error::Protocol(
        "the group write ended without an answer".into(),
    ))
}

/// Removes a write's queue entry when the write is dropped before a writer
/// took it (once taken, the write goes ahead and answers nobody).
struct Unqueue<T, R> {
    queued: Queue<T, R>,
    ticket: u64,
    armed: bool,
}

impl<T, R> Drop for Unqueue<T, R> {
    fn drop(&mut self) {
        if self.armed {
            if let Ok(mut q) = self.queued.lock() {
                q.retain(|e| e.ticket != self.ticket);
            }
        }
    }
}

type Reply<R> = tokio::sync::oneshot::Sender<StoreResult<R>>;

/// Writes a group in one transaction. If one item is at fault (a
/// duplicate `clientMsgId`, a missing conversation) each is written on its
/// own so only that one gets the error; any other failure (the database is
/// unavailable) is every writer's answer, rather than N more attempts.
/// Answers come back in group order, not yet sent: the caller sends them,
/// then publishes their events.
async fn write_group<T: Sync + 'static, R: Send + 'static>(
    writer: &dyn GroupWriter<T, R>,
    group: Vec<Queued<T, R>>,
) -> Vec<(Reply<R>, StoreResult<R>)> {
    if group.len() > 1 {
        let items: Vec<&T> = group.iter().map(|q| &q.item).collect();
        match writer.write_group(&items).await {
            Ok(results) => {
                return group
                    .into_iter()
                    .zip(results)
                    .map(|(q, r)| (q.reply, Ok(r)))
                    .collect();
            }
            Err(e) if one_item_at_fault(&e) => {
                tracing::debug!(error = %e, size = items.len(), "group write failed; writing one by one")
            }
            Err(e) => {
                tracing::warn!(error = %e, size = items.len(), "group write failed");
                let text = e.to_string();
                return group
                    .into_iter()
                    .map(|q| {
                        let e = StoreError::Database(sqlx::Error::Protocol(text.clone()));
                        (q.reply, Err(e))
                    })
                    .collect();
            }
        }
    }
    let mut answers = Vec::with_capacity(group.len());
    for q in group {
        let r = writer.write_one(&q.item).await;
        answers.push((q.reply, r));
    }
    answers
}

fn one_item_at_fault(e: &StoreError) -> bool {
    match e {
        StoreError::NotFound => true,
        StoreError::Database(sqlx::Error::Database(db)) => {
            db.is_unique_violation() || db.is_foreign_key_violation()
        }
        _ => false,
    }
}

#[cfg(test)]
#[path = "group_commit_tests.rs"]
mod tests;
