//! A read of an audience's log that, when empty, waits for its next
//! publish: REST catch-up's `wait` and the hosted `read_inbox` /
//! `wait_for_message` primitives share it.

use std::time::Duration;

use tokio::time::Instant;

use uuid::Uuid;

use super::Hub;
use crate::domain::event::StoredEvent;
use crate::store::StoreResult;

impl Hub {
    /// The events of `audience` after `after` (at most `limit`); an empty
    /// page waits up to `wait_secs` for the audience's next publish, or the
    /// hub's shutdown, and is read again. The waiter is registered before
    /// each read, so a publish between the read and the wait is not
    /// missed. A wake that finds nothing new (another node's hint, the
    /// cluster's periodic check, ADR 0034 §3) waits again until the
    /// deadline.
    pub async fn events_after_waiting(
        &self,
        audience: Uuid,
        after: u64,
        limit: u32,
        wait_secs: u64,
    ) -> StoreResult<Vec<StoredEvent>> {
        let deadline = Instant::now() + Duration::from_secs(wait_secs);
        loop {
            let notify = self.events.waiter(audience);
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let events = self.store.events_after(audience, after, limit).await?;
            if !events.is_empty() || Instant::now() >= deadline {
                return Ok(events);
            }
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep_until(deadline) => {}
                _ = self.shutdown.cancelled() => {
                    return self.store.events_after(audience, after, limit).await;
                }
            }
        }
    }
}
