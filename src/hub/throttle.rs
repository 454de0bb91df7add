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

/// Entries kept before full (forgiven) buckets are dropped.
const PRUNE_ABOVE: usize = 10_000;

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
}

#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl RefusedKeys {
    /// `burst` failures at once, then `per_minute` more each minute.
    pub fn new(burst: u32, per_minute: u32) -> RefusedKeys {
        RefusedKeys {
            buckets: DashMap::new(),
            burst: burst as f64,
            refill_per_sec: per_minute as f64 / 60.0,
            prune_at: AtomicUsize::new(PRUNE_ABOVE),
        }
    }

    fn refilled(&self, b: Bucket, now: Instant) -> Bucket {
        let earned = now.saturating_duration_since(b.at).as_secs_f64() * self.refill_per_sec;
        Bucket {
            tokens: (b.tokens + earned).min(self.burst),
            at: now,
        }
    }

    /// Starts a key check from `address`: spends one of its failures at
    /// once (so concurrent checks cannot all pass on the last one), or
    /// `Err(wait)` while it has none. The attempt gives the failure back
    /// when the key is accepted or no key was checked.
    pub fn begin(&self, address: IpAddr) -> Result<Attempt<'_>, Duration> {
        self.begin_at(address, Instant::now())
    }

    fn begin_at(&self, address: IpAddr, now: Instant) -> Result<Attempt<'_>, Duration> {
        let source = source_of(address);
        self.prune_if_grown(now);
        let mut entry = self.buckets.entry(source).or_insert(Bucket {
            tokens: self.burst,
            at: now,
        });
        let b = self.refilled(*entry, now);
        if b.tokens < 1.0 {
            *entry = b;
            let wait = (1.0 - b.tokens) / self.refill_per_sec;
            return Err(Duration::from_secs_f64(wait.min(86_400.0)).max(Duration::from_millis(1)));
        }
        *entry = Bucket {
            tokens: b.tokens - 1.0,
            at: now,
        };
        Ok(Attempt { keys: self, source })
    }

    fn refund(&self, source: IpAddr) {
        if let Some(mut b) = self.buckets.get_mut(&source) {
            b.tokens = (b.tokens + 1.0).min(self.burst);
        }
    }
}

/// One key check under way, holding one failure of its source. Dropped
/// without a word (or `refused`), the failure stays spent.
pub struct Attempt<'a> {
    keys: &'a RefusedKeys,
    source: IpAddr,
}

impl Attempt<'_> {
    /// The key was refused: its failure stays spent.
    pub fn refused(self) {}

    /// The key was accepted: accepted keys cost nothing.
    pub fn accepted(self) {
        self.keys.refund(self.source);
    }

    /// No key was checked (malformed params, a store failure): nothing
    /// was guessed, so nothing is spent.
    pub fn unchecked(self) {
        self.keys.refund(self.source);
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
            .retain(|_, b| self.refilled(*b, now).tokens < self.burst);
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
        t.begin_at(a, now).expect("budget left").refused();
    }

    #[test]
    fn failures_run_out_per_address_and_come_back_with_time() {
        let t = RefusedKeys::new(3, 60);
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let b: IpAddr = "127.0.0.3".parse().unwrap();
        let now = Instant::now();
        for _ in 0..3 {
            refuse(&t, a, now);
        }
        let wait = t.begin_at(a, now).err().unwrap();
        assert!(wait <= Duration::from_secs(1) && wait > Duration::ZERO);
        assert!(
            t.begin_at(b, now).is_ok(),
            "other addresses are not affected"
        );
        refuse(&t, a, now + Duration::from_secs(1));
        assert!(t.begin_at(a, now + Duration::from_secs(1)).is_err());
    }

    #[test]
    fn checks_under_way_hold_their_failure_so_concurrent_ones_cannot_all_pass() {
        let t = RefusedKeys::new(3, 60);
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let now = Instant::now();
        let under_way: Vec<_> = (0..3).map(|_| t.begin_at(a, now).unwrap()).collect();
        assert!(
            t.begin_at(a, now).is_err(),
            "a fourth concurrent check must wait"
        );
        // Accepted and unchecked attempts give their failure back.
        let mut under_way = under_way.into_iter();
        under_way.next().unwrap().accepted();
        under_way.next().unwrap().unchecked();
        assert!(t.begin_at(a, now).is_ok());
        assert!(t.begin_at(a, now).is_ok());
        assert!(t.begin_at(a, now).is_err());
    }

    #[test]
    fn ipv6_counts_by_its_64_and_mapped_ipv4_as_the_ipv4_address() {
        let t = RefusedKeys::new(2, 60);
        let now = Instant::now();
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let same_64: IpAddr = "2001:db8:1:2:ffff:1:2:3".parse().unwrap();
        let other_64: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        refuse(&t, a, now);
        refuse(&t, same_64, now);
        assert!(t.begin_at(a, now).is_err(), "one /64 shares one budget");
        assert!(t.begin_at(other_64, now).is_ok());

        let v4: IpAddr = "192.0.2.7".parse().unwrap();
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        refuse(&t, mapped, now);
        refuse(&t, v4, now);
        assert!(
            t.begin_at(v4, now).is_err(),
            "mapped IPv4 is the IPv4 address"
        );
        assert_eq!(source_of(mapped), v4);
    }

    #[test]
    fn pruning_runs_when_the_map_has_doubled_not_on_every_failure() {
        let t = RefusedKeys::new(2, 60);
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
}
