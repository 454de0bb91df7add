//! The accept loop: admits connections into their slots, refuses the rest at
//! once, and backs off (logging once per episode) when accepting fails for
//! want of descriptors or memory.

use std::io;
use std::time::Duration;

use axum::Router;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use super::connection::{self, Timeouts};
use super::slots::{Refusal, Slots};
use crate::telemetry::names;

pub struct Listener {
    pub listener: TcpListener,
    pub app: Router,
    pub slots: Slots,
    pub timeouts: Timeouts,
    pub shutdown: CancellationToken,
}

impl Listener {
    /// Accepts until shutdown, then waits for the HTTP connections to drain
    /// (WebSockets are drained by the gateway).
    pub async fn run(self) {
        let connections = TaskTracker::new();
        let mut backoff = Backoff::default();
        loop {
            let accepted = tokio::select! {
                _ = self.shutdown.cancelled() => break,
                accepted = self.listener.accept() => accepted,
            };
            let (tcp, remote) = match accepted {
                Ok(accepted) => {
                    backoff.recovered();
                    accepted
                }
                Err(e) => {
                    tokio::select! {
                        _ = self.shutdown.cancelled() => break,
                        _ = backoff.failed(&e) => continue,
                    }
                }
            };
            match self.slots.admit(remote.ip()) {
                Ok(slot) => {
                    connections.spawn(connection::serve(
                        tcp,
                        remote,
                        slot,
                        self.app.clone(),
                        self.timeouts,
                        self.shutdown.clone(),
                    ));
                }
                Err(refusal) => refuse(tcp, refusal),
            }
        }
        drop(self.listener);
        connections.close();
        connections.wait().await;
    }
}

/// Closes a connection that has no slot, after one non-blocking attempt to
/// tell it why: nothing here may wait on the peer. The answer is best
/// effort: the request is not read, and a socket closed with unread bytes
/// makes the kernel send a reset, which can reach the client before it has
/// read the 503. What has already arrived is drained (once, without
/// waiting) to make that less likely.
fn refuse(tcp: TcpStream, refusal: Refusal) {
    use std::io::{Read, Write};
    // A plain non-blocking socket: tokio's `try_read`/`try_write` on a
    // socket accepted a moment ago answer WouldBlock from its empty
    // readiness cache without trying the system call.
    let Ok(mut tcp) = tcp.into_std() else {
        return;
    };
    let mut unread = [0u8; 4096];
    let _ = tcp.read(&mut unread);
    metrics::counter!(names::CONNECTIONS_CLOSED, "reason" => refusal.label()).increment(1);
    let message = match refusal {
        Refusal::Full => "the hub has server.max_connections connections open",
        Refusal::AddressFull => {
            "the hub has server.max_connections_per_address connections open from this address"
        }
    };
    let body = serde_json::json!({
        "error": { "code": "too_many_connections", "message": message }
    })
    .to_string();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\nretry-after: 1\r\n\r\n{body}",
        body.len()
    );
    let _ = tcp.write(answer.as_bytes());
    // Send the FIN right behind the answer, then let the descriptor go.
    let _ = tcp.shutdown(std::net::Shutdown::Write);
}

/// Exponential back-off for accept failures that come from the process or
/// the system (no descriptors, no memory), logged once per episode.
struct Backoff {
    delay: Duration,
    failing: bool,
    suppressed: u64,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            delay: Self::FIRST,
            failing: false,
            suppressed: 0,
        }
    }
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(10);
    const MAX: Duration = Duration::from_secs(1);

    async fn failed(&mut self, e: &io::Error) {
        if is_per_connection(e) {
            // That one connection is gone; the next accept is fine.
            debug!(error = %e, "accept failed for one connection");
            return;
        }
        metrics::counter!(names::ACCEPT_ERRORS).increment(1);
        if self.failing {
            self.suppressed += 1;
        } else {
            self.failing = true;
            warn!(error = %e, "accept failed; backing off until it succeeds again");
        }
        tokio::time::sleep(self.delay).await;
        self.delay = (self.delay * 2).min(Self::MAX);
    }

    fn recovered(&mut self) {
        if self.failing {
            info!(
                failures = self.suppressed + 1,
                "accepting connections again"
            );
        }
        *self = Backoff::default();
    }
}

fn is_per_connection(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
    )
}
