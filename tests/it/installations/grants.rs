//! Issue 15's leftovers (ADR 0023 §6, §11, "Leftovers"): a grant to an app
//! without a live installation is refused 409 `app_not_installed`; every
//! grant put or delete on an app is one `grant.manage` audit row naming its
//! caller; a suspended or pending app's key routes answer 403 like its
//! other REST calls; `app/installation/changed` is written only while the
//! app may receive it.

use reqwest::Method;
use serde_json::{json, Value};

use super::{app_events, both, call, described, operator};
use crate::support::hub::{Options, ADMIN_TOKEN};
use crate::support::world::{grant, on_space, person, principal, space};
use crate::support::{werewolf_manifest, TestHub};

both!(
    a_grant_to_an_app_needs_a_live_installation_and_is_audited,
    a_suspended_or_pending_apps_key_routes_answer_403,
    installation_changed_is_written_only_while_the_app_receives_events,
);

fn put_body(app: &str, space: uuid::Uuid, level: &str) -> Value {
    json!({ "subject": {"principalId": app}, "place": {"spaceId": space}, "level": level })
}

async fn put(hub: &TestHub, token: &str, body: &Value) -> (u16, Value) {
    call(hub, Method::POST, "/api/v1/grants", token, Some(body)).await
}

fn assert_not_installed(status: u16, body: &Value) {
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], json!("app_not_installed"), "{body}");
    assert_eq!(
        body["error"]["details"][0]["pointer"],
        json!("/subject/principalId"),
        "{body}"
    );
}

/// The `grant.manage` rows of the audit of owner actions, for `app`.
async fn grant_rows(hub: &TestHub, app: &str) -> Vec<Value> {
    let path = format!("/api/v1/audit/actions?appId={app}&limit=100");
    let (status, page) = call(hub, Method::GET, &path, ADMIN_TOKEN, None).await;
    assert_eq!(status, 200, "{page}");
    page["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["action"] == json!("grant.manage"))
        .cloned()
        .collect()
}

/// The app's grants on `space`, by id.
async fn app_grants(hub: &TestHub, app: &str, space: uuid::Uuid) -> Vec<Value> {
    let path = format!("/api/v1/grants?spaceId={space}");
    let (status, body) = call(hub, Method::GET, &path, ADMIN_TOKEN, None).await;
    assert_eq!(status, 200, "{body}");
    body["grants"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["subject"]["principalId"] == json!(app))
        .cloned()
        .collect()
}

async fn a_grant_to_an_app_needs_a_live_installation_and_is_audited(options: Options) {
    let hub =
        TestHub::start_with(options.env("SWITCHBOARD_REGISTRATION__INSTALL", "pending")).await;
    let (app, _key) = hub.register_app(&werewolf_manifest()).await;
    let lobby = space(&hub, "Lobby").await;
    let (status, body) = put(&hub, ADMIN_TOKEN, &put_body(&app, lobby, "write")).await;
    assert_not_installed(status, &body);
    assert!(app_grants(&hub, &app, lobby).await.is_empty());
    assert!(
        grant_rows(&hub, &app).await.is_empty(),
        "a refusal writes no row"
    );

    // Installed: the operator grants; a space admin (a person) replaces it
    // and deletes it; each is one row naming its caller.
    let (status, body) = operator(&hub, Method::POST, &app, "installation", None).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = put(&hub, ADMIN_TOKEN, &put_body(&app, lobby, "read")).await;
    assert_eq!(status, 201, "{body}");
    let alex = person(&hub, "Alex").await;
    grant(
        &hub,
        ADMIN_TOKEN,
        principal(alex.id),
        on_space(lobby),
        "admin",
    )
    .await;
    let (status, body) = put(&hub, &alex.key, &put_body(&app, lobby, "write")).await;
    assert_eq!(status, 201, "{body}");
    let grant_id = body["grant"]["grantId"].as_str().unwrap().to_string();
    let path = format!("/api/v1/grants/{grant_id}");
    let (status, body) = call(&hub, Method::DELETE, &path, &alex.key, None).await;
    assert_eq!(status, 204, "{body}");
    // Suspended is still installed: a grant is allowed, and recorded with
    // the state it met.
    let (status, _) = operator(&hub, Method::POST, &app, "installation/suspend", None).await;
    assert_eq!(status, 200);
    let (status, body) = put(&hub, ADMIN_TOKEN, &put_body(&app, lobby, "write")).await;
    assert_eq!(status, 201, "{body}");

    let rows = grant_rows(&hub, &app).await;
    let who: Vec<(&Value, &Value, &Value)> = rows
        .iter()
        .map(|r| (&r["actorKind"], &r["actorId"], &r["stateAfter"]))
        .collect();
    let (operator_kind, person_kind) = (json!("operator"), json!("person"));
    let (active, suspended, alex_id) = (json!("active"), json!("suspended"), json!(alex.id));
    assert_eq!(
        who,
        [
            (&operator_kind, &Value::Null, &active),
            (&person_kind, &alex_id, &active),
            (&person_kind, &alex_id, &active),
            (&operator_kind, &Value::Null, &suspended),
        ],
        "{rows:?}"
    );
    let events = json!(["events:subscribe"]);
    for r in &rows {
        assert_eq!((&r["scopesBefore"], &r["scopesAfter"]), (&events, &events));
        assert_eq!(r["stateBefore"], r["stateAfter"], "a grant moves no state");
        assert_eq!(r["appId"], json!(app));
    }
    // Alex's own grant (a person's) is no app's: no row names Alex.
    let (_, all) = call(
        &hub,
        Method::GET,
        "/api/v1/audit/actions?limit=100",
        ADMIN_TOKEN,
        None,
    )
    .await;
    let all = all["records"].as_array().unwrap();
    assert!(all.iter().all(|r| r["appId"] == json!(app)), "{all:?}");

    // Uninstalled: the grants are gone and a new one is refused.
    let (status, _) = operator(&hub, Method::DELETE, &app, "installation", None).await;
    assert_eq!(status, 204);
    assert!(app_grants(&hub, &app, lobby).await.is_empty());
    let (status, body) = put(&hub, &alex.key, &put_body(&app, lobby, "read")).await;
    assert_not_installed(status, &body);
    assert!(app_grants(&hub, &app, lobby).await.is_empty());
    assert_eq!(grant_rows(&hub, &app).await.len(), 4);
}

fn assert_forbidden(status: u16, body: &Value, reason: &str) {
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], json!("forbidden"), "{body}");
    assert_eq!(body["error"]["reason"], json!(reason), "{body}");
}

