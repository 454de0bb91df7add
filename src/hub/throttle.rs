//! The per-address budget of refused keys (WebSocket connects and REST
//! bearer keys alike): each refusal spends a token, tokens come back at a
//! steady rate, and while an address has none its key checks are refused
//! before any lookup. A check spends its token when it starts and gets it
//! back if the key is accepted, so accepted keys cost nothing (many agents
//! behind one address connect freely) and concurrent checks cannot all pass
//! on the last token.

use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use dashmap::DashMap;
use tokio::sync::Notify;

/// Entries kept before full (forgiven) buckets are dropped.
const PRUNE_ABOVE: usize = 10_000;

/// How long a check waits for failures held by checks under way.
const WAIT_FOR_HELD: Duration = Duration::from_secs(5);

/// Key ids remembered as accepted, over all addresses; past it the oldest
/// is forgotten.
pub const KNOWN_KEYS_MAX: usize = 10_000;

/// The source a connection is counted against, for the connection slots
/// and the refused-key budget alike: an IPv4 address, or the /64 of an IPv6
/// one (a single host is routinely given a whole /64, so counting by /128
/// would let it escape both). IPv4-mapped IPv6 addresses count as their
/// IPv4 address.
pub fn source_of(address: IpAddr) -> IpAddr {
    match address.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(Ipv6Addr::from(prefix))
        }
    }
}

pub struct RefusedKeys {
    buckets: DashMap<IpAddr, Bucket>,
    burst: f64,
    refill_per_sec: f64,
    /// The map size at which the next prune runs: it doubles after each, so
    /// a map of many live buckets is not scanned on every failure.
    prune_at: AtomicUsize,
    /// Key ids accepted recently from a source, and when.
    known: DashMap<(IpAddr, String), Instant>,
    known_ttl: Duration,
    /// Woken when a held failure is released.
    released: Notify,
}

#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    /// Failures held by checks under way (already taken from `tokens`).
    held: u32,
    at: Instant,
}

impl RefusedKeys {
    /// `burst` failures at once, then `per_minute` more each minute; key ids
    /// accepted from a source are still looked up there for `known_ttl`
    /// while its budget is spent.
    pub fn new(burst: u32, per_minute: u32, known_ttl: Duration) -> RefusedKeys {
        RefusedKeys {
            buckets: DashMap::new(),
            burst: burst as f64,
            refill_per_sec: per_minute as f64 / 60.0,
            prune_at: AtomicUsize::new(PRUNE_ABOVE),
            known: DashMap::new(),
            known_ttl,
            released: Notify::new(),
        }
    }

    fn refilled(&self, b: Bucket, now: Instant) -> Bucket {
        let earned = now.saturating_duration_since(b.at).as_secs_f64() * self.refill_per_sec;
        Bucket {
            tokens: (b.tokens + earned).min(self.burst),
            held: b.held,
            // A racing check may have read an earlier `now`: time only moves
            // forward, so no interval is credited twice.
            at: now.max(b.at),
        }
    }

