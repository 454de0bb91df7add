//! Live delivery of the durable event log.
//!
//! The database is the source of truth; this module only moves committed
//! events to sockets. Each authenticated socket has a [`Subscription`] with a
//! cursor (`delivered`). It is either *replaying* (a pump task reads the log
//! after the cursor and sends with backpressure) or *live* (writers hand it
//! each event right after their commit, and it sends the event only if it is
//! exactly the next one). A live subscription that sees a gap (writers
//! publish concurrently, so event 6 may be offered before event 5) falls back
//! to replaying, which reads the gap from the log. Because the cursor moves
//! only forward and only by one, a socket gets every event once, in order.
//! See docs/adr/0007-event-log.md.
//!
//! In a cluster (ADR 0034 §3) events committed by another node are never
//! offered here: a wake-up from NATS, or the periodic check of the log,
//! gives the subscription a *hint* that its log grew, and it reads the log
//! as it does on a gap. Ephemeral events cross on NATS with their payload.

mod ephemeral;
pub mod frames;
pub mod remote;
pub mod retention;

use std::sync::{Arc, Mutex};

use dashmap::DashMap;
use serde_json::Value;
use tokio::sync::Notify;
use tracing::{debug, warn};
use uuid::Uuid;

use crate::cluster::{self, wake, Cluster};
use crate::domain::event::StoredEvent;
use crate::rpc::{close_code, Peer};
use crate::store::DynStore;
use crate::telemetry::names;
use frames::FrameWriter;

/// A stored event as an HTTP receiver gets it (an app's
/// `interactionsUrl`, a webhook subscription): its catch-up envelope, the
/// same as on the gateway, with the log's `syncEpoch`. One function for
/// both ways, so a receiver of both parses one shape.
pub fn webhook_body(event: &StoredEvent, sync_epoch: &str) -> Vec<u8> {
    let mut envelope = serde_json::to_value(event.envelope_ref()).expect("an envelope serializes");
    envelope["syncEpoch"] = Value::String(sync_epoch.to_string());
    serde_json::to_vec(&envelope).expect("JSON serializes")
}

struct Cursor {
    /// Highest seq sent on this socket.
    delivered: u64,
    /// Highest seq any writer offered; tells the pump whether to read again.
    latest_known: u64,
    /// A hint came (another node's commit, the periodic check) since the
    /// pump's last read began: read once more before going live. Cleared
    /// when a read begins, so a wrong hint costs one read, never a loop.
    recheck: bool,
    live: bool,
}

pub struct Subscription {
    connection: Uuid,
    audience: Uuid,
    peer: Peer,
    cursor: Mutex<Cursor>,
    wake: Notify,
}

impl Subscription {
    /// Sends the event if it is exactly the next one; the frame is written
    /// only then, by the publish call's shared writer.
    /// True when it was sent: the caller counts a publish's deliveries
    /// once, not a labelled counter lookup per receiver.
    fn offer<'a>(&self, event: &'a StoredEvent, frames: &mut FrameWriter<'a>) -> bool {
        let mut c = self.cursor.lock().expect("cursor lock");
        c.latest_known = c.latest_known.max(event.seq);
        if !c.live || event.seq <= c.delivered {
            return false;
        }
        if event.seq == c.delivered + 1 {
            if self.peer.send(frames.frame(event)).is_ok() {
                c.delivered = event.seq;
                return true;
            }
        } else {
            c.live = false;
            metrics::counter!(names::EVENT_GAPS).increment(1);
            self.wake.notify_one();
        }
        false
    }

    /// The audience's log reached `seq` somewhere: a socket behind it reads
    /// the log. True when a live socket was sent back to the log.
    fn hint(&self, seq: u64) -> bool {
        let mut c = self.cursor.lock().expect("cursor lock");
        if seq <= c.delivered {
            return false;
        }
        c.recheck = true;
        if !c.live {
            return false;
        }
        c.live = false;
        self.wake.notify_one();
        true
    }

    /// Marks the start of a read of the log: hints before it are answered
    /// by it.
    fn reading(&self) {
        self.cursor.lock().expect("cursor lock").recheck = false;
    }
}

pub struct EventBus {
    store: DynStore,
    replay_batch: u32,
    /// Other nodes learn of this node's commits and ephemeral events
    /// through it (nothing in `single` mode).
    cluster: Arc<Cluster>,
    subscriptions: DashMap<Uuid, Vec<Arc<Subscription>>>,
    waiters: DashMap<Uuid, Arc<Notify>>,
}

