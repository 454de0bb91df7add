//! The bad-input matrix (issue 22 part 3): every row is one input a client
//! can send and the exact answer it gets (the error object, the REST status
//! and body, or the close code), and whether the connection survives it,
//! which the row asserts with a good call on the same socket afterwards.
//!
//! - `frames`: WebSocket frames (not JSON, batches, every id form, nesting,
//!   sizes, binary and broken frames, floods, answers to ids never sent);
//! - `params`: every catalogue method's params, driven from
//!   `protocol::catalogue()` and each params type's schema;
//! - `rest`: every REST route's bodies, headers, queries and auth;
//! - `manifests_cards`: app manifests and App Cards.
//!
//! After every row `Health::check` reads what the hub logged since the row
//! began and its `/metrics`: no panic, no ERROR line and no 5xx (HTTP
//! status or `InternalError` answer) for a client's fault.
//!
//! Backends: frames and params never reach a backend-specific path before
//! they are refused (parsing and decoding run before any store call), so
//! they run on SQLite only. The REST rows that read the store (a missing
//! id's 404, a body checked against stored rows) run on SQLite and on a
//! throwaway PostgreSQL. One hub serves each surface's rows per backend.

mod frames;
mod manifests_cards;
mod params;
mod rest;

use crate::support::hub::Options;
use crate::support::TestHub;

/// The matrix's hub: a rate limit and refused-key budget no row runs
/// into, so each row meets the check it is about and nothing else.
pub fn options() -> Options {
    TestHub::fast_options()
        .env(
            "SWITCHBOARD_GATEWAY__FAILED_CONNECTS_PER_ADDRESS",
            1_000_000,
        )
        .env(
            "SWITCHBOARD_GATEWAY__FAILED_CONNECTS_REFILL_PER_MINUTE",
            1_000_000,
        )
        .env(
            "SWITCHBOARD_GATEWAY__MAX_FAILED_CONNECTS_PER_SOCKET",
            1_000_000,
        )
}

/// Reads the hub's log and metrics after each row.
pub struct Health {
    seen: usize,
}

impl Health {
    pub fn new(hub: &TestHub) -> Health {
        Health {
            seen: hub.log_since(0).1,
        }
    }

    /// The faults a row left: lines the hub logged at ERROR or about a
    /// panic since the last check, and any 5xx or internal answer counted.
    pub async fn faults(&mut self, hub: &TestHub, row: &str) -> Vec<String> {
        let (new, end) = hub.log_since(self.seen);
        self.seen = end;
        let mut faults: Vec<String> = new
            .lines()
            .filter(|l| l.contains("panicked") || l.contains("ERROR"))
            .map(|l| format!("{row}: the hub logged {l}"))
            .collect();
        let counted = [
            ("switchboard_http_requests_total", "status=\"5"),
            ("switchboard_rpc_calls_total", "outcome=\"InternalError\""),
            ("switchboard_rpc_handler_panics_total", ""),
        ];
        for (name, labels) in counted {
            let n = hub.metric(name, labels).await;
            if n != 0.0 {
                faults.push(format!("{row}: {name}{{{labels}}} is {n}"));
            }
        }
        faults
    }
}

/// Fails listing every row whose answer differed, so one run shows them all.
pub fn assert_no_failures(surface: &str, rows: usize, failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{surface}: {} of {rows} rows failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Rows are data: counting them needs no hub.
#[test]
fn the_matrix_has_at_least_120_rows() {
    let counts = [
        ("frames", frames::row_count()),
        ("params", params::rows().len()),
        ("rest", rest::row_count()),
        ("manifests and cards", manifests_cards::row_count()),
    ];
    let total: usize = counts.iter().map(|(_, n)| n).sum();
    eprintln!("bad-input matrix: {total} rows: {counts:?}");
    for (surface, n) in counts {
        assert!(n > 0, "{surface} has no rows");
    }
    assert!(total >= 120, "{total} rows: {counts:?}");
}
