//! The denial log (ADR 0020 §4): request-mode denials aggregated in memory
//! and flushed to the audit off the request path.
//!
//! Recording is synchronous and does no I/O, so hammering a refused call
//! costs a map update, not a write. Denials of the same key (actor, action,
//! reason, resource kind, resource id) within one window share a record;
//! the window opens at the record's first denial (unaligned, so a burst
//! cannot straddle a boundary it did not open) and later denials open a new
//! record. A flush writes absolute counts, so writing a record again is
//! harmless; a crash loses at most one interval's counts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::warn;
use uuid::Uuid;

use crate::config::AuditConfig;
use crate::domain::{now_millis, Millis};
use crate::store::{AuditRecord, AuditStore, DenialRecord};
use crate::telemetry::names;

/// Where the log reads the time; tests inject their own.
pub type Clock = Arc<dyn Fn() -> Millis + Send + Sync>;

/// One record's window, as counted so far.
#[derive(Clone, Copy, Debug)]
struct Window {
    id: Uuid,
    first_at: Millis,
    last_at: Millis,
    count: i64,
    /// Counted since the last flush that wrote it.
    dirty: bool,
}

impl Window {
    fn record(&self, denial: DenialRecord) -> AuditRecord {
        AuditRecord {
            id: self.id,
            denial,
            first_at: self.first_at,
            last_at: self.last_at,
            count: self.count,
        }
    }
}

#[derive(Default)]
struct Records {
    /// The current window of each key.
    open: HashMap<DenialRecord, Window>,
    /// Windows a later denial replaced before a flush wrote their last
    /// counts, and records a failed flush gave back.
    closed: Vec<AuditRecord>,
    /// A denial was dropped: the next flush makes room by forgetting every
    /// window it wrote, open or not (a later denial opens a new record).
    full: bool,
}

impl Records {
    fn held(&self) -> usize {
        self.open.len() + self.closed.len()
    }
}

pub struct DenialLog {
    records: Mutex<Records>,
    window_ms: Millis,
    max_open: usize,
    clock: Clock,
    /// Wakes the flush task before its interval (the log is full).
    full: Notify,
}

impl DenialLog {
    pub fn new(config: &AuditConfig) -> DenialLog {
        DenialLog::with_clock(config, Arc::new(now_millis))
    }

    pub fn with_clock(config: &AuditConfig, clock: Clock) -> DenialLog {
        DenialLog {
            records: Mutex::new(Records::default()),
            window_ms: i64::try_from(config.deny_aggregate_window_ms).unwrap_or(i64::MAX),
            max_open: config.max_open_records,
            clock,
            full: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Records> {
        self.records.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts one denial: into its key's open window, or a new record.
    /// Past `audit.max_open_records` it is dropped (counted) and a flush is
    /// asked for at once.
    pub fn record(&self, denial: DenialRecord) {
        let now = (self.clock)();
        let mut records = self.lock();
        if let Some(w) = records.open.get_mut(&denial) {
            if now < w.first_at.saturating_add(self.window_ms) {
                w.last_at = w.last_at.max(now);
                w.count += 1;
                w.dirty = true;
                return;
            }
        }
        // A new record. The key's expired window leaves the map, but stays
        // held until written if it counted anything since the last flush.
        let expired = records.open.remove(&denial);
        let unwritten = expired.is_some_and(|w| w.dirty);
        if records.held() + usize::from(unwritten) >= self.max_open {
            if let Some(w) = expired {
                records.open.insert(denial, w);
            }
            records.full = true;
            drop(records);
            metrics::counter!(names::AUDIT_DENIALS_DROPPED).increment(1);
            self.full.notify_one();
            return;
        }
        if let Some(w) = expired.filter(|w| w.dirty) {
            records.closed.push(w.record(denial));
        }
        let window = Window {
            id: Uuid::now_v7(),
            first_at: now,
            last_at: now,
            count: 1,
            dirty: true,
        };
        records.open.insert(denial, window);
    }

    /// What a flush writes: every record counted since the last one, with
    /// its totals. Windows that are over leave memory here, and every
    /// window when the log was full.
    fn take(&self) -> Vec<AuditRecord> {
        let now = (self.clock)();
        let mut records = self.lock();
        let mut out = std::mem::take(&mut records.closed);
        let evict = std::mem::take(&mut records.full);
        let window_ms = self.window_ms;
        records.open.retain(|denial, w| {
            if w.dirty {
                out.push(w.record(*denial));
                w.dirty = false;
            }
            !evict && now < w.first_at.saturating_add(window_ms)
        });
        out
    }

    /// A failed flush's records come back, so the next flush writes them
    /// (their values are absolute: a newer count of the same record wins).
    fn give_back(&self, failed: Vec<AuditRecord>) {
        let mut records = self.lock();
        for r in failed {
            match records.open.get_mut(&r.denial) {
                Some(w) if w.id == r.id => w.dirty = true,
                _ => records.closed.push(r),
            }
        }
    }

    /// Writes what was counted since the last flush; on failure keeps it
    /// for the next one.
    pub async fn flush<S: AuditStore + ?Sized>(&self, store: &S) {
        let batch = self.take();
        if batch.is_empty() {
            return;
        }
        match store.flush_denials(&batch).await {
            Ok(()) => {
                metrics::counter!(names::AUDIT_RECORDS_FLUSHED).increment(batch.len() as u64);
            }
            Err(e) => {
                warn!(error = %e, records = batch.len(), "audit flush failed; kept for the next one");
                self.give_back(batch);
            }
        }
    }

    /// Records held in memory (open windows and unwritten ones).
    pub fn held(&self) -> usize {
        self.lock().held()
    }
}

/// The flush task: every `audit.flush_interval_ms`, and at once when the
/// log is full, until shutdown. The last flush is the server's, after the
/// connections drained (`Server::shutdown`), so no denial counted during
/// the drain is lost.
pub async fn run(
    log: Arc<DenialLog>,
    store: crate::store::DynStore,
    interval_ms: u64,
    shutdown: CancellationToken,
) {
    // The first tick one period from now, not at once: there is nothing
    // to write yet.
    let period = Duration::from_millis(interval_ms);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = log.full.notified() => {}
            _ = shutdown.cancelled() => return,
        }
        log.flush(store.as_ref()).await;
    }
}

#[cfg(test)]
#[path = "denials_tests.rs"]
mod tests;