impl EventBus {
    pub fn new(store: DynStore, replay_batch: u32, cluster: Arc<Cluster>) -> EventBus {
        EventBus {
            store,
            replay_batch,
            cluster,
            subscriptions: DashMap::new(),
            waiters: DashMap::new(),
        }
    }

    /// Hands committed events to the sockets and long-polls of their
    /// audiences. Call it after the commit, never inside a transaction.
    ///
    /// Every writer publishes exactly the events its commit stored, so this
    /// is also the one place that counts `switchboard_events_written_total`.
    /// The copies of one fan-out share a payload, serialized once here.
    pub fn publish(&self, events: &[StoredEvent]) {
        count_written(events);
        let mut frames = FrameWriter::new();
        let mut delivered = 0;
        for event in events {
            if let Some(subs) = self.subscriptions.get(&event.audience) {
                for s in subs.iter() {
                    delivered += u64::from(s.offer(event, &mut frames));
                }
            }
            if let Some(w) = self.waiters.get(&event.audience) {
                w.notify_waiters();
            }
        }
        if delivered > 0 {
            metrics::counter!(names::EVENTS_DELIVERED, "path" => "live").increment(delivered);
        }
        self.wake_other_nodes(events);
    }

    /// One wake-up per audience on NATS, with its new last seq, so the
    /// other nodes' sockets of it read the log. At most once: a lost one
    /// waits for the periodic check.
    fn wake_other_nodes(&self, events: &[StoredEvent]) {
        if self.cluster.client().is_none() {
            return;
        }
        for message in wake::encode(&wake::heads(events)) {
            self.cluster
                .publish(cluster::Kind::Wake, cluster::subjects::WAKE, message);
        }
    }

    /// Hints from other nodes or the periodic check: each socket of these
    /// audiences behind the seq reads the log. Returns how many live
    /// sockets were sent back to the log.
    pub fn hint(&self, heads: &[(Uuid, u64)]) -> usize {
        let mut behind = 0;
        for (audience, seq) in heads {
            if let Some(subs) = self.subscriptions.get(audience) {
                behind += subs.iter().filter(|s| s.hint(*seq)).count();
            }
        }
        behind
    }

    /// Wakes the long-polls of these audiences (they read the log again,
    /// and wait again when it has nothing new).
    pub fn notify_waiters(&self, audiences: impl IntoIterator<Item = Uuid>) {
        for audience in audiences {
            if let Some(w) = self.waiters.get(&audience) {
                w.notify_waiters();
            }
        }
    }

    /// The audiences with a socket here.
    pub fn live_audiences(&self) -> Vec<Uuid> {
        self.subscriptions.iter().map(|e| *e.key()).collect()
    }

    /// Whether a socket of `audience` is here.
    pub fn is_live(&self, audience: Uuid) -> bool {
        self.subscriptions.contains_key(&audience)
    }

    /// The audiences with a long-poll (or its notifier) here.
    pub fn waited_audiences(&self) -> Vec<Uuid> {
        self.waiters.iter().map(|e| *e.key()).collect()
    }

    /// Starts delivery on a socket from just after `after`: registers the
    /// subscription first (so no offer is missed), then replays.
    pub fn attach(
        &self,
        tasks: &tokio_util::task::TaskTracker,
        connection: Uuid,
        audience: Uuid,
        peer: Peer,
        after: u64,
    ) {
        let sub = Arc::new(Subscription {
            connection,
            audience,
            peer,
            cursor: Mutex::new(Cursor {
                delivered: after,
                latest_known: after,
                recheck: false,
                live: false,
            }),
            wake: Notify::new(),
        });
        self.subscriptions
            .entry(audience)
            .or_default()
            .push(sub.clone());
        tasks.spawn(pump(self.store.clone(), sub, self.replay_batch));
    }

    pub fn detach(&self, audience: Uuid, connection: Uuid) {
        if let Some(mut list) = self.subscriptions.get_mut(&audience) {
            list.retain(|s| s.connection != connection);
        }
        self.subscriptions.remove_if(&audience, |_, l| l.is_empty());
    }

    /// A notifier woken whenever an event for `audience` is published, for
    /// REST long-polls.
    pub fn waiter(&self, audience: Uuid) -> Arc<Notify> {
        self.waiters.entry(audience).or_default().clone()
    }

    /// Drops notifiers nobody waits on.
    pub fn sweep_waiters(&self) {
        self.waiters.retain(|_, n| Arc::strong_count(n) > 1);
    }
}