    /// Starts a check of the key `key_id` (if the presented key has one)
    /// from `address`. The check holds one of the address's failures while
    /// it runs, so concurrent checks cannot all pass on the last one; when
    /// every failure left is held by checks under way, it waits for one of
    /// them (good keys give theirs back at once, so many agents behind one
    /// address still connect together) for at most `WAIT_FOR_HELD`.
    /// `Err(wait)` while the address has no failure left, unless `key_id`
    /// was accepted from there recently.
    pub async fn begin(
        &self,
        address: IpAddr,
        key_id: Option<&str>,
    ) -> Result<Attempt<'_>, Duration> {
        let deadline = tokio::time::Instant::now() + WAIT_FOR_HELD;
        loop {
            let released = self.released.notified();
            tokio::pin!(released);
            // Registered before looking, so a release in between is not missed.
            released.as_mut().enable();
            match self.begin_at(address, key_id, Instant::now()) {
                Ok(attempt) => return Ok(attempt),
                Err(NotNow::Spent(wait)) => return Err(wait),
                Err(NotNow::Busy(next_token)) => {
                    // Look again when a check releases, when the next token
                    // is earned, and once more at the deadline.
                    let now = tokio::time::Instant::now();
                    if now >= deadline {
                        return Err(Duration::from_secs(1));
                    }
                    let _ = tokio::time::timeout_at(deadline.min(now + next_token), released).await;
                }
            }
        }
    }

    fn begin_at(
        &self,
        address: IpAddr,
        key_id: Option<&str>,
        now: Instant,
    ) -> Result<Attempt<'_>, NotNow> {
        let source = source_of(address);
        let attempt = |held| Attempt {
            keys: self,
            source,
            key_id: key_id.map(str::to_string),
            held,
            outcome: Outcome::Pending,
        };
        self.prune_if_grown(now);
        let mut entry = self.buckets.entry(source).or_insert(Bucket {
            tokens: self.burst,
            held: 0,
            at: now,
        });
        let b = self.refilled(*entry, now);
        if b.tokens >= 1.0 {
            *entry = Bucket {
                tokens: b.tokens - 1.0,
                held: b.held + 1,
                at: now,
            };
            return Ok(attempt(true));
        }
        *entry = b;
        drop(entry);
        if key_id.is_some_and(|k| self.is_known(source, k, now)) {
            return Ok(attempt(false));
        }
        let wait = (1.0 - b.tokens) / self.refill_per_sec;
        let wait = Duration::from_secs_f64(wait.min(86_400.0)).max(Duration::from_millis(1));
        if b.held > 0 {
            return Err(NotNow::Busy(wait));
        }
        Err(NotNow::Spent(wait))
    }

    fn is_known(&self, source: IpAddr, key_id: &str, now: Instant) -> bool {
        self.known
            .get(&(source, key_id.to_string()))
            .is_some_and(|at| now.saturating_duration_since(*at) < self.known_ttl)
    }

    /// Remembers an accepted key id, forgetting expired ones (then the
    /// oldest) when the map is full.
    fn remember(&self, source: IpAddr, key_id: String, now: Instant) {
        if self.known_ttl.is_zero() {
            return;
        }
        let entry = (source, key_id);
        if !self.known.contains_key(&entry) && self.known.len() >= KNOWN_KEYS_MAX {
            self.known
                .retain(|_, at| now.saturating_duration_since(*at) < self.known_ttl);
            if self.known.len() >= KNOWN_KEYS_MAX {
                let oldest = self
                    .known
                    .iter()
                    .min_by_key(|e| *e.value())
                    .map(|e| e.key().clone());
                if let Some(oldest) = oldest {
                    self.known.remove(&oldest);
                }
            }
        }
        self.known.insert(entry, now);
    }

    /// Ends a held check: the failure comes back unless the key was
    /// refused, and checks waiting for one look again.
    fn release(&self, source: IpAddr, refund: bool) {
        if let Some(mut b) = self.buckets.get_mut(&source) {
            b.held = b.held.saturating_sub(1);
            if refund {
                b.tokens = (b.tokens + 1.0).min(self.burst);
            }
        }
        self.released.notify_waiters();
    }
}

/// Why a check cannot start now.
#[derive(Debug)]
enum NotNow {
    /// No failure left: wait this long.
    Spent(Duration),
    /// The failures left are all held by checks under way; the next one
    /// is earned after this long.
    Busy(Duration),
}

#[derive(Clone, Copy)]
enum Outcome {
    /// The check never finished (its future was dropped mid-lookup): the
    /// failure stays spent, so abandoning lookups buys no extra ones, but
    /// nothing was learned about the key, so a known id stays known.
    Pending,
    Refused,
    Accepted(Instant),
    Unchecked,
}

/// One key check under way, holding one failure of its source until it is
/// dropped. Unless it is marked `accepted` or `unchecked`, the failure
/// stays spent (a check abandoned halfway spends it, but forgets no key id).
pub struct Attempt<'a> {
    keys: &'a RefusedKeys,
    source: IpAddr,
    key_id: Option<String>,
    /// False for a known key id let through a spent budget.
    held: bool,
    outcome: Outcome,
}

impl Attempt<'_> {
    /// The key was refused: its failure stays spent, and its key id is no
    /// longer known from this source (a revoked key, or someone who learned
    /// the id, gets no lookups past the budget).
    pub fn refused(mut self) {
        self.outcome = Outcome::Refused;
    }

    /// The key was accepted: accepted keys cost nothing, and its id is
    /// known from this source for `gateway.known_key_ttl_seconds`.
    pub fn accepted(self) {
        self.accepted_at(Instant::now());
    }

    fn accepted_at(mut self, now: Instant) {
        self.outcome = Outcome::Accepted(now);
    }

    /// No key was checked (malformed params, a store failure): nothing
    /// was guessed, so nothing is spent.
    pub fn unchecked(mut self) {
        self.outcome = Outcome::Unchecked;
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        if self.held {
            let refund = !matches!(self.outcome, Outcome::Refused | Outcome::Pending);
            self.keys.release(self.source, refund);
        }
        let Some(key_id) = self.key_id.take() else {
            return;
        };
        match self.outcome {
            Outcome::Accepted(now) => self.keys.remember(self.source, key_id, now),
            Outcome::Refused => {
                self.keys.known.remove(&(self.source, key_id));
            }
            Outcome::Unchecked | Outcome::Pending => {}
        }
    }
}

