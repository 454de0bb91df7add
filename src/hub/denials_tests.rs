//! The window logic on an injected clock, flushed into an in-memory store.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use async_trait::async_trait;

use super::*;
use crate::domain::authz::{Action, Reason, ResourceKind};
use crate::domain::PrincipalKind;
use crate::store::{AuditFilter, StoreError, StoreResult};

/// The audit table as a map by id, upserting as the real one does.
#[derive(Default)]
struct Table {
    rows: Mutex<HashMap<Uuid, AuditRecord>>,
    failing: AtomicBool,
    flushes: AtomicI64,
}

#[async_trait]
impl AuditStore for Table {
    async fn flush_denials(&self, records: &[AuditRecord]) -> StoreResult<()> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(StoreError::Conflict("the database is away".into()));
        }
        self.flushes.fetch_add(1, Ordering::SeqCst);
        let mut rows = self.rows.lock().unwrap();
        for r in records {
            rows.insert(r.id, *r);
        }
        Ok(())
    }

    async fn denials(
        &self,
        _: AuditFilter,
        _: Option<Uuid>,
        _: u32,
    ) -> StoreResult<Vec<AuditRecord>> {
        let mut all: Vec<AuditRecord> = self.rows.lock().unwrap().values().copied().collect();
        all.sort_by_key(|r| r.id);
        Ok(all)
    }

    async fn prune_denials(&self, _: Millis) -> StoreResult<u64> {
        Ok(0)
    }
}

impl Table {
    fn all(&self) -> Vec<AuditRecord> {
        let mut all: Vec<AuditRecord> = self.rows.lock().unwrap().values().copied().collect();
        all.sort_by_key(|r| r.id);
        all
    }
}

struct Fixture {
    now: Arc<AtomicI64>,
    log: DenialLog,
    table: Table,
}

const T0: Millis = 1_700_000_000_000;

fn fixture(window_ms: u64, max_open: usize) -> Fixture {
    let now = Arc::new(AtomicI64::new(T0));
    let read = now.clone();
    let config = AuditConfig {
        deny_aggregate_window_ms: window_ms,
        max_open_records: max_open,
        ..AuditConfig::default()
    };
    Fixture {
        log: DenialLog::with_clock(&config, Arc::new(move || read.load(Ordering::SeqCst))),
        now,
        table: Table::default(),
    }
}

impl Fixture {
    fn at(&self, t: Millis) {
        self.now.store(T0 + t, Ordering::SeqCst);
    }
}

fn denial(actor: Uuid, resource: Uuid) -> DenialRecord {
    DenialRecord {
        actor_id: actor,
        actor_kind: PrincipalKind::Agent,
        action: Action::MessageCreate,
        reason: Reason::SubjectKindNotAllowed,
        resource_kind: ResourceKind::Conversation,
        resource_id: resource,
    }
}

#[tokio::test]
async fn denials_inside_one_window_share_one_record() {
    let f = fixture(60_000, 100);
    let d = denial(Uuid::now_v7(), Uuid::now_v7());
    for i in 0..1000 {
        f.at(i * 59);
        f.log.record(d);
    }
    f.log.flush(&f.table).await;
    let rows = f.table.all();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].count, 1000);
    assert_eq!(rows[0].first_at, T0);
    assert_eq!(rows[0].last_at, T0 + 999 * 59);
    assert_eq!(rows[0].denial, d);
}

#[tokio::test]
async fn the_window_opens_at_the_first_denial_and_a_later_one_opens_a_new_record() {
    let f = fixture(1_000, 100);
    let d = denial(Uuid::now_v7(), Uuid::now_v7());
    f.at(500);
    f.log.record(d);
    f.at(1_499);
    f.log.record(d); // still the first window: it opened at 500, not at 0
    f.at(1_500);
    f.log.record(d); // the window is over: a new record
    f.log.flush(&f.table).await;
    let rows = f.table.all();
    let counts: Vec<(i64, Millis, Millis)> = rows
        .iter()
        .map(|r| (r.count, r.first_at - T0, r.last_at - T0))
        .collect();
    assert_eq!(counts, vec![(2, 500, 1_499), (1, 1_500, 1_500)]);
    assert_ne!(rows[0].id, rows[1].id);
}

#[tokio::test]
async fn a_window_replaced_before_a_flush_keeps_its_counts() {
    let f = fixture(100, 100);
    let d = denial(Uuid::now_v7(), Uuid::now_v7());
    f.log.record(d);
    f.log.record(d);
    f.at(150);
    f.log.record(d);
    f.log.flush(&f.table).await;
    let counts: Vec<i64> = f.table.all().iter().map(|r| r.count).collect();
    assert_eq!(counts, vec![2, 1]);
}

