//! The benchmark tool works end to end (tiny sizes; no speed threshold).

/// `switchboard bench <args> --json F`, its report.
async fn bench_report(args: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("bench")
        .args(args)
        .arg("--json")
        .arg(&json)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

#[tokio::test]
async fn bench_smoke_run_reports_every_scenario() {
    let report = bench_report(&["--smoke", "--backend", "both"]).await;
    let scenarios: Vec<&str> = report["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["scenario"].as_str().unwrap())
        .collect();
    for s in ["ceiling", "fanout", "hook", "connections", "catchup"] {
        assert!(scenarios.contains(&s), "{s} missing from {scenarios:?}");
    }
    let fanouts: Vec<&serde_json::Value> = report["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["scenario"] == "fanout")
        .collect();
    assert_eq!(fanouts.len(), 2, "sqlite and postgres");
    for f in fanouts {
        assert!(f["results"]["hub_over_ceiling"].as_f64().unwrap() > 0.0);
        assert_eq!(
            f["results"]["deliveries"],
            f["params"]["n"].as_u64().unwrap() * f["params"]["messages"].as_u64().unwrap()
        );
        assert_eq!(f["params"]["inflight"], 16, "the default in-flight sends");
        // A saturated run has no schedule to read its latency against.
        assert!(f["results"].get("latency_p99_added_ms").is_none(), "{f}");
        assert!(f["results"]["db_bytes_per_delivery"].as_f64().unwrap() > 0.0);
        let wal = f["results"].get("wal_bytes_per_delivery");
        match f["params"]["backend"].as_str().unwrap() {
            "postgres" => assert!(wal.unwrap().as_f64().unwrap() > 0.0),
            _ => assert!(wal.is_none(), "SQLite's WAL is folded into its file size"),
        }
    }
    let layouts: Vec<&serde_json::Value> = report["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["scenario"] == "layout")
        .collect();
    assert_eq!(
        layouts.len(),
        20,
        "3 layouts written, today and B read once and A in 5 read variants, 2 backends"
    );
    for backend in ["sqlite", "postgres"] {
        let mut reads: Vec<&str> = layouts
            .iter()
            .filter(|l| l["params"]["backend"] == backend && l["params"]["layout"] == "thin_index")
            .filter_map(|l| l["params"]["read"].as_str())
            .collect();
        reads.sort_unstable();
        assert_eq!(
            reads,
            [
                "batched",
                "batched_raw",
                "batched_raw_cache_warm",
                "join",
                "join_raw"
            ],
            "{backend}"
        );
    }
    for l in layouts.iter().filter(|l| l["params"]["layout"] != "today") {
        let figure = if l["params"]["phase"] == "write" {
            "deliveries_per_second_over_today"
        } else {
            "events_per_second_over_today"
        };
        assert!(l["results"][figure].as_f64().unwrap() > 0.0, "{l}");
    }
    assert!(report["machine"]["cores"].as_u64().unwrap() >= 1);
}

/// `--fanout-rate` offers the sends on a schedule instead of a window.
#[tokio::test]
async fn fanout_at_an_offered_rate_delivers_every_message() {
    let report = bench_report(&[
        "--smoke",
        "--scenario",
        "fanout",
        "--backend",
        "sqlite",
        "--fanout-rate",
        "400",
    ])
    .await;
    let fanout: Vec<&serde_json::Value> = report["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["scenario"] == "fanout")
        .collect();
    assert_eq!(fanout.len(), 1);
    let f = fanout[0];
    assert_eq!(f["params"]["offered_messages_per_second"], 400);
    assert!(f["params"].get("inflight").is_none());
    assert_eq!(
        f["results"]["deliveries"],
        f["params"]["n"].as_u64().unwrap() * f["params"]["messages"].as_u64().unwrap()
    );
    assert!(f["results"]["latency_p99_ms"].as_f64().unwrap() > 0.0);
    // The ceiling ran on the same schedule, and the run reads against it.
    let ceiling: Vec<&serde_json::Value> = report["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["scenario"] == "ceiling")
        .collect();
    assert_eq!(ceiling.len(), 1);
    assert_eq!(ceiling[0]["params"]["offered_messages_per_second"], 400);
    for p in ["p50", "p99"] {
        let hub = f["results"][format!("latency_{p}_ms")].as_f64().unwrap();
        let floor = ceiling[0]["results"][format!("latency_{p}_ms")]
            .as_f64()
            .unwrap();
        assert_eq!(f["results"][format!("ceiling_latency_{p}_ms")], floor);
        let added = f["results"][format!("latency_{p}_added_ms")]
            .as_f64()
            .unwrap();
        assert!((added - (hub - floor)).abs() < 0.002, "{f}");
    }
}

/// The processes whose command line names `needle` (from /proc).
fn processes_naming(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            if String::from_utf8_lossy(&cmdline).contains(needle) {
                found.push(pid);
            }
        }
    }
    found
}

/// A bench interrupted while its throwaway PostgreSQL runs (a timeout's
/// SIGTERM) stops that server before it exits.
#[tokio::test]
async fn an_interrupted_bench_stops_its_postgres() {
    let mut bench = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["bench", "--scenario", "fanout", "--backend", "postgres"])
        // Runs paced to last minutes (the ceiling too): PostgreSQL starts
        // first, at once, and is still serving when the signal comes,
        // however loaded the machine.
        .args(["--fanout-sizes", "3", "--fanout-deliveries", "3000"])
        .args(["--fanout-rate", "5"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let needle = format!("switchboard-bench-pg-{}/data", bench.id().unwrap());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while processes_naming(&needle).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no PostgreSQL started"
        );
        assert!(
            bench.try_wait().unwrap().is_none(),
            "the bench ended before its PostgreSQL started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    unsafe { libc::kill(bench.id().unwrap() as i32, libc::SIGTERM) };
    let status = tokio::time::timeout(std::time::Duration::from_secs(60), bench.wait())
        .await
        .expect("the bench ends after SIGTERM")
        .unwrap();
    assert!(!status.success(), "an interrupted bench reports failure");
    assert!(
        processes_naming(&needle).is_empty(),
        "the throwaway PostgreSQL outlived the bench"
    );
}

#[tokio::test]
async fn bench_cluster_smoke_spreads_the_fanout_over_one_two_and_three_nodes() {
    let report = bench_report(&["--smoke", "--scenario", "cluster"]).await;
    let runs: Vec<&serde_json::Value> = report["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["scenario"] == "cluster")
        .collect();
    let nodes: Vec<u64> = runs
        .iter()
        .map(|e| e["params"]["nodes"].as_u64().unwrap())
        .collect();
    assert_eq!(nodes, [1, 2, 3], "one run per spread, in one report");
    assert_eq!(runs[0]["params"]["mode"], "single");
    for run in &runs {
        assert_eq!(
            run["results"]["deliveries"],
            run["params"]["n"].as_u64().unwrap() * run["params"]["messages"].as_u64().unwrap(),
            "every receiver got every message: {run}"
        );
        assert!(run["results"]["deliveries_per_second"].as_f64().unwrap() > 0.0);
    }
    for run in &runs[1..] {
        assert_eq!(run["params"]["mode"], "nats");
        assert!(run["results"]["over_one_node"].as_f64().unwrap() > 0.0);
    }
}
