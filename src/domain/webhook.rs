//! Webhook subscriptions (ADR 0033): what an app asks for, the closed list
//! of what an attempt can come to, and when the next one is due. Pure: the
//! store keeps the state, the worker sends.

use serde_json::Value;

use super::egress_policy::HostPort;
use super::manifest::https_target;
use super::validate::{FieldProblem, Problems};
use super::Millis;

/// The event a disabled subscription writes to its app's log.
pub const DISABLED_EVENT: &str = "app/webhook/disabled";

/// Where a subscription comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// `POST /api/v1/webhooks/subscriptions` with the app's key.
    Api,
    /// The manifest's `delivery.eventsUrl` and `eventSubscriptions`.
    Manifest,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Api => "api",
            Source::Manifest => "manifest",
        }
    }

    pub fn parse(s: &str) -> Option<Source> {
        [Source::Api, Source::Manifest]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

/// Why a subscription stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DisabledReason {
    /// The receiver answered 410 Gone.
    Gone,
    /// Every attempt failed for `webhooks.disable_after_hours`.
    Failing,
    /// `switchboard webhooks disable`.
    Operator,
}

impl DisabledReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DisabledReason::Gone => "gone",
            DisabledReason::Failing => "failing",
            DisabledReason::Operator => "operator",
        }
    }

    pub fn parse(s: &str) -> Option<DisabledReason> {
        [
            DisabledReason::Gone,
            DisabledReason::Failing,
            DisabledReason::Operator,
        ]
        .into_iter()
        .find(|v| v.as_str() == s)
    }
}

/// What one attempt came to: the delivery log's `outcome` and the metric's
/// label. A closed list, so neither carries anything the receiver chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx: the cursor moves past the event.
    Delivered,
    /// Another non-3xx status.
    HttpStatus,
    /// 410: the subscription is disabled.
    Gone,
    Redirect,
    Timeout,
    Transport,
    TooLarge,
    /// The URL's host is no longer allowed, or resolves to a private address.
    Blocked,
    /// Retention removed events the cursor had not reached.
    Pruned,
    /// The hub could not sign (no signing key yet, or a `v1` secret that
    /// does not open): nothing was sent.
    Unsigned,
}

impl Outcome {
    pub const ALL: [Outcome; 10] = [
        Outcome::Delivered,
        Outcome::HttpStatus,
        Outcome::Gone,
        Outcome::Redirect,
        Outcome::Timeout,
        Outcome::Transport,
        Outcome::TooLarge,
        Outcome::Blocked,
        Outcome::Pruned,
        Outcome::Unsigned,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Delivered => "delivered",
            Outcome::HttpStatus => "http_status",
            Outcome::Gone => "gone",
            Outcome::Redirect => "redirect",
            Outcome::Timeout => "timeout",
            Outcome::Transport => "transport",
            Outcome::TooLarge => "too_large",
            Outcome::Blocked => "blocked",
            Outcome::Pruned => "pruned",
            Outcome::Unsigned => "unsigned",
        }
    }

    pub fn parse(s: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.as_str() == s)
    }

    /// The status an HTTP answer that is not a 3xx comes to.
    pub fn of_status(status: u16) -> Outcome {
        match status {
            200..=299 => Outcome::Delivered,
            410 => Outcome::Gone,
            _ => Outcome::HttpStatus,
        }
    }
}

/// The retry policy, from `[webhooks]`.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    pub base_ms: u64,
    pub max_delay_ms: u64,
}

impl Backoff {
    /// The delay before attempt `failures + 1`: `base * 2^(failures-1)`,
    /// capped, with its upper half jittered by `jitter` in `[0, 1)` (so
    /// retries of many subscriptions spread out but never come sooner than
    /// half the backoff). A `Retry-After` replaces it, within the cap.
    pub fn delay_ms(&self, failures: u32, jitter: f64, retry_after_ms: Option<u64>) -> u64 {
        if let Some(asked) = retry_after_ms {
            return asked.min(self.max_delay_ms);
        }
        let exp = failures.saturating_sub(1).min(40);
        let full = self
            .base_ms
            .saturating_mul(1u64 << exp)
            .min(self.max_delay_ms);
        let half = full / 2;
        half + ((full - half) as f64 * jitter.clamp(0.0, 1.0)) as u64
    }
}

