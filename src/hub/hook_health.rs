//! Each app's recent answers, per method, held in memory only: the last
//! `hooks.health_window_secs` of calls, their outcomes and latency
//! percentiles, for the operator's `GET /api/v1/apps/{id}/health`, `switchboard
//! app check` and the console. Nothing here is stored: a restart forgets
//! it, as it forgets the metrics, and no write ever waits on it.
//!
//! A window is a ring of [`SLOTS`] time slots, each with its outcome counts
//! and a sparse histogram of latencies in logarithmic buckets ([`GROWTH`]
//! apart, so a percentile is at most 1.6 % above the true value, never
//! above the slowest answer seen). Memory is bounded by the slots and the
//! buckets, whatever the call rate; keys by the apps that were called and
//! the catalogue's methods.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use dashmap::DashMap;
use uuid::Uuid;

/// Slots per window: the window slides in steps of a sixtieth of itself.
pub const SLOTS: u32 = 60;

/// The ratio between a latency bucket's bounds.
pub const GROWTH: f64 = 1.0 + 1.0 / 64.0;

/// Every outcome a call to an app can end in (`HookOutcome::label`), plus
/// `inactive`: the gate did not call because the installation is not active.
pub const OUTCOMES: [&str; 7] = [
    "ok",
    "remote_error",
    "timeout",
    "disconnected",
    "unavailable",
    "bad_result",
    "inactive",
];

/// Outcomes with no round trip carry no latency.
fn has_latency(outcome: &str) -> bool {
    !matches!(outcome, "unavailable" | "inactive")
}

/// One method's figures over the window.
#[derive(Clone, Debug, PartialEq)]
pub struct MethodHealth {
    pub method: &'static str,
    pub count: u64,
    /// Calls by outcome; outcomes that did not occur are absent.
    pub outcomes: BTreeMap<&'static str, u64>,
    /// `None` when no call in the window made a round trip.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

#[derive(Default)]
struct Slot {
    start: Option<Instant>,
    outcomes: [u64; OUTCOMES.len()],
    /// Latency bucket index to calls.
    buckets: BTreeMap<u16, u64>,
    max_micros: u64,
}

#[derive(Default)]
struct Window {
    slots: VecDeque<Slot>,
}

/// The hub's windows, by app and method.
pub struct HookHealth {
    window: Duration,
    slot: Duration,
    windows: DashMap<(Uuid, &'static str), Window>,
}

fn bucket_of(micros: u64) -> u16 {
    if micros <= 1 {
        return 0;
    }
    let index = ((micros as f64).ln() / GROWTH.ln()).ceil();
    index.min(u16::MAX as f64) as u16
}

fn upper_bound_micros(bucket: u16) -> f64 {
    GROWTH.powi(bucket as i32)
}

impl HookHealth {
    pub fn new(window: Duration) -> HookHealth {
        HookHealth {
            window,
            slot: (window / SLOTS).max(Duration::from_millis(1)),
            windows: DashMap::new(),
        }
    }

    pub fn window(&self) -> Duration {
        self.window
    }

    /// Records one call that ended now.
    pub fn record(&self, app: Uuid, method: &'static str, outcome: &str, latency: Duration) {
        self.record_at(app, method, outcome, latency, Instant::now());
    }

    /// Records one call that ended at `now` (the tests' clock).
    pub fn record_at(
        &self,
        app: Uuid,
        method: &'static str,
        outcome: &str,
        latency: Duration,
        now: Instant,
    ) {
        let Some(index) = OUTCOMES.iter().position(|o| *o == outcome) else {
            return;
        };
        let mut window = self.windows.entry((app, method)).or_default();
        self.prune(&mut window, now);
        let slot = self.current_slot(&mut window, now);
        slot.outcomes[index] += 1;
        if has_latency(outcome) {
            let micros = latency.as_micros().min(u64::MAX as u128) as u64;
            *slot.buckets.entry(bucket_of(micros)).or_default() += 1;
            slot.max_micros = slot.max_micros.max(micros);
        }
    }

    fn current_slot<'w>(&self, window: &'w mut Window, now: Instant) -> &'w mut Slot {
        let fresh = window
            .slots
            .back()
            .and_then(|s| s.start)
            .is_none_or(|start| now.saturating_duration_since(start) >= self.slot);
        if fresh {
            window.slots.push_back(Slot {
                start: Some(now),
                ..Slot::default()
            });
        }
        window.slots.back_mut().expect("a slot was just ensured")
    }

    /// Drops the slots that ended before the window began.
    fn prune(&self, window: &mut Window, now: Instant) {
        while let Some(start) = window.slots.front().and_then(|s| s.start) {
            if now.saturating_duration_since(start) < self.window + self.slot {
                break;
            }
            window.slots.pop_front();
        }
    }

    /// The app's figures now, one entry per method called in the window.
    pub fn snapshot(&self, app: Uuid) -> Vec<MethodHealth> {
        self.snapshot_at(app, Instant::now())
    }

    pub fn snapshot_at(&self, app: Uuid, now: Instant) -> Vec<MethodHealth> {
        let mut found = Vec::new();
        for mut entry in self.windows.iter_mut() {
            let (id, method) = *entry.key();
            if id != app {
                continue;
            }
            self.prune(&mut entry, now);
            if let Some(health) = figures(method, &entry) {
                found.push(health);
            }
        }
        found.sort_by_key(|h| h.method);
        found
    }

    /// Forgets an app (uninstalled): its windows would only age out.
    pub fn forget(&self, app: Uuid) {
        self.windows.retain(|(id, _), _| *id != app);
    }
}

