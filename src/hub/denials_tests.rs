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
        let mut ids: Vec<Uuid> = records.iter().map(|r| r.id).collect();
        ids.sort();
        ids.dedup();
        if ids.len() != records.len() {
            // As PostgreSQL: an upsert cannot affect a row a second time.
            return Err(StoreError::Conflict("a record twice in one batch".into()));
        }
        for r in records {
            let row = rows.entry(r.id).or_insert(*r);
            row.count = row.count.max(r.count);
            row.last_at = row.last_at.max(r.last_at);
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

/// A store whose first `fails` writes fail, running `during` while each
/// write is in flight (a denial recorded while the flush waits).
struct Flaky {
    table: Table,
    fails: AtomicI64,
    during: Box<dyn Fn() + Send + Sync>,
    attempts: Mutex<Vec<std::time::Instant>>,
}

impl Flaky {
    fn new(fails: i64, during: impl Fn() + Send + Sync + 'static) -> Flaky {
        Flaky {
            table: Table::default(),
            fails: AtomicI64::new(fails),
            during: Box::new(during),
            attempts: Mutex::new(Vec::new()),
        }
    }
}

#[async_trait]
impl AuditStore for Flaky {
    async fn flush_denials(&self, records: &[AuditRecord]) -> StoreResult<()> {
        self.attempts
            .lock()
            .unwrap()
            .push(std::time::Instant::now());
        (self.during)();
        if self.fails.fetch_sub(1, Ordering::SeqCst) > 0 {
            return Err(StoreError::Conflict("the database is away".into()));
        }
        self.table.flush_denials(records).await
    }

    async fn denials(
        &self,
        f: AuditFilter,
        a: Option<Uuid>,
        l: u32,
    ) -> StoreResult<Vec<AuditRecord>> {
        self.table.denials(f, a, l).await
    }

    async fn prune_denials(&self, b: Millis) -> StoreResult<u64> {
        self.table.prune_denials(b).await
    }
}

/// A log shared with a store's `during` hook, on the fixture's clock.
fn shared(window_ms: u64, max_open: usize) -> (Arc<AtomicI64>, Arc<DenialLog>) {
    let f = fixture(window_ms, max_open);
    (f.now, Arc::new(f.log))
}

#[tokio::test]
async fn a_window_closed_during_a_failed_flush_is_written_once_with_its_largest_count() {
    let (now, log) = shared(100, 100);
    let d = denial(Uuid::now_v7(), Uuid::now_v7());
    for _ in 0..5 {
        log.record(d);
    }
    // While the flush of X (count 5) waits: X counts a sixth, its window
    // ends, and the next denial closes X and opens Y. Then the write fails.
    let (l, n) = (log.clone(), now.clone());
    let store = Flaky::new(1, move || {
        if n.load(Ordering::SeqCst) == T0 {
            n.store(T0 + 50, Ordering::SeqCst);
            l.record(d);
            n.store(T0 + 150, Ordering::SeqCst);
            l.record(d);
        }
    });
    assert!(!log.flush(&store).await);
    assert!(log.flush(&store).await, "the batch holds each record once");
    let rows = store.table.all();
    let counts: Vec<(i64, Millis)> = rows.iter().map(|r| (r.count, r.last_at - T0)).collect();
    assert_eq!(counts, vec![(6, 50), (1, 150)], "no denial lost: {rows:?}");
    assert_eq!(log.held(), 1, "only Y is held");
}

#[tokio::test]
async fn records_in_flight_count_against_the_bound_while_the_store_fails() {
    let (now, log) = shared(100, 3);
    for _ in 0..3 {
        log.record(denial(Uuid::now_v7(), Uuid::now_v7()));
    }
    // Every window is over: the flush takes all three out of memory.
    now.store(T0 + 100, Ordering::SeqCst);
    let l = log.clone();
    let store = Flaky::new(1, move || {
        for _ in 0..10 {
            l.record(denial(Uuid::now_v7(), Uuid::now_v7()));
        }
        assert_eq!(l.held(), 3, "the three in flight keep their room");
    });
    assert!(!log.flush(&store).await);
    assert_eq!(log.held(), 3, "given back, still within the bound");
    assert!(log.flush(&store).await);
    assert_eq!(store.table.all().len(), 3);
    assert_eq!(log.held(), 0);
}

#[tokio::test]
async fn a_given_back_record_past_the_bound_is_dropped() {
    let (now, log) = shared(100, 1);
    let d = denial(Uuid::now_v7(), Uuid::now_v7());
    log.record(d);
    // While the flush of X waits, X's window ends and the next denial opens
    // Y in the only room (X looked written); X then has none to come back to.
    let (l, n) = (log.clone(), now.clone());
    let store = Flaky::new(1, move || {
        n.store(T0 + 100, Ordering::SeqCst);
        l.record(d);
    });
    assert!(!log.flush(&store).await);
    assert_eq!(log.held(), 1, "the bound holds");
    assert!(log.flush(&store).await);
    let rows = store.table.all();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].first_at, T0 + 100, "Y was written, X dropped");
}

