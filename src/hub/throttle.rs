//! The per-address budget of refused keys (WebSocket connects and REST
//! bearer keys alike): each refusal spends a token, tokens come back at a
//! steady rate, and while an address has none its key checks are refused
//! before any lookup. Accepted keys cost nothing, so many agents behind one
//! address connect freely.

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

    /// `Err(wait)` while `address` has no failure left to spend.
    pub fn check(&self, address: IpAddr) -> Result<(), Duration> {
        self.check_at(address, Instant::now())
    }

    fn check_at(&self, address: IpAddr, now: Instant) -> Result<(), Duration> {
        let Some(b) = self.buckets.get(&source_of(address)).map(|b| *b) else {
            return Ok(());
        };
        let b = self.refilled(b, now);
        if b.tokens >= 1.0 {
            return Ok(());
        }
        let wait = (1.0 - b.tokens) / self.refill_per_sec;
        Err(Duration::from_secs_f64(wait.min(86_400.0)).max(Duration::from_millis(1)))
    }

    /// Spends one of `address`'s failures.
    pub fn failed(&self, address: IpAddr) {
        self.failed_at(address, Instant::now());
    }

    fn failed_at(&self, address: IpAddr, now: Instant) {
        self.prune_if_grown(now);
        let mut entry = self.buckets.entry(source_of(address)).or_insert(Bucket {
            tokens: self.burst,
            at: now,
        });
        let b = self.refilled(*entry, now);
        *entry = Bucket {
            tokens: (b.tokens - 1.0).max(0.0),
            at: now,
        };
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

    #[test]
    fn failures_run_out_per_address_and_come_back_with_time() {
        let t = RefusedKeys::new(3, 60);
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let b: IpAddr = "127.0.0.3".parse().unwrap();
        let now = Instant::now();
        for _ in 0..3 {
            assert!(t.check_at(a, now).is_ok());
            t.failed_at(a, now);
        }
        let wait = t.check_at(a, now).unwrap_err();
        assert!(wait <= Duration::from_secs(1) && wait > Duration::ZERO);
        assert!(
            t.check_at(b, now).is_ok(),
            "other addresses are not affected"
        );
        assert!(t.check_at(a, now + Duration::from_secs(1)).is_ok());
        t.failed_at(a, now + Duration::from_secs(1));
        assert!(t.check_at(a, now + Duration::from_secs(1)).is_err());
    }

    #[test]
    fn ipv6_counts_by_its_64_and_mapped_ipv4_as_the_ipv4_address() {
        let t = RefusedKeys::new(2, 60);
        let now = Instant::now();
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let same_64: IpAddr = "2001:db8:1:2:ffff:1:2:3".parse().unwrap();
        let other_64: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        t.failed_at(a, now);
        t.failed_at(same_64, now);
        assert!(t.check_at(a, now).is_err(), "one /64 shares one budget");
        assert!(t.check_at(other_64, now).is_ok());

        let v4: IpAddr = "192.0.2.7".parse().unwrap();
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        t.failed_at(mapped, now);
        t.failed_at(v4, now);
        assert!(
            t.check_at(v4, now).is_err(),
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
            t.failed_at(nth(i), now);
        }
        // They all refill; the next failure prunes them all but its own.
        let later = now + Duration::from_secs(10);
        t.failed_at(nth(PRUNE_ABOVE + 1), later);
        assert_eq!(t.len(), 1, "the full buckets were dropped");
        assert_eq!(t.prune_at.load(Ordering::Relaxed), PRUNE_ABOVE);
        // Spending buckets are kept, and the next prune waits for doubling.
        for i in 0..=PRUNE_ABOVE {
            t.failed_at(nth(i), later);
        }
        assert_eq!(t.prune_at.load(Ordering::Relaxed), 2 * (PRUNE_ABOVE + 1));
        let before = t.len();
        t.failed_at(nth(PRUNE_ABOVE + 2), later + Duration::from_secs(10));
        assert_eq!(t.len(), before + 1, "no scan before the map doubles");
    }
}