fn figures(method: &'static str, window: &Window) -> Option<MethodHealth> {
    let mut outcomes = [0u64; OUTCOMES.len()];
    let mut buckets: BTreeMap<u16, u64> = BTreeMap::new();
    let mut max_micros = 0;
    for slot in &window.slots {
        for (total, n) in outcomes.iter_mut().zip(slot.outcomes) {
            *total += n;
        }
        for (bucket, n) in &slot.buckets {
            *buckets.entry(*bucket).or_default() += n;
        }
        max_micros = max_micros.max(slot.max_micros);
    }
    let count: u64 = outcomes.iter().sum();
    if count == 0 {
        return None;
    }
    let percentile = |p: f64| percentile(&buckets, p, max_micros).map(|us| us / 1000.0);
    Some(MethodHealth {
        method,
        count,
        outcomes: OUTCOMES
            .iter()
            .zip(outcomes)
            .filter(|(_, n)| *n > 0)
            .map(|(o, n)| (*o, n))
            .collect(),
        p50_ms: percentile(0.50),
        p99_ms: percentile(0.99),
    })
}

/// The nearest-rank percentile: the upper bound of the bucket holding the
/// `ceil(p * n)`-th latency, never above the slowest one seen.
fn percentile(buckets: &BTreeMap<u16, u64>, p: f64, max_micros: u64) -> Option<f64> {
    let total: u64 = buckets.values().sum();
    if total == 0 {
        return None;
    }
    let rank = ((p * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0;
    for (bucket, n) in buckets {
        seen += n;
        if seen >= rank {
            return Some(upper_bound_micros(*bucket).min(max_micros as f64));
        }
    }
    Some(max_micros as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const METHOD: &str = "app/task/create";

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn close_to(actual: Option<f64>, expected: f64) -> bool {
        actual.is_some_and(|a| a >= expected * 0.999 && a <= expected * GROWTH)
    }

    /// 90 fast answers (12 ms) and 10 slow ones (480 ms), then 3 timeouts
    /// at a 500 ms deadline and a call to an app with no socket.
    #[test]
    fn a_scripted_sequence_of_fast_and_slow_answers_gives_its_figures() {
        let health = HookHealth::new(Duration::from_secs(300));
        let app = Uuid::new_v4();
        let t0 = Instant::now();
        for i in 0..100u64 {
            let latency = if i % 10 == 9 { ms(480) } else { ms(12) };
            health.record_at(app, METHOD, "ok", latency, t0 + ms(i * 100));
        }
        let at = t0 + ms(10_000);
        let [h] = health.snapshot_at(app, at).try_into().unwrap();
        assert_eq!(h.count, 100);
        assert_eq!(h.outcomes, BTreeMap::from([("ok", 100)]));
        assert!(close_to(h.p50_ms, 12.0), "{h:?}");
        assert!(close_to(h.p99_ms, 480.0), "{h:?}");

        for _ in 0..3 {
            health.record_at(app, METHOD, "timeout", ms(500), at);
        }
        health.record_at(app, METHOD, "unavailable", Duration::ZERO, at);
        let [h] = health.snapshot_at(app, at).try_into().unwrap();
        assert_eq!(h.count, 104);
        assert_eq!(
            h.outcomes,
            BTreeMap::from([("ok", 100), ("timeout", 3), ("unavailable", 1)])
        );
        // 103 round trips: rank 52 is fast, rank 102 is one of the timeouts.
        assert!(close_to(h.p50_ms, 12.0), "{h:?}");
        assert!(close_to(h.p99_ms, 500.0), "{h:?}");
    }

    #[test]
    fn a_percentile_is_never_above_the_slowest_answer() {
        let health = HookHealth::new(Duration::from_secs(60));
        let app = Uuid::new_v4();
        let now = Instant::now();
        health.record_at(app, METHOD, "ok", Duration::from_micros(1_234_567), now);
        let [h] = health.snapshot_at(app, now).try_into().unwrap();
        assert_eq!(h.p50_ms, Some(1234.567));
        assert_eq!(h.p99_ms, Some(1234.567));
    }

    #[test]
    fn answers_older_than_the_window_are_forgotten() {
        let health = HookHealth::new(Duration::from_secs(60));
        let app = Uuid::new_v4();
        let t0 = Instant::now();
        health.record_at(app, METHOD, "ok", ms(900), t0);
        health.record_at(app, METHOD, "ok", ms(5), t0 + ms(30_000));
        let [h] = health.snapshot_at(app, t0 + ms(30_000)).try_into().unwrap();
        assert_eq!(h.count, 2);
        // Past the window plus one slot (1 s), only the second is left.
        let [h] = health.snapshot_at(app, t0 + ms(61_001)).try_into().unwrap();
        assert_eq!(h.count, 1);
        assert!(close_to(h.p99_ms, 5.0), "{h:?}");
        assert!(health.snapshot_at(app, t0 + ms(91_001)).is_empty());
    }

    #[test]
    fn apps_and_methods_are_kept_apart_and_unknown_outcomes_ignored() {
        let health = HookHealth::new(Duration::from_secs(60));
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let now = Instant::now();
        health.record_at(a, METHOD, "ok", ms(1), now);
        health.record_at(a, "app/message/authorize", "bad_result", ms(2), now);
        health.record_at(b, METHOD, "inactive", Duration::ZERO, now);
        health.record_at(b, METHOD, "no such outcome", ms(3), now);
        let a_figures = health.snapshot_at(a, now);
        let methods: Vec<_> = a_figures.iter().map(|h| h.method).collect();
        assert_eq!(methods, ["app/message/authorize", METHOD]);
        let [h] = health.snapshot_at(b, now).try_into().unwrap();
        assert_eq!(h.count, 1);
        assert_eq!((h.p50_ms, h.p99_ms), (None, None));
        health.forget(a);
        assert!(health.snapshot_at(a, now).is_empty());
    }
}
