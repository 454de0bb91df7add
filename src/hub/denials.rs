//! The denial log (ADR 0020 §4): request-mode denials aggregated in memory
//! and flushed to the audit off the request path.
//!
//! Recording is synchronous and does no I/O, so hammering a refused call
//! costs a map update, not a write. Denials of the same key (actor, action,
//! reason, resource kind, resource id) within one window share a record;
//! the window opens at the record's first denial (unaligned, so a burst
//! cannot straddle a boundary it did not open) and later denials open a new
//! record. A flush writes absolute counts and the store keeps the larger, so
//! writing a record again (or an older copy of it) is harmless. A crash
//! loses what was counted since the last flush that succeeded: at most one
//! `audit.flush_interval_ms` while the store answers.

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
    /// Records a flush took out of memory (closed or evicted) and is still
    /// writing: they come back if it fails, so they keep their room.
    in_flight: usize,
    /// The server's last flush ran: a later denial is dropped (counted).
    sealed: bool,
}

impl Records {
    /// Everything that counts against `audit.max_open_records`.
    fn held(&self) -> usize {
        self.open.len() + self.closed.len() + self.in_flight
    }

    /// Folds `r` into the copy of the same record held, if any: the larger
    /// count and last time win, as in the store. False if none is held.
    fn merge(&mut self, r: &AuditRecord) -> bool {
        if let Some(w) = self.open.get_mut(&r.denial).filter(|w| w.id == r.id) {
            w.count = w.count.max(r.count);
            w.last_at = w.last_at.max(r.last_at);
            w.dirty = true;
            return true;
        }
        if let Some(c) = self.closed.iter_mut().find(|c| c.id == r.id) {
            c.count = c.count.max(r.count);
            c.last_at = c.last_at.max(r.last_at);
            return true;
        }
        false
    }
}

/// One entry per record id, the larger count and last time kept: a batch
/// with an id twice would be lost on SQLite (the last row wins) and fail
/// whole on PostgreSQL (an upsert cannot touch a row twice).
fn dedupe(batch: Vec<AuditRecord>) -> Vec<AuditRecord> {
    let mut out: Vec<AuditRecord> = Vec::with_capacity(batch.len());
    let mut at: HashMap<Uuid, usize> = HashMap::with_capacity(batch.len());
    for r in batch {
        match at.get(&r.id) {
            Some(&i) => {
                out[i].count = out[i].count.max(r.count);
                out[i].last_at = out[i].last_at.max(r.last_at);
            }
            None => {
                at.insert(r.id, out.len());
                out.push(r);
            }
        }
    }
    out
}

/// A batch being written: how many of its records left memory for it.
struct Batch {
    records: Vec<AuditRecord>,
    in_flight: usize,
}

/// Gives a batch's room back when its write ends, however it ends (a
/// flush future dropped midway included), so `in_flight` never leaks.
struct Landing<'a> {
    log: &'a DenialLog,
    in_flight: usize,
}

impl Drop for Landing<'_> {
    fn drop(&mut self) {
        if self.in_flight > 0 {
            let mut records = self.log.lock();
            records.in_flight = records.in_flight.saturating_sub(self.in_flight);
        }
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
    /// Past `audit.max_open_records` (or after the last flush) it is
    /// dropped (counted) and a flush is asked for at once.
    pub fn record(&self, denial: DenialRecord) {
        let now = (self.clock)();
        let mut records = self.lock();
        if records.sealed {
            drop(records);
            metrics::counter!(names::AUDIT_DENIALS_DROPPED).increment(1);
            return;
        }
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
    /// window when the log was full; until the write ends they stay
    /// counted against the bound (`in_flight`).
    fn take(&self) -> Batch {
        let now = (self.clock)();
        let mut records = self.lock();
        let mut out = std::mem::take(&mut records.closed);
        let mut left = out.len();
        let evict = std::mem::take(&mut records.full);
        let window_ms = self.window_ms;
        records.open.retain(|denial, w| {
            let keep = !evict && now < w.first_at.saturating_add(window_ms);
            if w.dirty {
                out.push(w.record(*denial));
                w.dirty = false;
                left += usize::from(!keep);
            }
            keep
        });
        records.in_flight += left;
        Batch {
            records: dedupe(out),
            in_flight: left,
        }
    }

    /// A failed flush's records come back, so the next flush writes them.
    /// One that is still held (its window went on, or a denial closed it
    /// meanwhile) is merged by id, the larger count winning; the others
    /// take back their room, and any past the bound are dropped (counted).
    fn give_back(&self, failed: Vec<AuditRecord>, mut landing: Landing<'_>) {
        let mut records = self.lock();
        records.in_flight = records.in_flight.saturating_sub(landing.in_flight);
        landing.in_flight = 0;
        let mut dropped = 0u64;
        for r in failed {
            if records.merge(&r) {
                continue;
            }
            if records.held() < self.max_open {
                records.closed.push(r);
            } else {
                dropped += u64::try_from(r.count).unwrap_or(0);
            }
        }
        drop(records);
        if dropped > 0 {
            metrics::counter!(names::AUDIT_DENIALS_DROPPED).increment(dropped);
        }
    }

    /// Writes what was counted since the last flush; on failure keeps it
    /// for the next one. False when the store refused the write.
    pub async fn flush<S: AuditStore + ?Sized>(&self, store: &S) -> bool {
        let Batch { records, in_flight } = self.take();
        let landing = Landing {
            log: self,
            in_flight,
        };
        if records.is_empty() {
            return true;
        }
        match store.flush_denials(&records).await {
            Ok(()) => {
                metrics::counter!(names::AUDIT_RECORDS_FLUSHED).increment(records.len() as u64);
                true
            }
            Err(e) => {
                warn!(error = %e, records = records.len(), "audit flush failed; kept for the next one");
                self.give_back(records, landing);
                false
            }
        }
    }

    /// The server's last flush: from here on a denial is dropped and
    /// counted in `switchboard_audit_denials_dropped_total`, never held
    /// where nothing would write it.
    pub async fn close<S: AuditStore + ?Sized>(&self, store: &S) -> bool {
        self.lock().sealed = true;
        self.flush(store).await
    }

    /// Records counted against `audit.max_open_records`: open windows,
    /// unwritten ones, and those a flush is writing.
    pub fn held(&self) -> usize {
        self.lock().held()
    }
}

/// The flush task: every `audit.flush_interval_ms`, and at once when the
/// log is full, until shutdown. After a failed flush it waits one interval
/// before the next try, however many denials are dropped meanwhile (a
/// failing store is not hammered). The last flush is the server's, after
/// the connections and HTTP handlers drained (`Server::shutdown`).
pub async fn run<S: AuditStore + ?Sized>(
    log: Arc<DenialLog>,
    store: Arc<S>,
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
        while !log.flush(store.as_ref()).await {
            tokio::select! {
                _ = tokio::time::sleep(period) => {}
                _ = shutdown.cancelled() => return,
            }
        }
    }
}

#[cfg(test)]
#[path = "denials_tests.rs"]
mod tests;