impl RefusedKeys {
    /// Drops full (forgiven) buckets once the map has doubled since the last
    /// prune, so the scan's cost is spread over as many failures as it frees.
    fn prune_if_grown(&self, now: Instant) {
        let at = self.prune_at.load(Ordering::Relaxed);
        if self.buckets.len() <= at {
            return;
        }
        // One failure prunes; the others go on while it does.
        if self
            .prune_at
            .compare_exchange(at, usize::MAX, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        self.buckets
            .retain(|_, b| b.held > 0 || self.refilled(*b, now).tokens < self.burst);
        let next = (self.buckets.len() * 2).max(PRUNE_ABOVE);
        self.prune_at.store(next, Ordering::Release);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.buckets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refused key from `a` at `now`.
    fn refuse(t: &RefusedKeys, a: IpAddr, now: Instant) {
        t.begin_at(a, None, now).expect("budget left").refused();
    }

    #[test]
    fn failures_run_out_per_address_and_come_back_with_time() {
        let t = RefusedKeys::new(3, 60, Duration::from_secs(60));
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let b: IpAddr = "127.0.0.3".parse().unwrap();
        let now = Instant::now();
        for _ in 0..3 {
            refuse(&t, a, now);
        }
        let Err(NotNow::Spent(wait)) = t.begin_at(a, None, now) else {
            panic!("not spent");
        };
        assert!(wait <= Duration::from_secs(1) && wait > Duration::ZERO);
        assert!(
            t.begin_at(b, None, now).is_ok(),
            "other addresses are not affected"
        );
        refuse(&t, a, now + Duration::from_secs(1));
        assert!(t.begin_at(a, None, now + Duration::from_secs(1)).is_err());
    }

    #[test]
    fn checks_under_way_hold_their_failure_so_concurrent_ones_cannot_all_pass() {
        let t = RefusedKeys::new(3, 60, Duration::from_secs(60));
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let now = Instant::now();
        let under_way: Vec<_> = (0..3).map(|_| t.begin_at(a, None, now).unwrap()).collect();
        assert!(
            t.begin_at(a, None, now).is_err(),
            "a fourth concurrent check must wait"
        );
        // Accepted and unchecked attempts give their failure back.
        let mut under_way = under_way.into_iter();
        under_way.next().unwrap().accepted();
        under_way.next().unwrap().unchecked();
        assert!(t.begin_at(a, None, now).is_ok());
        assert!(t.begin_at(a, None, now).is_ok());
        assert!(t.begin_at(a, None, now).is_err());
    }

    #[test]
    fn ipv6_counts_by_its_64_and_mapped_ipv4_as_the_ipv4_address() {
        let t = RefusedKeys::new(2, 60, Duration::from_secs(60));
        let now = Instant::now();
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let same_64: IpAddr = "2001:db8:1:2:ffff:1:2:3".parse().unwrap();
        let other_64: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        refuse(&t, a, now);
        refuse(&t, same_64, now);
        assert!(
            t.begin_at(a, None, now).is_err(),
            "one /64 shares one budget"
        );
        assert!(t.begin_at(other_64, None, now).is_ok());

        let v4: IpAddr = "192.0.2.7".parse().unwrap();
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        refuse(&t, mapped, now);
        refuse(&t, v4, now);
        assert!(
            t.begin_at(v4, None, now).is_err(),
            "mapped IPv4 is the IPv4 address"
        );
        assert_eq!(source_of(mapped), v4);
    }

    #[test]
    fn pruning_runs_when_the_map_has_doubled_not_on_every_failure() {
        let t = RefusedKeys::new(2, 60, Duration::from_secs(60));
        let now = Instant::now();
        let nth = |i: usize| IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i as u32));
        // Buckets still spending (not full) are kept by a prune.
        for i in 0..=PRUNE_ABOVE {
            refuse(&t, nth(i), now);
        }
        // They all refill; the next failure prunes them all but its own.
        let later = now + Duration::from_secs(10);
        refuse(&t, nth(PRUNE_ABOVE + 1), later);
        assert_eq!(t.len(), 1, "the full buckets were dropped");
        assert_eq!(t.prune_at.load(Ordering::Relaxed), PRUNE_ABOVE);
        // Spending buckets are kept, and the next prune waits for doubling.
        for i in 0..=PRUNE_ABOVE {
            refuse(&t, nth(i), later);
        }
        assert_eq!(t.prune_at.load(Ordering::Relaxed), 2 * (PRUNE_ABOVE + 1));
        let before = t.len();
        refuse(&t, nth(PRUNE_ABOVE + 2), later + Duration::from_secs(10));
        assert_eq!(t.len(), before + 1, "no scan before the map doubles");
    }

