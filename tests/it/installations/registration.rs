//! Registration and installation (ADR 0023 §3): with `registration.install
//! = "auto"` (the default) the answer carries the app's active installation,
//! granted what its manifest requests, and the one audit row of it; with
//! `"pending"` there is no installation at all, on the route and on the CLI.

use serde_json::{json, Value};
use uuid::Uuid;

use crate::support::hub::Options;
use crate::support::legacy_db::LegacyDb;
use crate::support::{pg, werewolf_manifest, TestHub};

/// A hub on a fresh database of `backend`, with `env`, and a raw
/// connection to that database.
async fn hub_on(backend: &str, env: &[(&str, &str)]) -> (TestHub, LegacyDb, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut options = match backend {
        "sqlite" => Options {
            dir: Some(dir.path().to_path_buf()),
            ..TestHub::fast_options()
        },
        _ => Options {
            database_url: Some(pg::fresh_database().await),
            ..TestHub::fast_options()
        },
    };
    for (k, v) in env {
        options = options.env(k, v);
    }
    let url = options.database_url.clone();
    let hub = TestHub::start_with(options).await;
    let raw = match url {
        None => LegacyDb::open_sqlite(&dir.path().join("switchboard.db")).await,
        Some(url) => LegacyDb::open_postgres(&url).await,
    };
    (hub, raw, dir)
}

async fn register(hub: &TestHub, idempotency: Option<&str>) -> (u16, bool, Value) {
    let mut request = hub
        .http
        .post(format!("{}/api/v1/apps/register", hub.base))
        .json(&json!({ "manifest": werewolf_manifest() }));
    if let Some(key) = idempotency {
        request = request.header("Idempotency-Key", key);
    }
    let r = request.send().await.unwrap();
    let replayed = r.headers().get("idempotent-replayed").is_some();
    (r.status().as_u16(), replayed, r.json().await.unwrap())
}

/// `what` of the stored rows, one text per row.
async fn stored(raw: &LegacyDb, sql: &str) -> Vec<String> {
    raw.texts(sql, sql, None).await
}

async fn auto_installs(backend: &str) {
    let (hub, raw, _dir) = hub_on(backend, &[]).await;
    let (status, _, body) = register(&hub, Some("register-once")).await;
    assert_eq!(status, 201, "{body}");
    let app: Uuid = body["appId"].as_str().unwrap().parse().unwrap();
    let installation = &body["installation"];
    let id: Uuid = installation["installationId"]
        .as_str()
        .unwrap_or_else(|| panic!("{body}"))
        .parse()
        .unwrap();
    let scopes = json!(["events:subscribe"]);
    assert_eq!(
        installation,
        &json!({
            "installationId": id,
            "state": "active",
            "scopes": {"requested": scopes, "granted": scopes, "effective": scopes},
        })
    );
    // A replay carries the same installation, and no key.
    let (status, replayed, again) = register(&hub, Some("register-once")).await;
    assert_eq!((status, replayed), (201, true), "{again}");
    assert_eq!(again["installation"], *installation);
    assert_eq!(again["appId"], body["appId"]);
    assert!(again.get("appKey").is_none());
    assert_eq!(
        stored(
            &raw,
            "SELECT CAST(id AS TEXT) || ' ' || CAST(app_id AS TEXT) || ' ' || state || ' ' || granted_scopes AS t FROM installations"
        )
        .await,
        [format!("{id} {app} active events:subscribe")]
    );
    assert_eq!(
        stored(
            &raw,
            "SELECT action || ' ' || actor_kind || ' ' || CAST(actor_id AS TEXT) || ' ' || scopes_after AS t FROM audit_actions"
        )
        .await,
        [format!("app.install app {app} events:subscribe")],
        "one audit row, the app registering itself"
    );
}

async fn pending_installs_nothing(backend: &str) {
    let env = [("SWITCHBOARD_REGISTRATION__INSTALL", "pending")];
    let (hub, raw, _dir) = hub_on(backend, &env).await;
    let (status, _, body) = register(&hub, None).await;
    assert_eq!(status, 201, "{body}");
    assert!(
        body.get("installation").is_none(),
        "absent, not null: {body}"
    );
    assert!(body["appKey"].is_string());
    for table in ["installations", "audit_actions"] {
        let sql = format!("SELECT CAST(COUNT(*) AS TEXT) AS t FROM {table}");
        assert_eq!(stored(&raw, &sql).await, ["0"], "{table}");
    }
}

#[tokio::test]
async fn sqlite_registration_installs_and_answers_the_installation() {
    auto_installs("sqlite").await;
}

#[tokio::test]
async fn postgres_registration_installs_and_answers_the_installation() {
    auto_installs("postgres").await;
}

#[tokio::test]
async fn sqlite_pending_registration_installs_nothing() {
    pending_installs_nothing("sqlite").await;
}

#[tokio::test]
async fn postgres_pending_registration_installs_nothing() {
    pending_installs_nothing("postgres").await;
}

/// The CLI's `app register` follows `registration.install` too.
#[tokio::test]
async fn the_cli_registration_follows_registration_install() {
    let dir = tempfile::tempdir().unwrap();
    crate::support::migrate(dir.path(), None);
    let manifest = dir.path().join("manifest.json");
    std::fs::write(&manifest, werewolf_manifest().to_string()).unwrap();
    let register = |install: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args(["app", "register", "--manifest", manifest.to_str().unwrap()])
            .arg("--data-dir")
            .arg(dir.path())
            .env("SWITCHBOARD_REGISTRATION__INSTALL", install)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let line = |out: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix("installation:"))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("no installation line in {out}"))
    };
    let auto = line(&register("auto"));
    let (id, rest) = auto.split_once(' ').unwrap();
    id.parse::<Uuid>().unwrap();
    assert_eq!(rest, "(active, scopes: events:subscribe)");
    assert!(line(&register("pending")).starts_with("none yet"));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["app", "register", "--manifest", manifest.to_str().unwrap()])
        .arg("--data-dir")
        .arg(dir.path())
        .env("SWITCHBOARD_REGISTRATION__INSTALL", "later")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr).to_lowercase();
    assert!(stderr.contains("registration.install"), "{stderr}");
}
