//! The README's first session, run as written: its commands, taken from
//! between the `first-session` markers, in one bash shell against a real
//! hub. Only what names this machine changes: the build step (cargo test
//! built the binaries already), the binaries' folder and the port.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

const BEGIN: &str = "<!-- first-session -->";
const END: &str = "<!-- /first-session -->";

/// The session's commands, fences and blank lines left out.
fn first_session() -> Vec<String> {
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let text = std::fs::read_to_string(readme).expect("README.md");
    let start = text
        .find(BEGIN)
        .expect("the README marks its first session")
        + BEGIN.len();
    let end = start
        + text[start..]
            .find(END)
            .expect("the first session's end marker");
    text[start..end]
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty() && !l.starts_with("```"))
        .map(str::to_string)
        .collect()
}

/// Replaces `from` in the session, which must hold it.
fn replace(lines: &mut [String], from: &str, to: &str) {
    let mut found = false;
    for line in lines.iter_mut() {
        if line.contains(from) {
            *line = line.replace(from, to);
            found = true;
        }
    }
    assert!(found, "the first session no longer says {from:?}");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The folder cargo builds examples into, beside the hub's binary.
fn examples_dir() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_switchboard"));
    let dir = bin.parent().unwrap().join("examples");
    assert!(
        dir.join("werewolf").is_file(),
        "{} is missing: `cargo test` builds it (or `cargo build --example werewolf`)",
        dir.join("werewolf").display()
    );
    dir
}

#[tokio::test]
async fn the_readme_first_session_runs_as_written() {
    let mut lines = first_session();
    let builds: Vec<_> = lines
        .iter()
        .filter(|l| l.starts_with("cargo build"))
        .cloned()
        .collect();
    assert_eq!(builds.len(), 1, "one build step: {builds:?}");
    lines.retain(|l| !l.starts_with("cargo build"));
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_switchboard"))
        .parent()
        .unwrap();
    replace(&mut lines, "$PWD/target/release", bin_dir.to_str().unwrap());
    let examples = examples_dir();
    replace(
        &mut lines,
        "./target/release/examples/",
        &format!("{}/", examples.display()),
    );
    replace(
        &mut lines,
        "127.0.0.1:7420",
        &format!("127.0.0.1:{}", free_port()),
    );

    let script = format!(
        "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\nset -x\n{}\n",
        lines.join("\n")
    );
    let folder = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new("bash");
    child
        .arg("-c")
        .arg(&script)
        .current_dir(folder.path())
        .env_remove("SWITCHBOARD_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Its own process group, so a hung session takes its hub down with it.
    child.as_std_mut().process_group(0);
    let child = child.spawn().expect("bash");
    let group = child.id().expect("running") as i32;
    let out = match tokio::time::timeout(Duration::from_secs(240), child.wait_with_output()).await {
        Ok(out) => out.unwrap(),
        Err(_) => {
            unsafe { libc::kill(-group, libc::SIGKILL) };
            panic!("the first session did not finish within 240 s");
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let hub_log = std::fs::read_to_string(folder.path().join("hub.log")).unwrap_or_default();
    assert!(
        out.status.success(),
        "a command failed (the last `+` line):\n{stderr}\nstdout:\n{stdout}\nhub log:\n{hub_log}"
    );

    let lines: Vec<&str> = stdout.lines().collect();
    for name in ["\"alice\"", "\"bob\""] {
        assert!(
            lines
                .iter()
                .any(|l| l.contains(name) && l.ends_with("owner -")),
            "agent list names {name}: {stdout}"
        );
    }
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("{\"grantId\""))
            .count(),
        2,
        "{stdout}"
    );
    assert!(
        lines.contains(&r#"{"state":"forwarded","recipients":1}"#),
        "{stdout}"
    );
    assert!(
        lines.contains(&"hello bob"),
        "bob's stream holds alice's message: {stdout}"
    );
    let lynched = lines
        .iter()
        .find_map(|l| l.strip_prefix("lynched:"))
        .unwrap_or_else(|| panic!("the round's end: {stdout}"));
    assert!(
        lynched.trim().starts_with("player-"),
        "names, not ids: {stdout}"
    );
    let wolves = lines.iter().find(|l| l.starts_with("wolves:")).unwrap();
    assert!(wolves.contains("[\"player-"), "names, not ids: {wolves}");
    let app = lines
        .iter()
        .find(|l| l.contains("\"Werewolf\""))
        .unwrap_or_else(|| panic!("app list names the Werewolf app: {stdout}"));
    assert!(app.contains(" active scopes "), "{app}");
    // The operator token was in the environment all along, never in a log.
    let token_line = stderr
        .lines()
        .find(|l| l.contains("export SWITCHBOARD_ADMIN__TOKEN=op-"))
        .expect("the token's export is traced");
    let token = token_line.rsplit("op-").next().unwrap().trim_matches('\'');
    assert!(token.len() == 32, "{token_line}");
    assert!(
        !hub_log.contains(token),
        "the operator token reached the hub's log"
    );
}
