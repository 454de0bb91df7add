//! A hub-managed run's log reads while the run lives (issue 18's review):
//! what the child printed is on the run's row, readable over REST and by
//! `app runs --log`, before the run ends, not only at its exit. The live
//! copy is the log's last `hosted.live_log_max_bytes`; the ended run keeps
//! its whole log.

use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use super::card_with;
use super::runs::{admin, ended, install_over_rest, start};
use crate::support::TestHub;

/// Prints one line, then waits for mail until stopped.
const TALKER: &str = r#"
from sb import call
print("hello from a live run")
while True:
    call("wait_for_message", {"timeout": 30})
"#;

/// Prints 300 numbered lines of 10 bytes and `done`, then waits for mail
/// until stopped.
const CHATTY: &str = r#"
from sb import call
for i in range(300):
    print("line %04d" % i)
print("done")
while True:
    call("wait_for_message", {"timeout": 30})
"#;

/// What [`CHATTY`] prints.
fn chatty_output() -> String {
    let mut s: String = (0..300).map(|i| format!("line {i:04}\n")).collect();
    s.push_str("done\n");
    s
}

/// Starts the card's only run on a hub beating every 100 ms; answers the
/// hub and the run's id.
async fn running(id: &str, main: &str, env: &[(&str, &str)]) -> (TestHub, String) {
    let mut options = TestHub::fast_options().env("SWITCHBOARD_HOSTED__CONTROL_INTERVAL_MS", "100");
    for (k, v) in env {
        options = options.env(k, v);
    }
    let hub = TestHub::start_with(options).await;
    let c = card_with(id, &["wait_for_message"], main, &[], json!({}), None);
    install_over_rest(&hub, &c).await;
    let run = start(&hub, id).await;
    let run_id = run["runId"].as_str().unwrap().to_string();
    (hub, run_id)
}

/// Reads the running run until its live log satisfies `done`, checking
/// every read with `each`; answers the row.
async fn live_until(
    hub: &TestHub,
    run_id: &str,
    each: impl Fn(&str),
    done: impl Fn(&str) -> bool,
) -> Value {
    let path = format!("/api/v1/runs/{run_id}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, row) = admin(hub, reqwest::Method::GET, &path, None).await;
        assert_eq!(status, 200, "{row}");
        assert_eq!(row["state"], "running", "the run waits: {row}");
        let log = row["log"].as_str().unwrap_or_default();
        each(log);
        if done(log) {
            return row;
        }
        assert!(Instant::now() < deadline, "the live log never came: {row}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Stops the run over REST and answers its ended row.
async fn stopped(hub: &TestHub, run_id: &str) -> Value {
    let path = format!("/api/v1/runs/{run_id}/stop");
    let (status, _) = admin(hub, reqwest::Method::POST, &path, None).await;
    assert_eq!(status, 202);
    let end = ended(hub, run_id).await;
    assert_eq!(end["reason"], "stopped", "{end}");
    end
}

#[tokio::test]
async fn a_running_runs_log_shows_what_it_printed() {
    let (hub, id) = running("talker", TALKER, &[]).await;
    let live = live_until(&hub, &id, |_| {}, |log| log.contains("hello")).await;
    assert_eq!(live["log"], "hello from a live run\n");

    let end = stopped(&hub, &id).await;
    assert_eq!(end["log"], "hello from a live run\n", "the whole log kept");
}

#[tokio::test]
async fn a_live_log_keeps_its_last_bytes_and_the_ended_run_all_of_them() {
    let max = 1024;
    let (hub, id) = running(
        "chatty",
        CHATTY,
        &[("SWITCHBOARD_HOSTED__LIVE_LOG_MAX_BYTES", &max.to_string())],
    )
    .await;
    let full = chatty_output();
    assert!(full.len() > 2 * max, "the output passes the live cap");
    let capped = |log: &str| assert!(log.len() <= max, "{} bytes live", log.len());
    let live = live_until(&hub, &id, capped, |log| log.ends_with("done\n")).await;
    // All of it printed, the row holds its last `max` bytes.
    assert_eq!(live["log"], full[full.len() - max..], "the live tail");

    let end = stopped(&hub, &id).await;
    assert_eq!(end["log"], full, "the ended run keeps its whole log");
}
