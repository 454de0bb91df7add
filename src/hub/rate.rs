//! The per-principal call limiters, one per rate class (ADR 0020 §4), so a
//! principal that floods sends still reads, acks and dispatches.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use uuid::Uuid;

use crate::config::{RateLimitConfig, RateQuota};
use crate::protocol::RateClass;

/// One keyed limiter per class, each keyed by principal. Shared with the
/// retention task, which prunes them all.
pub struct CallLimiters {
    /// In `RateClass::ALL` order.
    limiters: Vec<DefaultKeyedRateLimiter<Uuid>>,
}

fn quota(q: RateQuota) -> Quota {
    Quota::per_second(NonZeroU32::new(q.per_second).expect("validated > 0"))
        .allow_burst(NonZeroU32::new(q.burst).expect("validated > 0"))
}

fn slot(class: RateClass) -> usize {
    RateClass::ALL
        .iter()
        .position(|c| *c == class)
        .expect("every class is in ALL")
}

impl CallLimiters {
    pub fn new(config: &RateLimitConfig) -> CallLimiters {
        let limiters = RateClass::ALL
            .iter()
            .map(|class| quota(config.quota(*class)))
            .map(RateLimiter::keyed)
            .collect();
        CallLimiters { limiters }
    }

    /// Spends one call of `class` for `principal`; `Err` says how long
    /// until one is allowed again.
    pub fn check(&self, class: RateClass, principal: Uuid) -> Result<(), Duration> {
        self.limiters[slot(class)]
            .check_key(&principal)
            .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }
}

impl crate::events::retention::KeyedState for CallLimiters {
    /// Forgets principals whose buckets are full again, in every class.
    fn retain_recent(&self) {
        for l in &self.limiters {
            l.retain_recent();
        }
    }
}

impl RateLimitConfig {
    /// The quota of one class.
    pub fn quota(&self, class: RateClass) -> RateQuota {
        match class {
            RateClass::Message => self.message,
            RateClass::Trigger => self.trigger,
            RateClass::Interaction => self.interaction,
            RateClass::Write => self.write,
            RateClass::AgentRuntime => self.agent_runtime,
            RateClass::Default => self.default,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_class_spends_its_own_bucket() {
        let config = RateLimitConfig {
            message: RateQuota {
                per_second: 1,
                burst: 2,
            },
            ..RateLimitConfig::default()
        };
        let limiters = CallLimiters::new(&config);
        let (who, other) = (Uuid::now_v7(), Uuid::now_v7());
        assert!(limiters.check(RateClass::Message, who).is_ok());
        assert!(limiters.check(RateClass::Message, who).is_ok());
        let wait = limiters.check(RateClass::Message, who).unwrap_err();
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_secs(1),
            "{wait:?}"
        );
        // Another class of the same principal, and another principal, pass.
        assert!(limiters.check(RateClass::Default, who).is_ok());
        assert!(limiters.check(RateClass::Write, who).is_ok());
        assert!(limiters.check(RateClass::Message, other).is_ok());
    }

    #[test]
    fn sections_and_classes_share_their_names() {
        let config = RateLimitConfig::default();
        let names: Vec<&str> = config.classes().iter().map(|(n, _)| *n).collect();
        let classes: Vec<&str> = RateClass::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(names, classes);
    }
}
