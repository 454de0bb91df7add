//! The throwaway PostgreSQL of the test binary: the library's own (the one
//! `switchboard bench` uses), started on first use and stopped at exit. Each
//! test gets its own database. Missing server binaries fail the test with an
//! install hint; nothing is skipped.

use std::sync::Once;

extern "C" fn stop_server() {
    switchboard::bench::throwaway_pg::stop();
}

/// A new, empty database on the shared throwaway server.
pub async fn fresh_database() -> String {
    static AT_EXIT: Once = Once::new();
    AT_EXIT.call_once(|| unsafe {
        libc::atexit(stop_server);
    });
    switchboard::bench::throwaway_pg::database().await.unwrap_or_else(|e| {
        panic!(
            "{e}. The store contract tests need the PostgreSQL server binaries (initdb, pg_ctl, postgres): \
             on Debian, apt-get install postgresql"
        )
    })
}
