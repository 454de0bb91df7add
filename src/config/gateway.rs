//! `[gateway]`: the WebSocket side — authentication, heartbeats, frame
//! limits, socket buffers. The call rate limits are `[ratelimit]`'s.

use serde::{Deserialize, Serialize};

use super::require_positive;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewayConfig {
    pub auth_timeout_ms: u64,
    pub heartbeat_interval_ms: u64,
    pub heartbeat_timeout_ms: u64,
    pub max_frame_bytes: usize,
    pub transport_max_frame_bytes: usize,
    pub max_in_flight_requests: u32,
    pub outbound_queue_capacity: u32,
    /// Replaced by `ratelimit.default.per_second`: still read, so that a
    /// configuration that sets it is refused naming the new key instead of
    /// silently losing its limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit_per_second: Option<u32>,
    /// Replaced by `ratelimit.default.burst`, refused the same way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit_burst: Option<u32>,
    /// Per-socket read buffer. Small keeps idle sockets cheap; frames
    /// larger than it are still read (the buffer grows for them).
    pub socket_read_buffer_bytes: usize,
    /// Per-socket write buffer before a flush.
    pub socket_write_buffer_bytes: usize,
    /// How often the gateway looks for keys revoked by another process (the
    /// operator CLI, another node) and closes their sockets.
    pub revocation_check_interval_ms: u64,
    /// Frames a socket may send before a connect succeeds; beyond, it is
    /// closed (1008). Keeps unauthenticated sockets from costing work or log.
    pub max_unauthenticated_frames: u32,
    /// The largest frame a socket may send before a connect succeeds (a
    /// connect is small); a larger one closes it (1009), so a stranger
    /// cannot make the hub parse megabytes.
    pub unauthenticated_max_frame_bytes: usize,
    /// Failed connects one socket may make before it is closed (1008).
    pub max_failed_connects_per_socket: u32,
    /// Refused keys (connects and REST bearer keys) one source address may
    /// present at once; then its key checks are refused without a lookup
    /// until the budget refills at `failed_connects_refill_per_minute`.
    pub failed_connects_per_address: u32,
    pub failed_connects_refill_per_minute: u32,
    /// How long a key id accepted from an address stays known there: while
    /// the address's budget is spent, known key ids are still looked up, so
    /// clients connected before an attack keep reconnecting. 0 turns it off.
    pub known_key_ttl_seconds: u64,
    /// `Origin` values allowed on `/ws` upgrades; an upgrade with any other
    /// `Origin` is refused (403), one without is not a browser's.
    pub allowed_origins: Vec<String>,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            auth_timeout_ms: 10_000,
            heartbeat_interval_ms: 20_000,
            heartbeat_timeout_ms: 60_000,
            max_frame_bytes: 1024 * 1024,
            transport_max_frame_bytes: 4 * 1024 * 1024,
            max_in_flight_requests: 64,
            outbound_queue_capacity: 1024,
            rate_limit_per_second: None,
            rate_limit_burst: None,
            socket_read_buffer_bytes: 4096,
            socket_write_buffer_bytes: 8192,
            revocation_check_interval_ms: 2_000,
            max_unauthenticated_frames: 16,
            unauthenticated_max_frame_bytes: 16 * 1024,
            max_failed_connects_per_socket: 3,
            failed_connects_per_address: 20,
            failed_connects_refill_per_minute: 10,
            known_key_ttl_seconds: 86_400,
            allowed_origins: Vec::new(),
        }
    }
}

impl GatewayConfig {
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        if self.rate_limit_per_second.is_some() {
            anyhow::bail!(
                "gateway.rate_limit_per_second is no longer read: set ratelimit.default.per_second (and the other ratelimit.<class> sections) instead"
            );
        }
        if self.rate_limit_burst.is_some() {
            anyhow::bail!(
                "gateway.rate_limit_burst is no longer read: set ratelimit.default.burst (and the other ratelimit.<class> sections) instead"
            );
        }
        require_positive(&[
            ("gateway.auth_timeout_ms", self.auth_timeout_ms),
            ("gateway.heartbeat_interval_ms", self.heartbeat_interval_ms),
            ("gateway.heartbeat_timeout_ms", self.heartbeat_timeout_ms),
            ("gateway.max_frame_bytes", self.max_frame_bytes as u64),
            (
                "gateway.max_in_flight_requests",
                self.max_in_flight_requests as u64,
            ),
            (
                "gateway.outbound_queue_capacity",
                self.outbound_queue_capacity as u64,
            ),
            (
                "gateway.revocation_check_interval_ms",
                self.revocation_check_interval_ms,
            ),
            (
                "gateway.socket_read_buffer_bytes",
                self.socket_read_buffer_bytes as u64,
            ),
            (
                "gateway.max_unauthenticated_frames",
                self.max_unauthenticated_frames as u64,
            ),
            (
                "gateway.unauthenticated_max_frame_bytes",
                self.unauthenticated_max_frame_bytes as u64,
            ),
            (
                "gateway.max_failed_connects_per_socket",
                self.max_failed_connects_per_socket as u64,
            ),
            (
                "gateway.failed_connects_per_address",
                self.failed_connects_per_address as u64,
            ),
            (
                "gateway.failed_connects_refill_per_minute",
                self.failed_connects_refill_per_minute as u64,
            ),
        ])?;
        if self.transport_max_frame_bytes < self.max_frame_bytes {
            anyhow::bail!(
                "gateway.transport_max_frame_bytes must be at least gateway.max_frame_bytes"
            );
        }
        for origin in &self.allowed_origins {
            check_origin(origin)?;
        }
        if self.heartbeat_timeout_ms <= self.heartbeat_interval_ms {
            anyhow::bail!(
                "gateway.heartbeat_timeout_ms must be greater than gateway.heartbeat_interval_ms"
            );
        }
        Ok(())
    }
}

/// An origin as browsers send it: `scheme://host[:port]`, nothing after.
fn check_origin(origin: &str) -> anyhow::Result<()> {
    let rest = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"));
    let well_formed = rest.is_some_and(|host| {
        !host.is_empty() && !host.contains(['/', '?', '#', '@', ' ', '*']) && host.is_ascii()
    });
    if !well_formed {
        anyhow::bail!(
            "gateway.allowed_origins: {origin:?} is not an origin (scheme://host[:port], http or https, no path)"
        );
    }
    // Browsers leave the scheme's default port out of `Origin`, so an entry
    // that names it would never match.
    let default_port = (origin.starts_with("https://") && origin.ends_with(":443"))
        || (origin.starts_with("http://") && origin.ends_with(":80"));
    if default_port {
        anyhow::bail!(
            "gateway.allowed_origins: {origin:?} names its scheme's default port, which browsers leave out of Origin; write it without the port"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_origins_are_bare_origins() {
        for good in ["https://console.example", "http://127.0.0.1:8080"] {
            assert!(check_origin(good).is_ok(), "{good}");
        }
        for bad in [
            "*",
            "console.example",
            "https://console.example/",
            "https://console.example:443",
            "http://console.example:80",
            "https://a/b",
            "ftp://x",
            "https://",
        ] {
            let e = check_origin(bad).unwrap_err().to_string();
            assert!(e.contains("gateway.allowed_origins"), "{e}");
        }
    }
}
