//! A hub-managed run's log reads while the run lives (issue 18's review):
//! what the child printed is on the run's row, readable over REST and by
//! `app runs --log`, before the run ends, not only at its exit.

use std::time::Duration;

use serde_json::json;
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

#[tokio::test]
async fn a_running_runs_log_shows_what_it_printed() {
    let hub = TestHub::start_with(
        TestHub::fast_options().env("SWITCHBOARD_HOSTED__CONTROL_INTERVAL_MS", "100"),
    )
    .await;
    let c = card_with(
        "talker",
        &["wait_for_message"],
        TALKER,
        &[],
        json!({}),
        None,
    );
    install_over_rest(&hub, &c).await;
    let run = start(&hub, "talker").await;
    let id = run["runId"].as_str().unwrap().to_string();
    let path = format!("/api/v1/runs/{id}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let live = loop {
        let (status, row) = admin(&hub, reqwest::Method::GET, &path, None).await;
        assert_eq!(status, 200, "{row}");
        assert_eq!(row["state"], "running", "the run waits: {row}");
        if row["log"].as_str().unwrap_or_default().contains("hello") {
            break row;
        }
        assert!(Instant::now() < deadline, "the log stayed empty: {row}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(live["log"], "hello from a live run\n");

    let (status, _) = admin(&hub, reqwest::Method::POST, &format!("{path}/stop"), None).await;
    assert_eq!(status, 202);
    let end = ended(&hub, &id).await;
    assert_eq!(end["reason"], "stopped", "{end}");
    assert_eq!(end["log"], "hello from a live run\n", "the whole log kept");
}