async fn a_suspended_or_pending_apps_key_routes_answer_403(options: Options) {
    let hub =
        TestHub::start_with(options.env("SWITCHBOARD_REGISTRATION__INSTALL", "pending")).await;
    let (app, key) = hub.register_app(&werewolf_manifest()).await;
    for route in ["/api/v1/keys/rotate", "/api/v1/keys/revoke"] {
        let (status, body) = call(&hub, Method::POST, route, &key, None).await;
        assert_forbidden(status, &body, "app_not_installed");
    }
    let (status, body) = operator(&hub, Method::POST, &app, "installation", None).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = call(&hub, Method::POST, "/api/v1/keys/rotate", &key, None).await;
    assert_eq!(status, 200, "the pending key was left alone: {body}");
    let key = body["appKey"].as_str().unwrap().to_string();

    let (status, _) = operator(&hub, Method::POST, &app, "installation/suspend", None).await;
    assert_eq!(status, 200);
    for route in ["/api/v1/keys/rotate", "/api/v1/keys/revoke"] {
        let (status, body) = call(&hub, Method::POST, route, &key, None).await;
        assert_forbidden(status, &body, "app_suspended");
    }
    // The refusals changed nothing: resumed, the same key still works.
    let (status, _) = operator(&hub, Method::POST, &app, "installation/resume", None).await;
    assert_eq!(status, 200);
    let (status, body) = call(&hub, Method::POST, "/api/v1/keys/revoke", &key, None).await;
    assert_eq!(status, 204, "{body}");
    let (status, _) = call(&hub, Method::POST, "/api/v1/keys/rotate", &key, None).await;
    assert_eq!(status, 401, "revoked");
    // An agent's key routes are not an app's: untouched.
    let (_, agent_key) = hub.register_agent("plain").await;
    let (status, body) = call(&hub, Method::POST, "/api/v1/keys/rotate", &agent_key, None).await;
    assert_eq!(status, 200, "{body}");
}

