//! The per-address budget of refused keys (WebSocket connects and REST
//! bearer keys alike): each refusal spends a token, tokens come back at a
//! steady rate, and while an address has none its key checks are refused
//! before any lookup. Accepted keys cost nothing, so many agents behind one
//! address connect freely.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use dashmap::DashMap;

/// Entries kept before full (forgiven) buckets are dropped.
const PRUNE_ABOVE: usize = 10_000;

pub struct RefusedKeys {
    buckets: DashMap<IpAddr, Bucket>,
    burst: f64,
    refill_per_sec: f64,
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
        let Some(b) = self.buckets.get(&address).map(|b| *b) else {
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
        if self.buckets.len() > PRUNE_ABOVE {
            self.buckets
                .retain(|_, b| self.refilled(*b, now).tokens < self.burst);
        }
        let mut entry = self.buckets.entry(address).or_insert(Bucket {
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
}
