//! The operator's command line as a newcomer meets it (issue 21 part 5):
//! commands find the hub's database through the configuration `serve`
//! reads and never create one; lists say when they are empty.

use std::path::Path;
use std::process::Command;

use crate::support::werewolf_manifest;

/// `switchboard ARGS` run in `folder`: success, stdout, stderr.
fn run_in(folder: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(args)
        .current_dir(folder)
        .env_remove("SWITCHBOARD_CONFIG")
        .output()
        .expect("run switchboard");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn entries(folder: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect()
}

#[test]
fn an_operator_command_pointed_at_no_database_says_where_it_looked_and_creates_nothing() {
    let folder = tempfile::tempdir().unwrap();
    let expected = std::fs::canonicalize(folder.path())
        .unwrap()
        .join("switchboard-data")
        .join("switchboard.db");
    for args in [
        &["agent", "register", "--name", "alice"][..],
        &["agent", "list"],
        &["app", "list"],
        &["keys", "list"],
        &["person", "create", "--name", "alex"],
        &["audit", "list"],
    ] {
        let (ok, out, err) = run_in(folder.path(), args);
        assert!(!ok, "{args:?} succeeded: {out}");
        assert!(!out.contains("key:"), "{args:?} printed a key: {out}");
        assert!(
            err.contains(&format!(
                "no switchboard database at {}",
                expected.display()
            )),
            "{args:?}: {err}"
        );
        assert!(
            err.contains("--config FILE") && err.contains("--data-dir"),
            "{err}"
        );
        assert!(err.contains("never create a database"), "{err}");
        assert!(
            entries(folder.path()).is_empty(),
            "{args:?} created {:?}",
            entries(folder.path())
        );
    }
    // --data-dir and --database-url are looked at the same way.
    let elsewhere = folder.path().join("elsewhere");
    let (ok, _, err) = run_in(
        folder.path(),
        &["agent", "list", "--data-dir", elsewhere.to_str().unwrap()],
    );
    assert!(!ok && err.contains("elsewhere/switchboard.db"), "{err}");
    let url = format!("sqlite://{}/other.db", folder.path().display());
    let (ok, _, err) = run_in(folder.path(), &["app", "list", "--database-url", &url]);
    assert!(
        !ok && err.contains("other.db") && err.contains("storage.database_url"),
        "{err}"
    );
    assert!(entries(folder.path()).is_empty());
}

#[test]
fn listen_is_an_option_of_serve_only() {
    let folder = tempfile::tempdir().unwrap();
    let (ok, _, err) = run_in(folder.path(), &["agent", "list", "--listen", "127.0.0.1:1"]);
    assert!(
        !ok && err.contains("unexpected argument '--listen'"),
        "{err}"
    );
    let (ok, out, _) = run_in(folder.path(), &["serve", "--help"]);
    assert!(ok && out.contains("--listen"), "{out}");
}

#[test]
fn lists_say_when_they_are_empty_and_name_what_they_hold() {
    let folder = tempfile::tempdir().unwrap();
    let data = folder.path().join("data");
    crate::support::migrate(&data, None);
    let with_data = |args: &[&str]| {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--data-dir", data.to_str().unwrap()]);
        let (ok, out, err) = run_in(folder.path(), &all);
        assert!(ok, "{args:?}: {err}");
        out
    };
    assert_eq!(
        with_data(&["keys", "list"]).trim(),
        "no webhook signing keys yet: `switchboard keys rotate` makes the first"
    );
    assert_eq!(
        with_data(&["agent", "list"]).trim(),
        "no agents in this database"
    );
    assert_eq!(
        with_data(&["app", "list"]).trim(),
        "no apps in this database"
    );

    let registered = with_data(&["agent", "register", "--name", "alice"]);
    let alice = registered
        .lines()
        .find_map(|l| l.strip_prefix("agent id:"))
        .unwrap()
        .trim()
        .to_string();
    let manifest = folder.path().join("werewolf.json");
    std::fs::write(&manifest, werewolf_manifest().to_string()).unwrap();
    let registered = with_data(&["app", "register", "--manifest", manifest.to_str().unwrap()]);
    let app = registered
        .lines()
        .find_map(|l| l.strip_prefix("app id:"))
        .unwrap()
        .trim()
        .to_string();

    let agents = with_data(&["agent", "list"]);
    let line = agents.lines().next().unwrap();
    assert!(line.starts_with(&format!("{alice} \"alice\" ")), "{agents}");
    assert!(line.ends_with(" owner -"), "{agents}");
    let apps = with_data(&["app", "list"]);
    assert!(apps.starts_with(&format!("{app} \"Werewolf\" ")), "{apps}");
    assert!(
        apps.trim_end().ends_with("active scopes events:subscribe"),
        "{apps}"
    );
    let after = with_data(&["agent", "list", "--after", &alice]);
    assert_eq!(after.trim(), format!("no agents after {alice}"));
    let page = with_data(&["agent", "list", "--limit", "1"]);
    assert!(
        page.contains(&format!("more after --after {alice}")),
        "{page}"
    );
}