/// What follows a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterFailure {
    /// The same event again at this time.
    RetryAt(Millis),
    /// Failing for `webhooks.disable_after_hours`: disable.
    Disable,
}

impl Backoff {
    /// The subscription has failed since `failing_since` (`None`: this is
    /// its first failure) and failed again at `now`, its `failures`-th
    /// attempt at this event: disabled once it has failed for
    /// `disable_after_ms`, otherwise retried after the backoff.
    pub fn after_failure(
        &self,
        failing_since: Option<Millis>,
        now: Millis,
        disable_after_ms: i64,
        failures: u32,
        jitter: f64,
        retry_after_ms: Option<u64>,
    ) -> AfterFailure {
        let failing_for = now - failing_since.unwrap_or(now);
        if failing_for >= disable_after_ms {
            return AfterFailure::Disable;
        }
        let delay = self.delay_ms(failures, jitter, retry_after_ms);
        AfterFailure::RetryAt(now.saturating_add(delay.min(i64::MAX as u64) as i64))
    }
}

/// A `Retry-After` value (RFC 9110 §10.2.3): delay seconds or an HTTP
/// date, as milliseconds from `now`. Anything else is ignored.
pub fn retry_after_ms(value: &str, now: Millis) -> Option<u64> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(secs.saturating_mul(1_000));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    Some(at.timestamp_millis().saturating_sub(now).max(0) as u64)
}

/// A subscription as the app asks for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubscriptionRequest {
    pub url: String,
    pub event_types: Vec<String>,
    pub hmac: bool,
}

/// The request members, in the order their problems are reported.
const MEMBERS: [&str; 3] = ["url", "eventTypes", "hmac"];

/// Checks `{url, eventTypes, hmac?}`: the URL by the manifest's URL rules
/// (https, no user info, a host on `egress.allowlist`), each event type one
/// the app audience receives, none twice, at least one.
pub fn validate_request(
    doc: &Value,
    allowlist: &[HostPort],
    app_event_types: &[&str],
) -> Result<SubscriptionRequest, Vec<FieldProblem>> {
    let mut p = Problems::default();
    let Some(root) = p.object("", Some(doc), &MEMBERS, true) else {
        return Err(p.into_vec());
    };
    let url = https_target(&mut p, "/url", root.get("url"), allowlist);
    let event_types = event_types(&mut p, root.get("eventTypes"), app_event_types);
    let hmac = match root.get("hmac") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            p.push("/hmac", "must be a boolean");
            false
        }
    };
    match (url, p.is_empty()) {
        (Some(url), true) => Ok(SubscriptionRequest {
            url: url.to_string(),
            event_types,
            hmac,
        }),
        _ => Err(p.into_vec()),
    }
}

