//! Registration, keys and connecting, over real HTTP and WebSocket.

use serde_json::{json, Value};
use switchboard::client::{AgentClient, AppClient, ClientError};
use switchboard::protocol::network::{AgentIdentityGet, AppIdentityGet, NoParams};

use crate::support::hub::Options;
use crate::support::{werewolf_manifest, RawSocket, TestHub};

#[tokio::test]
async fn agents_and_apps_register_over_http_and_connect_with_the_sdk() {
    let hub = TestHub::start().await;
    let agent = AgentClient::register(&hub.base, "alice", Some("plays werewolf"))
        .await
        .unwrap();
    assert!(agent.agent_key.starts_with("sbk_agent_"));
    let app = AppClient::register(&hub.base, &werewolf_manifest())
        .await
        .unwrap();
    assert!(app.app_key.starts_with("sbk_app_"));

    let a = AgentClient::connect(&hub.base, &agent.agent_key)
        .await
        .unwrap();
    assert_eq!(a.agent_id(), agent.agent_id);
    let me = a.call::<AgentIdentityGet>(NoParams {}).await.unwrap();
    assert_eq!(me.name, "alice");
    assert_eq!(me.description.as_deref(), Some("plays werewolf"));

    let p = AppClient::builder(&hub.base, &app.app_key)
        .connect()
        .await
        .unwrap();
    assert_eq!(p.app_id(), app.app_id);
    let me = p.call::<AppIdentityGet>(NoParams {}).await.unwrap();
    assert_eq!(me.manifest.limits.max_participants, 12);
    assert_eq!(me.manifest.conversations.len(), 2);

    // An agent key does not connect an app and vice versa.
    let err = AgentClient::connect(&hub.base, &app.app_key)
        .await
        .err()
        .unwrap();
    assert_eq!(err.rpc().unwrap().tag.as_deref(), Some("UnauthorizedError"));
}

#[tokio::test]
async fn a_wrong_key_is_refused_without_revealing_whether_the_id_exists() {
    let hub = TestHub::start().await;
    let (_, key) = hub.register_agent("bob").await;
    let key_id_and_wrong_secret = format!("{}{}", &key[..key.len() - 4], "AAAA");
    let unknown_id = key.replacen(&key[10..26], "0000000000000000", 1);
    let mut answers = Vec::new();
    for candidate in [
        key_id_and_wrong_secret.as_str(),
        unknown_id.as_str(),
        "sbk_agent_garbage",
        "",
    ] {
        let mut s = RawSocket::connect(&hub.ws_url()).await;
        let f = s
            .call(
                json!(1),
                "agent/network/connect",
                json!({"agentKey": candidate}),
            )
            .await;
        answers.push(f["error"].clone());
    }
    for a in &answers {
        assert_eq!(a, &answers[0], "every bad key gets the same answer");
    }
    assert_eq!(answers[0]["_tag"], json!("UnauthorizedError"));
    assert!(!hub.log().contains(&key), "the key never reaches the log");
}

#[tokio::test]
async fn bad_manifests_get_a_pointer_to_each_offending_field() {
    let hub = TestHub::start().await;
    let mut m = werewolf_manifest();
    m["limits"]["maxParticipants"] = json!(-1);
    m["hooks"]["message_authorize"] = json!({"kind": "hook", "timeoutMs": 999_999_999});
    m["hooks"]
        .as_object_mut()
        .unwrap()
        .remove("dispatch_authorize");
    m["conversations"][0]["participantFilter"] = json!("everyone");
    m["colour"] = json!("red");
    let (status, body) = hub
        .post("/api/v1/apps/register", &json!({ "manifest": m }))
        .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], json!("invalid_manifest"));
    let pointers: Vec<&str> = body["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["pointer"].as_str().unwrap())
        .collect();
    for expected in [
        "/manifest/limits/maxParticipants",
        "/manifest/hooks/message_authorize/timeoutMs",
        "/manifest/hooks/dispatch_authorize",
        "/manifest/conversations/0/participantFilter",
        "/manifest/colour",
    ] {
        assert!(
            pointers.contains(&expected),
            "{expected} not in {pointers:?}"
        );
    }

    let (status, body) = hub.post("/api/v1/apps/register", &json!({})).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["details"][0]["pointer"], json!("/manifest"));
    let (status, body) = hub
        .post("/api/v1/agents/register", &json!({"nam": "x"}))
        .await;
    assert_eq!(status, 400);
    let mut pointers: Vec<&str> = body["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["pointer"].as_str().unwrap())
        .collect();
    pointers.sort();
    assert_eq!(pointers, vec!["/nam", "/name"]);
    let r = hub
        .http
        .post(format!("{}/api/v1/agents/register", hub.base))
        .header("content-type", "application/json")
        .body("{nope")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], json!("invalid_json"));
}

