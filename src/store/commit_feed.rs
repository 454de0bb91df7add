//! Where a group commit's events go live, in commit order.
//!
//! A live socket takes an event only if it is exactly the next one of its
//! audience; anything else sends it back to reading the log (ADR 0007).
//! When each writer of a group published its own events after being
//! answered, the group's writers woke in any order, so a fan-out of a
//! group of sends offered most receivers a gap, and every receiver then
//! read the log again: at 100 members and 16 sends in flight that replay
//! was a sixth of the hub's time (docs/benchmarks.md, "Gaps").
//!
//! So the group's own task publishes, in group order, after the commit,
//! not each writer. It answers the writers first (their answers then go
//! out ahead of the deliveries the publish wakes, and their next sends
//! come in while this group's frames go out), and takes the feed's turn
//! before it lets the next group write, so groups publish in commit order
//! while the next one writes. A lone write whose turn is free takes it
//! before writing and is finished where it was written
//! ([`super::group_commit::LoneFinish`]). Publishing is no I/O (it queues
//! frames).
//! The store is built before the event bus, hence the listener is set once
//! after both exist ([`CommitFeed::listen`]).

use std::sync::{Arc, OnceLock};

use crate::domain::event::StoredEvent;

/// Takes committed events to the sockets: the hub's event bus.
pub trait CommitListener: Send + Sync {
    fn committed(&self, events: &[StoredEvent]);
}

/// A group write's result, with the events its commit stored.
pub trait Committed {
    fn committed_events(&self) -> &[StoredEvent];
}

/// Shared by a store and its group committers; empty until the hub
/// listens, so a store used on its own (tests, `bench layout`) publishes
/// nothing.
#[derive(Clone, Default)]
pub struct CommitFeed {
    listener: Arc<OnceLock<Arc<dyn CommitListener>>>,
    /// Taken under the writer lock, released after publishing: FIFO, so
    /// in commit order. Shared by a store's committers of every kind.
    turn: Arc<tokio::sync::Mutex<()>>,
}

impl CommitFeed {
    /// Sets the listener; a second listener is refused (returns false), so
    /// one store never feeds two buses.
    pub fn listen(&self, listener: Arc<dyn CommitListener>) -> bool {
        self.listener.set(listener).is_ok()
    }

    /// The right to publish next. Take it while still holding the write
    /// lock of the commit whose events it publishes.
    pub async fn turn(&self) -> tokio::sync::OwnedMutexGuard<()> {
        self.turn.clone().lock_owned().await
    }

    /// The turn, if nobody holds or waits for it now: a lone write that
    /// takes it before writing delays no earlier group's publishing.
    pub fn try_turn(&self) -> Option<tokio::sync::OwnedMutexGuard<()>> {
        self.turn.clone().try_lock_owned().ok()
    }

    pub fn publish(&self, events: &[StoredEvent]) {
        if events.is_empty() {
            return;
        }
        if let Some(listener) = self.listener.get() {
            listener.committed(events);
        }
    }
}