#[tokio::test]
async fn after_a_failed_flush_the_task_waits_an_interval_however_many_denials_drop() {
    let (_, log) = shared(60_000, 1);
    log.record(denial(Uuid::now_v7(), Uuid::now_v7()));
    let store = Arc::new(Flaky::new(i64::MAX, || {}));
    let shutdown = CancellationToken::new();
    let period = Duration::from_millis(200);
    let task = tokio::spawn(run(
        log.clone(),
        store.clone(),
        period.as_millis() as u64,
        shutdown.clone(),
    ));
    // Drops keep waking the task until it has tried three times.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while store.attempts.lock().unwrap().len() < 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the task never retried"
        );
        log.record(denial(Uuid::now_v7(), Uuid::now_v7()));
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    shutdown.cancel();
    task.await.unwrap();
    let attempts = store.attempts.lock().unwrap().clone();
    for pair in attempts.windows(2) {
        assert!(
            pair[1] - pair[0] >= period,
            "retried too soon: {attempts:?}"
        );
    }
}

#[tokio::test]
async fn after_the_last_flush_a_denial_is_dropped_not_held() {
    let f = fixture(60_000, 100);
    let d = denial(Uuid::now_v7(), Uuid::now_v7());
    f.log.record(d);
    assert!(f.log.close(&f.table).await);
    assert_eq!(f.table.all()[0].count, 1);
    f.log.record(d);
    f.log.record(denial(Uuid::now_v7(), Uuid::now_v7()));
    assert_eq!(f.log.held(), 1, "only the written window, nothing new");
    f.log.flush(&f.table).await;
    assert_eq!(f.table.all()[0].count, 1);
    assert_eq!(f.table.all().len(), 1);
}

#[tokio::test]
async fn a_flush_dropped_while_writing_gives_its_room_back() {
    let (now, log) = shared(100, 1);
    log.record(denial(Uuid::now_v7(), Uuid::now_v7()));
    now.store(T0 + 100, Ordering::SeqCst);
    // A store that never answers: the flush is dropped midway.
    struct Stuck;
    #[async_trait]
    impl AuditStore for Stuck {
        async fn flush_denials(&self, _: &[AuditRecord]) -> StoreResult<()> {
            std::future::pending().await
        }
        async fn denials(
            &self,
            _: AuditFilter,
            _: Option<Uuid>,
            _: u32,
        ) -> StoreResult<Vec<AuditRecord>> {
            Ok(Vec::new())
        }
        async fn prune_denials(&self, _: Millis) -> StoreResult<u64> {
            Ok(0)
        }
    }
    let stuck = tokio::time::timeout(Duration::from_millis(10), log.flush(&Stuck)).await;
    assert!(stuck.is_err());
    assert_eq!(log.held(), 0, "the dropped write holds no room");
    log.record(denial(Uuid::now_v7(), Uuid::now_v7()));
    assert_eq!(log.held(), 1);
}