async fn installation_changed_is_written_only_while_the_app_receives_events(options: Options) {
    let hub = TestHub::start_with(options).await;
    let (app, key) = hub.register_app(&werewolf_manifest()).await;
    let scopes = |s: Value| json!({ "scopes": s });
    // Without events:subscribe: set scopes, an upgrade, a suspend and a
    // resume write nothing to the app's stream.
    let (status, body) = operator(
        &hub,
        Method::PUT,
        &app,
        "installation/scopes",
        Some(&scopes(json!([]))),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let manifest = format!("/api/v1/apps/{app}/manifest");
    let next = described("the second edition");
    let (status, body) = call(&hub, Method::PUT, &manifest, ADMIN_TOKEN, Some(&next)).await;
    assert_eq!(status, 200, "{body}");
    for rest in ["installation/suspend", "installation/resume"] {
        let (status, body) = operator(&hub, Method::POST, &app, rest, None).await;
        assert_eq!(status, 200, "{rest}: {body}");
    }
    // The change that gives the scope back tells the app its scopes.
    let back = scopes(json!(["events:subscribe"]));
    let (status, body) =
        operator(&hub, Method::PUT, &app, "installation/scopes", Some(&back)).await;
    assert_eq!(status, 200, "{body}");
    let told = app_events(&hub, &key, "app/installation/changed").await;
    assert_eq!(told.len(), 1, "only the change that restored it: {told:?}");
    let payload = &told[0]["payload"];
    assert_eq!(payload["state"], json!("active"));
    assert_eq!(payload["scopes"]["effective"], json!(["events:subscribe"]));
    // With the scope, a resume and an upgrade are told again.
    for rest in ["installation/suspend", "installation/resume"] {
        let (status, _) = operator(&hub, Method::POST, &app, rest, None).await;
        assert_eq!(status, 200, "{rest}");
    }
    let (status, _) = call(
        &hub,
        Method::PUT,
        &manifest,
        &key,
        Some(&described("third")),
    )
    .await;
    assert_eq!(status, 200);
    let told = app_events(&hub, &key, "app/installation/changed").await;
    assert_eq!(told.len(), 3, "{told:?}");
}

/// `switchboard <args> --data-dir <dir>`, pending installs: success and
/// the output (stdout, then stderr).
fn cli(dir: &std::path::Path, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .env("SWITCHBOARD_REGISTRATION__INSTALL", "pending")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn value_of(text: &str, label: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(label))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| panic!("{label} missing in {text}"))
}

/// The CLI's `grant put` refuses a pending app, grants an installed one,
/// and `audit actions` shows each put and delete on the app.
#[tokio::test]
async fn the_cli_refuses_a_grant_to_a_pending_app_and_audits_app_grants() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    crate::support::migrate(&data, None);
    let manifest = dir.path().join("m.json");
    std::fs::write(&manifest, werewolf_manifest().to_string()).unwrap();
    let (ok, out) = cli(
        &data,
        &["app", "register", "--manifest", manifest.to_str().unwrap()],
    );
    assert!(ok, "{out}");
    let app = value_of(&out, "app id:");
    let (ok, out) = cli(&data, &["space", "create", "--name", "Ops"]);
    assert!(ok, "{out}");
    let ops = value_of(&out, "space id:");
    let put = [
        "grant",
        "put",
        "--principal",
        &app,
        "--space",
        &ops,
        "--level",
        "write",
    ];
    let (ok, out) = cli(&data, &put);
    assert!(
        !ok && out.contains("app_not_installed") && out.contains("--principal"),
        "{out}"
    );
    let (ok, out) = cli(&data, &["grant", "list", "--space", &ops]);
    assert!(ok && !out.contains(&app), "{out}");

    let (ok, out) = cli(&data, &["app", "install", "--id", &app]);
    assert!(ok, "{out}");
    let (ok, out) = cli(&data, &put);
    assert!(ok, "{out}");
    let grant_id = value_of(&out, "grant id:");
    let (ok, out) = cli(&data, &["grant", "delete", "--id", &grant_id]);
    assert!(ok, "{out}");
    let (ok, out) = cli(&data, &["audit", "actions", "--app", &app]);
    assert!(ok, "{out}");
    let grants: Vec<&str> = out
        .lines()
        .filter(|l| l.contains(" grant.manage "))
        .collect();
    assert_eq!(grants.len(), 2, "{out}");
    for line in grants {
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(&fields[2..5], ["operator", "-", "grant.manage"], "{line}");
        assert_eq!(&fields[8..10], ["active", "active"], "{line}");
    }
}