impl crate::store::CommitListener for EventBus {
    fn committed(&self, events: &[StoredEvent]) {
        self.publish(events);
    }
}

/// Counts events by type, once per run of equal types: a fan-out of a
/// thousand copies is one increment, not a thousand label lookups.
fn count_written(events: &[StoredEvent]) {
    for run in events.chunk_by(|a, b| a.event_type == b.event_type) {
        metrics::counter!(names::EVENTS_WRITTEN, "type" => run[0].event_type.clone())
            .increment(run.len() as u64);
    }
}

/// Replays the log onto one socket until it catches up, then goes live; goes
/// back to replaying whenever a live offer finds a gap. While a full page
/// is being sent the next one is already read, so the database and the
/// socket work at once.
async fn pump(store: DynStore, sub: Arc<Subscription>, batch: u32) {
    loop {
        let mut prefetched = None;
        // Replay until caught up.
        loop {
            let after = sub.cursor.lock().expect("cursor lock").delivered;
            let read = match prefetched.take() {
                Some(page) => page,
                None => {
                    sub.reading();
                    read_page(store.clone(), sub.audience, after, batch).await
                }
            };
            let events = match read {
                Ok(e) => e,
                Err(e) => {
                    warn!(audience = %sub.audience, error = %e, "event replay failed; closing the socket so the client resumes");
                    sub.peer
                        .close(close_code::INTERNAL, "event replay failed; resume");
                    return;
                }
            };
            if let Some(first) = events.first() {
                if first.seq != after + 1 {
                    // Retention removed events this socket had not seen.
                    sub.peer.close(
                        close_code::RESYNC_REQUIRED,
                        "resync required: events were pruned",
                    );
                    return;
                }
            }
            let next = (events.len() == batch as usize).then(|| {
                let last = events.last().expect("a full page").seq;
                sub.reading();
                tokio::spawn(read_page(store.clone(), sub.audience, last, batch))
            });
            if !send_page(&sub, &events).await {
                return;
            }
            if let Some(next) = next {
                prefetched = Some(next.await.unwrap_or_else(|e| {
                    Err(crate::store::StoreError::Corrupt(format!(
                        "replay read: {e}"
                    )))
                }));
                continue;
            }
            let mut c = sub.cursor.lock().expect("cursor lock");
            if c.latest_known <= c.delivered && !c.recheck {
                c.live = true;
                debug!(audience = %sub.audience, at = c.delivered, "subscription live");
                break;
            }
        }
        tokio::select! {
            _ = sub.wake.notified() => {}
            _ = sub.peer.closing() => return,
        }
    }
}

async fn read_page(
    store: DynStore,
    audience: Uuid,
    after: u64,
    batch: u32,
) -> crate::store::StoreResult<Vec<StoredEvent>> {
    store.events_after(audience, after, batch).await
}

/// Sends a page of the log in order, moving the cursor with each event;
/// false once the socket is gone.
async fn send_page(sub: &Subscription, events: &[StoredEvent]) -> bool {
    // Events read from the log have a payload each, so this writer saves
    // only the repeated type and timestamp texts.
    let mut frames = FrameWriter::new();
    let replayed = metrics::counter!(names::EVENTS_DELIVERED, "path" => "replay");
    for event in events {
        if sub.peer.send_bulk(frames.frame(event)).await.is_err() {
            return false;
        }
        sub.cursor.lock().expect("cursor lock").delivered = event.seq;
        replayed.increment(1);
    }
    true
}

#[cfg(test)]
mod webhook_body_tests {
    use serde_json::json;

    use super::*;

    /// The body both HTTP ways send: the catch-up envelope's members and
    /// `syncEpoch`, nothing else.
    #[test]
    fn a_webhook_body_is_the_envelope_with_the_sync_epoch() {
        let e = StoredEvent {
            id: Uuid::now_v7(),
            audience: Uuid::new_v4(),
            seq: 7,
            event_type: "app/command/invoked".into(),
            occurred_at: 0,
            payload: json!({"options": {"title": "x"}}).into(),
        };
        let body: Value = serde_json::from_slice(&webhook_body(&e, "epoch-1")).unwrap();
        let mut expected = serde_json::to_value(e.envelope()).unwrap();
        expected["syncEpoch"] = json!("epoch-1");
        assert_eq!(body, expected);
        let members: Vec<&str> = body
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            members.len(),
            7,
            "id, seq, type, occurredAt, audience, payload, syncEpoch: {members:?}"
        );
    }
}
