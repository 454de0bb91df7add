//! What a subscription finds after its cursor (ADR 0033). Two reads, in
//! this order: the stream's head, then the events after the cursor. Every
//! seq at or below a head read first is committed, so an empty read after
//! it means retention took those events, never that an append was still
//! in flight. Read the other way round, an append committing between the
//! two reads would look like a pruned gap and its event would be skipped.

use async_trait::async_trait;
use uuid::Uuid;

use crate::domain::event::StoredEvent;
use crate::store::{Store, StoreError};

/// The two reads of an app's log a step needs.
#[async_trait]
pub(super) trait LogReads: Send + Sync {
    async fn head(&self, app_id: Uuid) -> Result<u64, StoreError>;
    async fn after(
        &self,
        app_id: Uuid,
        cursor: u64,
        limit: u32,
    ) -> Result<Vec<StoredEvent>, StoreError>;
}

#[async_trait]
impl LogReads for dyn Store {
    async fn head(&self, app_id: Uuid) -> Result<u64, StoreError> {
        self.stream_head(app_id).await
    }

    async fn after(
        &self,
        app_id: Uuid,
        cursor: u64,
        limit: u32,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        self.events_after(app_id, cursor, limit).await
    }
}

/// What the log holds after a cursor.
#[derive(Debug)]
pub(super) enum Window {
    /// Nothing after the cursor was committed when the head was read.
    CaughtUp,
    /// Retention took the events from `cursor + 1` up to `first_held - 1`.
    Gap { first_held: u64 },
    /// The events after the cursor, oldest first, starting at `cursor + 1`.
    Events(Vec<StoredEvent>),
}

pub(super) async fn read(
    log: &(impl LogReads + ?Sized),
    app_id: Uuid,
    cursor: u64,
    limit: u32,
) -> Result<Window, StoreError> {
    let head = log.head(app_id).await?;
    let events = log.after(app_id, cursor, limit).await?;
    Ok(match events.first() {
        None if head > cursor => Window::Gap {
            first_held: head + 1,
        },
        None => Window::CaughtUp,
        Some(first) if first.seq != cursor + 1 => Window::Gap {
            first_held: first.seq,
        },
        Some(_) => Window::Events(events),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::domain::event::EventPayload;

    /// An app's log in memory whose next append commits right after the
    /// first of the step's two reads, whichever that is.
    struct Racing {
        seqs: Mutex<Vec<u64>>,
        append_after_first_read: Mutex<Option<u64>>,
    }

    impl Racing {
        fn new(held: &[u64], racing_append: Option<u64>) -> Self {
            Self {
                seqs: Mutex::new(held.to_vec()),
                append_after_first_read: Mutex::new(racing_append),
            }
        }

        fn commit_racing_append(&self) {
            if let Some(seq) = self.append_after_first_read.lock().unwrap().take() {
                self.seqs.lock().unwrap().push(seq);
            }
        }
    }

    fn event(seq: u64) -> StoredEvent {
        StoredEvent {
            id: Uuid::new_v4(),
            audience: Uuid::nil(),
            seq,
            event_type: "message.created".into(),
            occurred_at: 0,
            payload: EventPayload::Value(std::sync::Arc::new(serde_json::json!({}))),
        }
    }

    #[async_trait]
    impl LogReads for Racing {
        async fn head(&self, _: Uuid) -> Result<u64, StoreError> {
            let head = self.seqs.lock().unwrap().last().copied().unwrap_or(0);
            self.commit_racing_append();
            Ok(head)
        }

        async fn after(
            &self,
            _: Uuid,
            cursor: u64,
            limit: u32,
        ) -> Result<Vec<StoredEvent>, StoreError> {
            let events = self
                .seqs
                .lock()
                .unwrap()
                .iter()
                .filter(|s| **s > cursor)
                .take(limit as usize)
                .map(|s| event(*s))
                .collect();
            self.commit_racing_append();
            Ok(events)
        }
    }

    #[tokio::test]
    async fn an_append_between_the_reads_is_never_a_gap() {
        // Caught up at 3; event 4 commits between the two reads.
        let log = Racing::new(&[1, 2, 3], Some(4));
        match read(&log, Uuid::nil(), 3, 10).await.unwrap() {
            Window::Events(events) => assert_eq!(events[0].seq, 4),
            other => panic!("an append racing the reads is read, not pruned: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_pruned_prefix_and_a_pruned_tail_are_gaps() {
        let pruned_prefix = Racing::new(&[5, 6], None);
        match read(&pruned_prefix, Uuid::nil(), 2, 10).await.unwrap() {
            Window::Gap { first_held } => assert_eq!(first_held, 5),
            other => panic!("{other:?}"),
        }
        // The head says 6 was written; retention kept none after 2.
        let all_pruned = AllPruned { head: 6 };
        match read(&all_pruned, Uuid::nil(), 2, 10).await.unwrap() {
            Window::Gap { first_held } => assert_eq!(first_held, 7),
            other => panic!("{other:?}"),
        }
    }

    struct AllPruned {
        head: u64,
    }

    #[async_trait]
    impl LogReads for AllPruned {
        async fn head(&self, _: Uuid) -> Result<u64, StoreError> {
            Ok(self.head)
        }

        async fn after(&self, _: Uuid, _: u64, _: u32) -> Result<Vec<StoredEvent>, StoreError> {
            Ok(Vec::new())
        }
    }
}