#[tokio::test]
async fn each_key_part_separates_records() {
    let f = fixture(60_000, 100);
    let base = denial(Uuid::now_v7(), Uuid::now_v7());
    let variants = [
        base,
        DenialRecord {
            actor_id: Uuid::now_v7(),
            ..base
        },
        DenialRecord {
            action: Action::TypingSend,
            ..base
        },
        DenialRecord {
            reason: Reason::NoGrant,
            ..base
        },
        DenialRecord {
            resource_kind: ResourceKind::Task,
            ..base
        },
        DenialRecord {
            resource_id: Uuid::now_v7(),
            ..base
        },
    ];
    for v in variants {
        f.log.record(v);
        f.log.record(v);
    }
    f.log.flush(&f.table).await;
    let rows = f.table.all();
    assert_eq!(rows.len(), variants.len());
    assert!(rows.iter().all(|r| r.count == 2));
}

#[tokio::test]
async fn flushes_write_absolute_totals_and_over_windows_leave_memory() {
    let f = fixture(1_000, 100);
    let d = denial(Uuid::now_v7(), Uuid::now_v7());
    f.log.record(d);
    f.log.flush(&f.table).await;
    assert_eq!(f.table.all()[0].count, 1);
    f.at(10);
    f.log.record(d);
    f.log.record(d);
    f.log.flush(&f.table).await;
    let rows = f.table.all();
    assert_eq!(
        (rows.len(), rows[0].count, rows[0].last_at),
        (1, 3, T0 + 10)
    );
    // Nothing new: no write at all.
    let flushes = f.table.flushes.load(Ordering::SeqCst);
    f.log.flush(&f.table).await;
    assert_eq!(f.table.flushes.load(Ordering::SeqCst), flushes);
    // Once its window is over, a written record is forgotten.
    assert_eq!(f.log.held(), 1);
    f.at(1_000);
    f.log.flush(&f.table).await;
    assert_eq!(f.log.held(), 0);
}

#[tokio::test]
async fn a_failed_flush_keeps_its_records_for_the_next_one() {
    let f = fixture(100, 100);
    let (a, b) = (
        denial(Uuid::now_v7(), Uuid::now_v7()),
        denial(Uuid::now_v7(), Uuid::now_v7()),
    );
    f.log.record(a);
    f.log.record(b);
    f.table.failing.store(true, Ordering::SeqCst);
    f.log.flush(&f.table).await;
    assert!(f.table.all().is_empty());
    // `a` goes on in its window; `b`'s window ends and a new one opens.
    f.at(50);
    f.log.record(a);
    f.at(150);
    f.log.record(b);
    f.table.failing.store(false, Ordering::SeqCst);
    f.log.flush(&f.table).await;
    let mut counts: Vec<(Uuid, i64)> = f
        .table
        .all()
        .iter()
        .map(|r| (r.denial.actor_id, r.count))
        .collect();
    counts.sort();
    let mut want = vec![(a.actor_id, 2), (b.actor_id, 1), (b.actor_id, 1)];
    want.sort();
    assert_eq!(counts, want);
}

#[tokio::test]
async fn past_the_bound_denials_are_dropped_and_a_flush_is_asked_for() {
    let f = fixture(60_000, 2);
    let (a, b, c) = (
        denial(Uuid::now_v7(), Uuid::now_v7()),
        denial(Uuid::now_v7(), Uuid::now_v7()),
        denial(Uuid::now_v7(), Uuid::now_v7()),
    );
    f.log.record(a);
    f.log.record(b);
    f.log.record(c); // dropped: two records are open
    f.log.record(a); // an open record still counts
    assert_eq!(f.log.held(), 2);
    // The drop woke the flush task: a permit is stored for it.
    tokio::time::timeout(Duration::from_secs(1), f.log.full.notified())
        .await
        .expect("a flush was asked for");
    f.log.flush(&f.table).await;
    let rows = f.table.all();
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r.denial != c));
    assert_eq!(rows.iter().map(|r| r.count).sum::<i64>(), 3);
    // That flush made room: the next denial of `a` opens a new record, and
    // `c` is counted again.
    assert_eq!(f.log.held(), 0);
    f.log.record(c);
    f.log.record(a);
    f.log.flush(&f.table).await;
    let rows = f.table.all();
    assert_eq!(rows.len(), 4);
    assert_eq!(rows.iter().filter(|r| r.denial == c).count(), 1);
}

#[tokio::test]
async fn an_expired_unwritten_window_counts_against_the_bound() {
    let f = fixture(100, 2);
    let (a, b) = (
        denial(Uuid::now_v7(), Uuid::now_v7()),
        denial(Uuid::now_v7(), Uuid::now_v7()),
    );
    f.log.record(a);
    f.log.record(b);
    // `a`'s window is over but unwritten: a new one would make three.
    f.at(100);
    f.log.record(a);
    assert_eq!(f.log.held(), 2);
    f.log.flush(&f.table).await;
    let rows = f.table.all();
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r.count == 1 && r.first_at == T0));
    // Written and over, `a`'s old window takes no room: the next opens.
    f.log.record(a);
    f.log.flush(&f.table).await;
    assert_eq!(f.table.all().len(), 3);
}
