//! The chaos run's short form (issue 22 part 2): `switchboard bench
//! --scenario chaos` with a few SIGKILLs and some tens of dropped sockets,
//! on each backend. The bench itself waits on events (acknowledged sends
//! between kills, the slow-consumer counter, every receiver caught up to
//! its log's end) under deadlines; this test asserts its figures.

use std::time::Duration;

use serde_json::Value;

/// The bench's own deadline; the test waits a little longer, then stops it
/// with SIGTERM so it stops what it started.
const BENCH_DEADLINE_SECONDS: u64 = 120;

async fn chaos(extra: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("chaos.json");
    let (out, err) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut bench = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["bench", "--scenario", "chaos"])
        .args(["--chaos-drops", "40", "--chaos-kills", "3"])
        .args(["--chaos-acks-between-kills", "30"])
        .arg("--chaos-deadline-seconds")
        .arg(BENCH_DEADLINE_SECONDS.to_string())
        .args(extra)
        .arg("--json")
        .arg(&json)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let waited = tokio::time::timeout(
        Duration::from_secs(BENCH_DEADLINE_SECONDS + 60),
        bench.wait(),
    )
    .await;
    let status = match waited {
        Ok(status) => status.unwrap(),
        Err(_) => {
            // SIGTERM first: the bench then stops its hub and PostgreSQL.
            unsafe { libc::kill(bench.id().unwrap() as i32, libc::SIGTERM) };
            let _ = tokio::time::timeout(Duration::from_secs(60), bench.wait()).await;
            panic!("the chaos bench outlived its own deadline");
        }
    };
    let stdout = std::fs::read_to_string(&out).unwrap_or_default();
    assert!(
        status.success(),
        "the chaos bench failed:\n{stdout}\n{}",
        std::fs::read_to_string(&err).unwrap_or_default()
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let entries = report["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{report}");
    assert_eq!(entries[0]["scenario"], "chaos");
    eprintln!("{stdout}");
    entries[0]["results"].clone()
}

fn assert_promises_kept(r: &Value) {
    for zero in [
        "events_lost",
        "duplicates_per_socket",
        "gaps_per_socket",
        "double_verdicts",
        "blocked_but_delivered",
    ] {
        assert_eq!(r[zero], 0, "{zero}: {r}");
    }
    assert!(r["socket_drops"].as_u64().unwrap() >= 40, "{r}");
    assert_eq!(r["hub_kills"], 3, "{r}");
    assert_eq!(r["slow_consumer_close_code"], 4008, "{r}");
    // The run did something worth checking: sends acknowledged before and
    // after the kills, each owed to several receivers, and resumes that
    // replayed what a dropped socket had already delivered.
    assert!(r["acked_sends"].as_u64().unwrap() >= 90, "{r}");
    let expected = r["expected_deliveries"].as_u64().unwrap();
    assert!(
        expected >= 3 * r["acked_sends"].as_u64().unwrap() / 2,
        "{r}"
    );
    assert!(r["events_received"].as_u64().unwrap() >= expected, "{r}");
    assert!(r["longest_recovery_ms"].as_f64().unwrap() > 0.0, "{r}");
}

#[tokio::test]
async fn a_short_chaos_run_loses_nothing_and_applies_no_verdict_twice_on_sqlite() {
    let r = chaos(&["--backend", "sqlite"]).await;
    assert_promises_kept(&r);
}

#[tokio::test]
async fn a_short_chaos_run_loses_nothing_and_applies_no_verdict_twice_on_postgres() {
    let url = crate::support::pg::fresh_database().await;
    let r = chaos(&["--backend", "postgres", "--postgres-url", &url]).await;
    assert_promises_kept(&r);
}