fn event_types(p: &mut Problems, value: Option<&Value>, known: &[&str]) -> Vec<String> {
    let at = "/eventTypes";
    let items = match value {
        None => {
            p.push(at, "is required");
            return Vec::new();
        }
        Some(Value::Array(items)) if items.is_empty() => {
            p.push(at, "must name at least one event type");
            return Vec::new();
        }
        Some(Value::Array(items)) => items,
        Some(_) => {
            p.push(at, "must be an array");
            return Vec::new();
        }
    };
    let mut out: Vec<String> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("{at}/{i}");
        match item.as_str() {
            Some(t) if !known.contains(&t) => p.push(
                at,
                "is not an event type the app audience receives (see the catalogue)",
            ),
            Some(t) if out.iter().any(|o| o == t) => {
                p.push(at, format!("duplicate event type {t:?}"))
            }
            Some(t) => out.push(t.to_string()),
            None => p.push(at, "must be a string"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TYPES: [&str; 2] = ["app/command/invoked", "app/installation/changed"];

    fn allow() -> Vec<HostPort> {
        vec![HostPort::parse("hooks.example.com").unwrap()]
    }

    #[test]
    fn a_request_is_checked_member_by_member() {
        let ok = validate_request(
            &json!({"url": "https://hooks.example.com/in", "eventTypes": ["app/command/invoked"], "hmac": true}),
            &allow(),
            &TYPES,
        )
        .unwrap();
        assert!(ok.hmac);
        assert_eq!(ok.event_types, vec!["app/command/invoked"]);
        let pointers = |doc: Value| -> Vec<String> {
            validate_request(&doc, &allow(), &TYPES)
                .unwrap_err()
                .into_iter()
                .map(|p| p.pointer)
                .collect()
        };
        assert_eq!(
            pointers(json!({"url": "http://hooks.example.com/in", "eventTypes": []})),
            vec!["/url", "/eventTypes"]
        );
        assert_eq!(
            pointers(
                json!({"url": "https://other.example.com/", "eventTypes": ["app/command/invoked", "app/command/invoked", "app/nope", 3], "hmac": "yes", "extra": 1})
            ),
            vec![
                "/extra",
                "/url",
                "/eventTypes/1",
                "/eventTypes/2",
                "/eventTypes/3",
                "/hmac"
            ]
        );
        assert_eq!(pointers(json!([])), vec![""]);
    }

    #[test]
    fn backoff_doubles_within_the_cap_and_jitters_its_upper_half() {
        let b = Backoff {
            base_ms: 1_000,
            max_delay_ms: 10_000,
        };
        assert_eq!(b.delay_ms(1, 0.0, None), 500);
        assert_eq!(b.delay_ms(1, 0.999_999, None), 999);
        assert_eq!(b.delay_ms(3, 0.0, None), 2_000);
        assert_eq!(b.delay_ms(3, 1.0, None), 4_000);
        assert_eq!(b.delay_ms(30, 1.0, None), 10_000);
        assert_eq!(b.delay_ms(u32::MAX, 0.5, None), 7_500);
        assert_eq!(b.delay_ms(1, 0.0, Some(3_000)), 3_000, "Retry-After wins");
        assert_eq!(b.delay_ms(1, 0.0, Some(60_000)), 10_000, "within the cap");
    }

    #[test]
    fn a_subscription_failing_for_the_configured_time_is_disabled() {
        let b = Backoff {
            base_ms: 1_000,
            max_delay_ms: 10_000,
        };
        let hour = 3_600_000;
        let now = 100 * hour;
        assert_eq!(
            b.after_failure(None, now, 72 * hour, 1, 0.0, None),
            AfterFailure::RetryAt(now + 500),
            "the first failure starts the clock"
        );
        assert_eq!(
            b.after_failure(
                Some(now - 72 * hour + 1),
                now,
                72 * hour,
                40,
                1.0,
                Some(2_000)
            ),
            AfterFailure::RetryAt(now + 2_000)
        );
        assert_eq!(
            b.after_failure(Some(now - 72 * hour), now, 72 * hour, 41, 0.0, None),
            AfterFailure::Disable
        );
    }

    #[test]
    fn retry_after_takes_seconds_or_a_date() {
        let now = 1_700_000_000_000;
        assert_eq!(retry_after_ms("120", now), Some(120_000));
        assert_eq!(retry_after_ms(" 0 ", now), Some(0));
        // 1_700_000_060 s is Tue, 14 Nov 2023 22:14:20 GMT.
        assert_eq!(
            retry_after_ms("Tue, 14 Nov 2023 22:14:20 GMT", now),
            Some(60_000)
        );
        assert_eq!(
            retry_after_ms("Tue, 14 Nov 2023 22:12:20 GMT", now),
            Some(0),
            "a date in the past is now"
        );
        assert_eq!(retry_after_ms("soon", now), None);
        assert_eq!(retry_after_ms("-5", now), None);
    }

    #[test]
    fn statuses_map_to_outcomes_and_names_round_trip() {
        assert_eq!(Outcome::of_status(200), Outcome::Delivered);
        assert_eq!(Outcome::of_status(204), Outcome::Delivered);
        assert_eq!(Outcome::of_status(410), Outcome::Gone);
        assert_eq!(Outcome::of_status(404), Outcome::HttpStatus);
        assert_eq!(Outcome::of_status(503), Outcome::HttpStatus);
        for o in Outcome::ALL {
            assert_eq!(Outcome::parse(o.as_str()), Some(o));
        }
        for r in [
            DisabledReason::Gone,
            DisabledReason::Failing,
            DisabledReason::Operator,
        ] {
            assert_eq!(DisabledReason::parse(r.as_str()), Some(r));
        }
        assert_eq!(Source::parse("manifest"), Some(Source::Manifest));
    }
}
