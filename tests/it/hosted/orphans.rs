//! The orphan sweep (ADR 0031 §3): a hub SIGKILLed with a live run leaves
//! its row `running`; the restarted hub ends it `owner_lost` once its
//! owner's heartbeat is stale, while a run of a live second process (the
//! CLI's `app run` on the same database) keeps running. The killed hub's
//! child dies with it (no process outlives its run).

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::time::Instant;

use super::{card, install, run_command};
use crate::support::hub::{Options, ADMIN_TOKEN};
use crate::support::TestHub;

/// Writes its pid and working directory (its copy) into its copy, then
/// waits for mail forever.
const SLEEPER: &str = r#"
import os
from sb import call
with open("pid", "w") as f:
    f.write(str(os.getpid()) + " " + os.getcwd())
while True:
    call("wait_for_message", {"timeout": 30})
"#;

const TIMING: [(&str, &str); 2] = [
    ("SWITCHBOARD_HOSTED__CONTROL_INTERVAL_MS", "100"),
    ("SWITCHBOARD_HOSTED__ORPHAN_AFTER_MS", "1000"),
];

fn options(data: &Path, work: &Path) -> Options {
    let mut o = TestHub::fast_options();
    for (k, v) in TIMING {
        o = o.env(k, v);
    }
    o = o.env("SWITCHBOARD_HOSTED__WORK_DIR", work.display());
    o.dir = Some(data.to_path_buf());
    o
}

async fn get_run(hub: &TestHub, id: &str) -> Value {
    let r = hub
        .http
        .get(format!("{}/api/v1/runs/{id}", hub.base))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .expect("request");
    assert_eq!(r.status().as_u16(), 200);
    r.json().await.expect("a run")
}

/// Reads the run's row until `done` holds, within a deadline.
async fn until(hub: &TestHub, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let run = get_run(hub, id).await;
        if done(&run) {
            return run;
        }
        assert!(Instant::now() < deadline, "the run never got there: {run}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The pid the entry wrote into its copy under `work`, and that copy: the
/// directory the entry ran in, as the entry itself found it.
async fn entry_pid(work: &Path) -> (i32, std::path::PathBuf) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        for dir in std::fs::read_dir(work).unwrap().flatten() {
            if let Ok(pid) = std::fs::read_to_string(dir.path().join("pid")) {
                if let Some((pid, cwd)) = pid.trim().split_once(' ') {
                    if let Ok(pid) = pid.parse() {
                        return (pid, std::path::PathBuf::from(cwd));
                    }
                }
            }
        }
        assert!(Instant::now() < deadline, "the entry wrote no pid");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Alive and not a zombie.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit(')').next().map(|r| r.trim().to_string()))
        .is_some_and(|r| !r.starts_with('Z'))
}

#[tokio::test]
async fn a_killed_hubs_run_is_swept_owner_lost_and_a_live_processs_run_is_kept() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let (hub_work, cli_work) = (root.path().join("hub-work"), root.path().join("cli-work"));
    std::fs::create_dir_all(&hub_work).unwrap();
    std::fs::create_dir_all(&cli_work).unwrap();
    let c = card("sleeper", &["wait_for_message"], SLEEPER, &[]);
    install(&c, &data);

    let mut first = TestHub::start_with(options(&data, &hub_work)).await;
    let r = first
        .http
        .post(format!("{}/api/v1/cards/sleeper/runs", first.base))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let orphan: Value = r.json().await.unwrap();
    let orphan_id = orphan["runId"].as_str().unwrap().to_string();
    let (orphan_pid, orphan_copy) = entry_pid(&hub_work).await;
    assert_eq!(
        orphan_copy.canonicalize().unwrap(),
        hub_work
            .join(format!("run-{orphan_id}"))
            .canonicalize()
            .unwrap(),
        "the copy the entry ran in is named by its run"
    );

    // A second live process on the same database: the CLI's run.
    let mut env: Vec<(&str, &str)> = TIMING.to_vec();
    let cli_work_text = cli_work.display().to_string();
    env.push(("SWITCHBOARD_HOSTED__WORK_DIR", &cli_work_text));
    let mut cli = run_command("sleeper", &data, &env)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("app run");
    let mut cli_lines = BufReader::new(cli.stderr.take().unwrap()).lines();
    let started = tokio::time::timeout(Duration::from_secs(60), cli_lines.next_line())
        .await
        .expect("the CLI run starts")
        .unwrap()
        .expect("its start line");
    let kept_id = started.split(' ').nth(1).unwrap().to_string();
    assert!(started.contains(" running "), "{started}");
    let (_, cli_copy) = entry_pid(&cli_work).await;

    first.signal(libc::SIGKILL);
    first.wait_exit(Duration::from_secs(30)).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(orphan_pid) {
        assert!(
            Instant::now() < deadline,
            "the killed hub's child outlived it"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let second = TestHub::start_with(options(&data, &hub_work)).await;
    let swept = until(&second, &orphan_id, |r| r["state"] != "running").await;
    assert_eq!(
        (swept["state"].clone(), swept["reason"].clone()),
        (json!("failed"), json!("owner_lost")),
        "{swept}"
    );
    assert!(swept["endedAt"].is_string(), "{swept}");
    // The sweep removes the orphan's copy (right after its row's end).
    let deadline = Instant::now() + Duration::from_secs(30);
    while orphan_copy.exists() {
        assert!(Instant::now() < deadline, "the orphan's copy stays");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(cli_copy.is_dir(), "the live CLI run's copy is kept");
    assert_eq!(std::fs::read_dir(&cli_work).unwrap().count(), 1);
    // Swept after the sweep that caught the orphan: the CLI's run beats.
    let kept = get_run(&second, &kept_id).await;
    assert_eq!(kept["state"], "running", "{kept}");
    let log = second.log();
    let sweeps: Vec<&str> = log.lines().filter(|l| l.contains("owner_lost")).collect();
    assert!(sweeps.iter().any(|l| l.contains(&orphan_id)), "{log}");
    assert!(!sweeps.iter().any(|l| l.contains(&kept_id)), "{log}");

    // Stopped through its row, the CLI's run ends as a stop, not a sweep.
    let r = second
        .http
        .post(format!("{}/api/v1/runs/{kept_id}/stop", second.base))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let status = tokio::time::timeout(Duration::from_secs(60), cli.wait())
        .await
        .expect("the CLI run ends")
        .unwrap();
    assert!(!status.success());
    let mut rest = Vec::new();
    while let Ok(Some(l)) = cli_lines.next_line().await {
        rest.push(l);
    }
    let end = rest
        .iter()
        .rfind(|l| l.starts_with("run "))
        .expect("an end line");
    assert!(
        end.contains(" failed ") && end.contains("reason=stopped"),
        "{end}"
    );
}