#[tokio::test]
async fn rotation_and_revocation_close_sockets_and_refuse_old_keys() {
    let hub = TestHub::start().await;
    let (agent_id, key) = hub.register_agent("carol").await;
    let client = AgentClient::connect(&hub.base, &key).await.unwrap();

    let r = hub
        .http
        .post(format!("{}/api/v1/keys/rotate", hub.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["cache-control"], "no-store");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["principalId"], json!(agent_id));
    let new_key = body["agentKey"].as_str().unwrap().to_string();
    assert_ne!(new_key, key);

    let closed = client.connection.closed().await;
    assert_eq!(closed.code, Some(4003), "{closed:?}");
    let err = AgentClient::connect(&hub.base, &key).await.err().unwrap();
    assert!(matches!(err, ClientError::Rpc(_)));
    let fresh = AgentClient::connect(&hub.base, &new_key).await.unwrap();

    let r = hub
        .http
        .post(format!("{}/api/v1/keys/revoke", hub.base))
        .bearer_auth(&new_key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    assert_eq!(fresh.connection.closed().await.code, Some(4003));
    assert!(AgentClient::connect(&hub.base, &new_key).await.is_err());

    let r = hub
        .http
        .post(format!("{}/api/v1/keys/rotate", hub.base))
        .bearer_auth(&new_key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
}

#[tokio::test]
async fn a_registration_secret_can_be_required() {
    let hub = TestHub::start_with(
        Options::default()
            .env("SWITCHBOARD_REGISTRATION__MODE", "secret")
            .env("SWITCHBOARD_REGISTRATION__SECRET", "invite-only-secret-42"),
    )
    .await;
    let (status, body) = hub
        .post("/api/v1/agents/register", &json!({"name": "x"}))
        .await;
    assert_eq!(status, 401);
    assert_eq!(body["error"]["code"], json!("registration_secret_required"));
    let http = switchboard::client::HttpClient::new(&hub.base)
        .with_registration_secret("wrong-secret-000000");
    assert!(http.register_agent("x", None).await.is_err());
    let http = switchboard::client::HttpClient::new(&hub.base)
        .with_registration_secret("invite-only-secret-42");
    let creds = http.register_agent("x", None).await.unwrap();
    AgentClient::connect(&hub.base, &creds.agent_key)
        .await
        .unwrap();
}

#[tokio::test]
async fn open_registration_beyond_loopback_refuses_to_start() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["serve", "--listen", "0.0.0.0:0"])
        .arg("--data-dir")
        .arg(tempfile::tempdir().unwrap().path())
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("allow_open_beyond_loopback"), "{stderr}");
}

#[tokio::test]
async fn the_operator_cli_registers_and_rotates_keys() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    crate::support::migrate(&data, None);
    let manifest = dir.path().join("manifest.json");
    std::fs::write(&manifest, werewolf_manifest().to_string()).unwrap();
    let cli = |args: &[&str]| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"));
        c.args(args).arg("--data-dir").arg(&data);
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let field = |out: &str, label: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(label))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("{label} missing in {out}"))
    };
    let out = cli(&["agent", "register", "--name", "dave"]);
    let agent_id = field(&out, "agent id:");
    let agent_key = field(&out, "agent key:");
    let out = cli(&["app", "register", "--manifest", manifest.to_str().unwrap()]);
    let app_key = field(&out, "app key:");
    let out = cli(&["agent", "rotate-key", "--id", &agent_id]);
    let rotated = field(&out, "agent key:");

    let mut bad = m_bad(&dir);
    bad.arg("--data-dir").arg(&data);
    let out = bad.output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/hooks"));

    // The hub serves the database the CLI wrote.
    let url = format!("sqlite://{}", data.join("switchboard.db").display());
    let hub = TestHub::start_with(Options {
        database_url: Some(url),
        ..Options::default().env("SWITCHBOARD_GATEWAY__REVOCATION_CHECK_INTERVAL_MS", 100)
    })
    .await;
    assert!(
        AgentClient::connect(&hub.base, &agent_key).await.is_err(),
        "rotated away"
    );
    let live = AgentClient::connect(&hub.base, &rotated).await.unwrap();
    AppClient::builder(&hub.base, &app_key)
        .connect()
        .await
        .unwrap();

    // A key the CLI revokes while its socket is open: the hub's sweep
    // closes the socket (4003) without any request from it.
    cli(&["agent", "revoke-key", "--id", &agent_id]);
    let closed = tokio::time::timeout(std::time::Duration::from_secs(20), live.connection.closed())
        .await
        .expect("the revoked socket closes");
    assert_eq!(closed.code, Some(4003), "{closed:?}");
    assert!(AgentClient::connect(&hub.base, &rotated).await.is_err());
}

fn m_bad(dir: &tempfile::TempDir) -> std::process::Command {
    let bad = dir.path().join("bad.json");
    let mut m = werewolf_manifest();
    m["hooks"] = json!({});
    std::fs::write(&bad, m.to_string()).unwrap();
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"));
    c.args(["app", "register", "--manifest", bad.to_str().unwrap()]);
    c
}

#[tokio::test]
async fn the_example_manifests_register() {
    let hub = TestHub::start().await;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let wrapped: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("werewolf-register.json")).unwrap(),
    )
    .unwrap();
    let (status, body) = hub.post("/api/v1/apps/register", &wrapped).await;
    assert_eq!(status, 201, "{body}");
    let bare: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("werewolf.manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(bare, wrapped["manifest"]);
}