    #[test]
    fn key_ids_accepted_before_a_spent_budget_are_still_looked_up() {
        let t = RefusedKeys::new(2, 1, Duration::from_secs(600));
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let now = Instant::now();
        t.begin_at(a, Some("k1"), now).unwrap().accepted_at(now);
        refuse(&t, a, now);
        refuse(&t, a, now);
        assert!(t.begin_at(a, None, now).is_err(), "spent");
        assert!(
            t.begin_at(a, Some("k2"), now).is_err(),
            "an unknown key waits"
        );
        let known = t
            .begin_at(a, Some("k1"), now)
            .expect("a known key is looked up");
        known.accepted_at(now);
        assert!(
            t.begin_at(a, None, now).is_err(),
            "and gives back nothing it did not spend"
        );
        // Not from another source, and not after the TTL.
        let b: IpAddr = "127.0.0.3".parse().unwrap();
        t.begin_at(b, None, now).unwrap().refused();
        t.begin_at(b, None, now).unwrap().refused();
        assert!(t.begin_at(b, Some("k1"), now).is_err());
        let later = now + Duration::from_secs(601);
        // The budget has refilled by then; spend it again.
        while let Ok(attempt) = t.begin_at(a, None, later) {
            attempt.refused();
        }
        assert!(t.begin_at(a, Some("k1"), later).is_err(), "expired");
        // A refusal forgets the key id.
        let c: IpAddr = "127.0.0.4".parse().unwrap();
        t.begin_at(c, Some("k4"), now).unwrap().accepted_at(now);
        t.begin_at(c, Some("k4"), now).unwrap().refused();
        refuse(&t, c, now);
        assert!(t.begin_at(c, Some("k4"), now).is_err(), "forgotten");
    }

    #[test]
    fn the_known_key_map_is_bounded() {
        let t = RefusedKeys::new(2, 60, Duration::from_secs(600));
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let now = Instant::now();
        for i in 0..KNOWN_KEYS_MAX + 5 {
            let at = now + Duration::from_millis(i as u64);
            t.begin_at(a, Some(&format!("k{i}")), at)
                .unwrap()
                .accepted_at(at);
        }
        assert_eq!(t.known.len(), KNOWN_KEYS_MAX);
        let at = now + Duration::from_secs(1);
        assert!(!t.is_known(source_of(a), "k0", at), "the oldest went first");
        assert!(t.is_known(source_of(a), &format!("k{}", KNOWN_KEYS_MAX + 4), at));
    }

    #[tokio::test]
    async fn a_check_waits_for_held_failures_and_then_passes_or_is_refused() {
        let t = std::sync::Arc::new(RefusedKeys::new(1, 1, Duration::from_secs(60)));
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let held = t.begin(a, None).await.unwrap();
        assert!(
            matches!(t.begin_at(a, None, Instant::now()), Err(NotNow::Busy(_))),
            "busy, not spent, while the last failure is held"
        );
        let waiting = t.clone();
        let second =
            tokio::spawn(async move { waiting.begin(a, None).await.map(Attempt::accepted) });
        held.accepted();
        assert!(
            second.await.unwrap().is_ok(),
            "a good key gives the failure back"
        );

        let held = t.begin(a, None).await.unwrap();
        let waiting = t.clone();
        let third = tokio::spawn(async move { waiting.begin(a, None).await.is_err() });
        held.refused();
        assert!(third.await.unwrap(), "a refused key keeps it spent");
    }

    #[tokio::test]
    async fn a_waiting_check_takes_a_failure_earned_meanwhile() {
        // 600 a minute: the next failure is earned 100 ms after the last.
        let t = RefusedKeys::new(1, 600, Duration::from_secs(60));
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let held = t.begin(a, None).await.unwrap();
        let started = tokio::time::Instant::now();
        let second = t.begin(a, None).await;
        assert!(second.is_ok(), "the refill, not a release, lets it pass");
        assert!(started.elapsed() < WAIT_FOR_HELD, "before the deadline");
        drop(held);
    }

    #[test]
    fn an_abandoned_check_spends_its_failure_but_forgets_no_key_id() {
        let t = RefusedKeys::new(1, 1, Duration::from_secs(600));
        let a: IpAddr = "127.0.0.5".parse().unwrap();
        let now = Instant::now();
        t.begin_at(a, Some("k"), now).unwrap().accepted_at(now);
        // Dropped mid-lookup, as when a client hangs up on a REST call.
        drop(t.begin_at(a, Some("k"), now).unwrap());
        assert!(t.begin_at(a, None, now).is_err(), "its failure stays spent");
        assert!(
            t.begin_at(a, Some("k"), now).is_ok(),
            "the id is still known"
        );
    }
}
