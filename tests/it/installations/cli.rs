//! The CLI's lifecycle (ADR 0023 §3-§5), straight on a SQLite file: a
//! pending app installed with chosen scopes, its scopes set, suspended,
//! resumed, upgraded, uninstalled and installed again with a new key, each
//! action one line of `audit actions --app`.

use std::path::Path;
use std::process::{Command, Output};

use super::described;
use crate::support::werewolf_manifest;

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .env("SWITCHBOARD_REGISTRATION__INSTALL", "pending")
        .output()
        .unwrap()
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let out = run(dir, args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn failing(dir: &Path, args: &[&str]) -> String {
    let out = run(dir, args);
    assert!(!out.status.success(), "{args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).to_string()
}

fn field(out: &str, label: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(label))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| panic!("{label} missing in {out}"))
}

#[tokio::test]
async fn the_cli_runs_the_lifecycle_and_audits_each_action() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    crate::support::migrate(&data, None);
    let manifest = dir.path().join("m.json");
    std::fs::write(&manifest, werewolf_manifest().to_string()).unwrap();
    let next = dir.path().join("next.json");
    std::fs::write(&next, described("the second edition").to_string()).unwrap();
    let (m, n) = (manifest.to_str().unwrap(), next.to_str().unwrap());

    let out = ok(&data, &["app", "register", "--manifest", m]);
    let id = field(&out, "app id:");
    assert!(
        field(&out, "installation:").starts_with("none yet"),
        "{out}"
    );
    let err = failing(
        &data,
        &["app", "install", "--id", &id, "--scopes", "messages:write"],
    );
    assert!(
        err.contains("/scopes/0") && err.contains("not requested"),
        "{err}"
    );
    let err = failing(
        &data,
        &["app", "install", "--id", &id, "--scopes", "admin:all"],
    );
    assert!(err.contains("not a scope"), "{err}");
    let out = ok(&data, &["app", "install", "--id", &id, "--scopes", ""]);
    assert!(
        field(&out, "installation:").ends_with("(active, scopes: )"),
        "{out}"
    );
    assert!(!out.contains("app key:"), "the app has its key");
    let err = failing(&data, &["app", "install", "--id", &id]);
    assert!(err.contains("conflict") && err.contains("active"), "{err}");
    let out = ok(
        &data,
        &[
            "app",
            "set-scopes",
            "--id",
            &id,
            "--scopes",
            "events:subscribe",
        ],
    );
    assert!(field(&out, "installation:").ends_with("(active, scopes: events:subscribe)"));
    let out = ok(&data, &["app", "suspend", "--id", &id]);
    assert!(field(&out, "installation:").contains("(suspended,"));
    ok(&data, &["app", "resume", "--id", &id]);
    let out = ok(&data, &["app", "upgrade", "--id", &id, "--manifest", n]);
    assert_eq!(field(&out, "changed:"), "/description");
    assert_eq!(field(&out, "awaiting consent:"), "");
    ok(&data, &["app", "uninstall", "--id", &id]);
    let err = failing(&data, &["app", "suspend", "--id", &id]);
    assert!(err.contains("has no installation"), "{err}");
    let out = ok(&data, &["app", "install", "--id", &id]);
    assert!(
        !field(&out, "app key:").is_empty(),
        "a new key after the uninstall: {out}"
    );

    let lines = ok(&data, &["audit", "actions", "--app", &id]);
    let actions: Vec<&str> = lines
        .lines()
        .map(|l| l.split(' ').nth(4).unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "app.install",
            "app.scopes.update",
            "app.suspend",
            "app.resume",
            "app.upgrade",
            "app.uninstall",
            "app.install"
        ]
    );
    assert!(
        lines
            .lines()
            .all(|l| l.split(' ').nth(2) == Some("operator")),
        "{lines}"
    );
    assert!(!lines.contains("second edition"));
    let unknown = uuid::Uuid::now_v7().to_string();
    let err = failing(&data, &["app", "resume", "--id", &unknown]);
    assert!(err.contains("no app with id"), "{err}");
}
