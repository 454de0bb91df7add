//! Issue 18's hosted App Cards (ADR 0031): real packages signed with the
//! author CLI, real child processes (Python entries) under the per-run
//! broker, runs through `switchboard app run` and a real hub's REST.

mod beatless;
mod broker;
mod catalogue;
mod channel_mail;
mod game;
mod invites;
mod isolation;
mod limits;
mod live_log;
mod orphans;
mod persona;
mod policy;
mod primitives;
mod rooms;
mod rooms_join;
mod runs;
mod store;
mod store_connections;
mod store_invite_guards;
mod store_invite_rights;
mod store_invites;
mod store_profiles;
mod store_wakes;
mod suspend;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use tempfile::TempDir;

/// The entries' client: the seed's wire over fd 3, nothing more.
const SB_PY: &str = r#"import json, os, socket
_sock = socket.socket(fileno=int(os.environ["SWITCHBOARD_BROKER_FD"]))
_f = _sock.makefile("rwb")
TOKEN = os.environ["SWITCHBOARD_RUN_TOKEN"]
_n = 0

def raw(line):
    _f.write(line)
    _f.flush()
    return json.loads(_f.readline())

def call(method, params=None, token=None):
    global _n
    _n += 1
    req = {"token": TOKEN if token is None else token, "id": _n, "method": method, "params": params or {}}
    return raw(json.dumps(req).encode() + b"\n")

def text(method, params=None):
    r = call(method, params)
    assert r["ok"], r
    return json.loads(r["text"])

def out(**kw):
    print(json.dumps(kw), flush=True)
"#;

/// A signed package of one card in its own directory, with a data dir
/// for the hub's database.
pub struct Card {
    pub root: TempDir,
}

impl Card {
    pub fn dir(&self) -> PathBuf {
        self.root.path().join("pkg")
    }

    pub fn data(&self) -> PathBuf {
        self.root.path().join("data")
    }
}

pub(super) fn cli_sync(args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(args)
        .output()
        .expect("run the switchboard CLI");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Writes `main.py` (with `sb.py` beside it and `extra` files), an
/// app.json with `primitives`, and signs it with a new key.
pub fn card(id: &str, primitives: &[&str], main: &str, extra: &[(&str, &str)]) -> Card {
    card_with(id, primitives, main, extra, json!({}), None)
}

/// [`card`] with `members` set over the card's own (its version, its
/// `reply_policy`), signed with the key at `key` when given.
pub fn card_with(
    id: &str,
    primitives: &[&str],
    main: &str,
    extra: &[(&str, &str)],
    members: Value,
    key: Option<&Path>,
) -> Card {
    let root = tempfile::tempdir().expect("tempdir");
    // The card's own hub database, as an operator would make it.
    crate::support::migrate(&root.path().join("data"), None);
    let dir = root.path().join("pkg");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("main.py"), main).unwrap();
    std::fs::write(dir.join("sb.py"), SB_PY).unwrap();
    for (name, body) in extra {
        std::fs::write(dir.join(name), body).unwrap();
    }
    let mut doc = json!({
        "schema": "muretai/app/1",
        "id": id,
        "name": format!("Test {id}"),
        "tagline": "a hosted test app",
        "description": "An entry script under the broker.",
        "version": "1.0.0",
        "category": "utility",
        "primitives": primitives,
        "entry": {"scripts": ["main.py"], "integrity": {}},
        "coreChanges": false,
        "author": "did:key:placeholder"
    });
    for (k, v) in members.as_object().expect("members") {
        doc[k] = v.clone();
    }
    std::fs::write(dir.join("app.json"), doc.to_string()).unwrap();
    let key = match key {
        Some(k) => k.to_path_buf(),
        None => {
            let key = root.path().join("author.key");
            let (ok, _, err) = cli_sync(&["card", "keygen", "--out", key.to_str().unwrap()]);
            assert!(ok, "{err}");
            key
        }
    };
    let (ok, _, err) = cli_sync(&[
        "card",
        "sign",
        dir.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    Card { root }
}

/// `card install DIR` into `data`, migrated first (operator commands never
/// create a database; migrating one that exists changes nothing).
pub fn install(card: &Card, data: &Path) {
    crate::support::migrate(data, None);
    let (ok, out, err) = cli_sync(&[
        "card",
        "install",
        card.dir().to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    assert!(ok && out.contains("installed"), "{out}{err}");
}

/// What a finished `app run` showed.
pub struct Ran {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    /// The JSON lines the entry printed.
    pub fn lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The first printed line with `key`.
    pub fn line(&self, key: &str) -> Value {
        self.lines()
            .into_iter()
            .find(|l| l.get(key).is_some())
            .unwrap_or_else(|| panic!("no line with {key:?}:\n{}\n{}", self.stdout, self.stderr))
    }

    /// The run's end line (`run ID CARD VERSION STATE ...`) on stderr.
    pub fn end(&self) -> String {
        self.stderr
            .lines()
            .rfind(|l| l.starts_with("run "))
            .unwrap_or_else(|| panic!("no end line: {}", self.stderr))
            .to_string()
    }
}

/// The `app run` command for `target` on `data`, with `env` set.
pub fn run_command(target: &str, data: &Path, env: &[(&str, &str)]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"));
    cmd.args(["app", "run", target, "--data-dir", data.to_str().unwrap()])
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// `app run TARGET` to its end (bounded: a run that never ends fails the
/// test, not the suite).
pub async fn run(target: &str, data: &Path, env: &[(&str, &str)]) -> Ran {
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        run_command(target, data, env).output(),
    )
    .await
    .expect("the run ends")
    .expect("run the CLI");
    Ran {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}
