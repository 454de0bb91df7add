//! Canaries across every output (issue 22 part 4): one scenario puts unique
//! values into message text, data parts (a member's name and its value),
//! keys and tokens (agents', a person's, an app's, the operator token, the
//! registration secret), the webhook signing secrets (the key-encryption
//! key and a signing key) and manifest fields, including inputs the hub
//! refuses. Then, on SQLite and on PostgreSQL, it scans every line the hub
//! logged at debug level, `/metrics`, the audit, every error body, the
//! REST answers and the frames of every principal that is not an intended
//! receiver.
//!
//! Content (text, data, manifest fields) may reach only its intended
//! receivers: the sender's own answer and the receiver's frames and REST
//! catch-up. Secrets may reach nobody: no output scanned here may hold
//! one. Expected findings: 0; each finding names the canary and the output.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};
use switchboard::webhooks::signature::secret_key_string;

use crate::support::hub::Options;

#[path = "canaries_commands.rs"]
mod commands;
#[path = "canaries_interactions_url.rs"]
mod interactions_url;
use crate::support::{RawSocket, TestHub};

const TOKEN: &str = "canary-operator-token-9f8e7d6c5b4a";
const REGISTRATION_SECRET: &str = "canary-registration-secret-0a1b2c3d";
/// Base64 of 32 bytes: the key that seals the webhook signing keys.
const KEK: &str = "Q0FOQVJZLWtlay0wMTIzNDU2Nzg5YWJjZGVmMDEyMzQ=";

/// The scenario's canaries, by what they stand for.
struct Canaries {
    content: Vec<(&'static str, String)>,
    secrets: Vec<(&'static str, String)>,
}

impl Canaries {
    fn new() -> Canaries {
        let tag = |what: &str| format!("CANARY-{what}-{}", uuid::Uuid::new_v4().simple());
        Canaries {
            content: vec![
                ("message text", tag("text")),
                ("data part value", tag("data-value")),
                ("data part member", tag("data-member")),
                ("manifest name", tag("manifest-name")),
                ("manifest description", tag("manifest-description")),
                ("manifest conversation name", tag("manifest-conversation")),
                ("refused message text", tag("refused-text")),
                ("refused agent name", tag("refused-name")),
                ("a space's name, created twice", tag("space")),
                (commands::OPTION, tag("option")),
                ("refused command option value", tag("refused-option")),
                (interactions_url::OPTION, tag("url-option")),
                (interactions_url::REPLY, tag("url-reply")),
                (interactions_url::HOOK_PATH, tag("hook-path")),
            ],
            secrets: vec![
                ("operator token", TOKEN.to_string()),
                ("registration secret", REGISTRATION_SECRET.to_string()),
                ("webhook key-encryption key", KEK.to_string()),
                ("a refused agent key", tag("wrong-key")),
                ("a refused bearer", tag("wrong-bearer")),
                ("a refused registration secret", tag("wrong-secret")),
                ("a refused operator token", tag("wrong-token")),
            ],
        }
    }

    fn get(&self, what: &str) -> &str {
        self.content
            .iter()
            .chain(&self.secrets)
            .find(|(w, _)| *w == what)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no canary {what}"))
    }

    fn secret(&mut self, what: &'static str, value: &str) {
        self.secrets.push((what, value.to_string()));
        // A key's secret part, after its public id, on its own too
        // (`sbk_<kind>_<id>_<secret>`: the secret's own alphabet has `_`).
        let part = match value.starts_with("sbk_") {
            true => value.splitn(4, '_').nth(3),
            false => value.rsplit('_').next(),
        };
        if let Some(secret) = part.filter(|s| s.len() >= 32) {
            self.secrets.push((what, secret.to_string()));
        }
    }
}

/// Every place an output held a canary it must not hold.
#[derive(Default)]
struct Findings(Vec<String>);

impl Findings {
    /// `output` may hold no canary at all.
    fn scan_all(&mut self, c: &Canaries, output: &str, text: &str) {
        self.scan(&c.content, output, text);
        self.scan_secrets(c, output, text);
    }

    /// `output` is the app's own: its manifest is its to read, and the
    /// option value of its command's invocation (ADR 0027 §10), nothing
    /// else.
    fn scan_but_manifest(&mut self, c: &Canaries, output: &str, text: &str) {
        let others: Vec<(&'static str, String)> = c
            .content
            .iter()
            .filter(|(what, _)| !what.starts_with("manifest") && *what != commands::OPTION)
            .cloned()
            .collect();
        self.scan(&others, output, text);
        self.scan_secrets(c, output, text);
    }

    /// `output` may hold the content canary `allowed` and nothing else.
    fn scan_except(&mut self, c: &Canaries, allowed: &str, output: &str, text: &str) {
        let others: Vec<(&'static str, String)> = c
            .content
            .iter()
            .filter(|(what, _)| *what != allowed)
            .cloned()
            .collect();
        self.scan(&others, output, text);
        self.scan_secrets(c, output, text);
    }

    /// `output` belongs to an intended receiver: only secrets are findings.
    fn scan_secrets(&mut self, c: &Canaries, output: &str, text: &str) {
        self.scan(&c.secrets, output, text);
    }

    fn scan(&mut self, canaries: &[(&'static str, String)], output: &str, text: &str) {
        for (what, value) in canaries {
            for line in text.lines().filter(|l| l.contains(value.as_str())) {
                let line: String = line.chars().take(300).collect();
                self.0.push(format!("{what} in {output}: {line}"));
            }
        }
    }
}

fn manifest(c: &Canaries) -> Value {
    let mut m = crate::support::werewolf_manifest();
    m["name"] = json!(c.get("manifest name"));
    m["description"] = json!(c.get("manifest description"));
    m["conversations"][0]["name"] = json!(c.get("manifest conversation name"));
    commands::declare(&mut m);
    m
}

/// POSTs as a stranger presenting the registration secret; the answer text.
async fn register(hub: &TestHub, path: &str, secret: &str, body: Value) -> (u16, String) {
    let r = hub
        .http
        .post(format!("{}{path}", hub.base))
        .header("x-registration-secret", secret)
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

async fn rest(
    hub: &TestHub,
    method: Method,
    path: &str,
    bearer: &str,
    body: Option<Value>,
) -> (u16, String) {
    let mut request = hub
        .http
        .request(method, format!("{}{path}", hub.base))
        .bearer_auth(bearer);
    if let Some(b) = body {
        request = request.json(&b);
    }
    let r = request.send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

fn field(text: &str, pointer: &str) -> String {
    let v: Value = serde_json::from_str(text).unwrap_or_else(|_| panic!("not JSON: {text}"));
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{pointer} missing in {text}"))
        .to_string()
}

/// Every frame `s` received up to the answer of a call made now, as text.
async fn frames_so_far(s: &mut RawSocket, identity: &str) -> String {
    s.send_json(&json!({"jsonrpc": "2.0", "id": "sync", "method": identity}))
        .await;
    let mut out = String::new();
    loop {
        let frame = s.recv().await;
        out.push_str(&frame.to_string());
        out.push('\n');
        if frame["id"] == json!("sync") {
            return out;
        }
    }
}

/// The hub, with a signing key from a canary secret sealed under the
/// canary KEK, secret registration and the canary operator token; the
/// directory holding its data lives as long as the hub.
async fn canary_hub(
    c: &mut Canaries,
    database_url: Option<String>,
    fake: &crate::support::receiver::Receiver,
) -> (TestHub, tempfile::TempDir) {
    let root = tempfile::tempdir().unwrap();
    let ca = root.path().join("ca.pem");
    std::fs::write(&ca, &fake.ca.ca_pem).unwrap();
    let data = root.path().join("data");
    let signing = secret_key_string(&ed25519_dalek::SigningKey::from_bytes(&[0x5a; 32]));
    c.secret("webhook signing key", &signing);
    let file = root.path().join("signing.key");
    std::fs::write(&file, &signing).unwrap();
    crate::support::migrate(&data, database_url.as_deref());
    let mut rotate = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"));
    rotate
        .args(["keys", "rotate", "--secret-file"])
        .arg(&file)
        .arg("--data-dir")
        .arg(&data)
        .env("SWITCHBOARD_WEBHOOKS__KEY_ENCRYPTION_KEY", KEK);
    if let Some(url) = &database_url {
        rotate.arg("--database-url").arg(url);
    }
    let out = rotate.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let mut options = TestHub::fast_options();
    for (k, v) in interactions_url::env(fake, &ca) {
        options = options.env(&k, v);
    }
    let hub = TestHub::start_with(Options {
        dir: Some(data),
        database_url,
        ..options
            .env("RUST_LOG", "debug")
            .env("SWITCHBOARD_ADMIN__TOKEN", TOKEN)
            .env("SWITCHBOARD_REGISTRATION__MODE", "secret")
            .env("SWITCHBOARD_REGISTRATION__SECRET", REGISTRATION_SECRET)
            .env("SWITCHBOARD_WEBHOOKS__KEY_ENCRYPTION_KEY", KEK)
            .env("SWITCHBOARD_AUDIT__FLUSH_INTERVAL_MS", 100)
    })
    .await;
    (hub, root)
}

/// The scenario's principals: two agents who talk, an intruder, an app and
/// a person, each connected; every key a secret canary.
struct Cast {
    alice: RawSocket,
    bob: RawSocket,
    bob_id: String,
    mallory: RawSocket,
    app: RawSocket,
    app_id: String,
    pat: RawSocket,
    keys: Keys,
}

struct Keys {
    bob: String,
    mallory: String,
    app: String,
    pat: String,
}

async fn agent(hub: &TestHub, name: &str) -> (String, String) {
    let body = json!({ "name": name });
    let (status, text) = register(hub, "/api/v1/agents/register", REGISTRATION_SECRET, body).await;
    assert_eq!(status, 201, "{text}");
    (field(&text, "/agentId"), field(&text, "/agentKey"))
}

async fn cast(hub: &TestHub, c: &mut Canaries) -> Cast {
    let (_, alice) = agent(hub, "alice").await;
    let (bob_id, bob) = agent(hub, "bob").await;
    let (_, mallory) = agent(hub, "mallory").await;
    let body = json!({ "manifest": manifest(c) });
    let (status, text) = register(hub, "/api/v1/apps/register", REGISTRATION_SECRET, body).await;
    assert_eq!(status, 201, "{text}");
    let app = field(&text, "/appKey");
    let app_id = field(&text, "/appId");
    let body = Some(json!({ "name": "pat" }));
    let (status, text) = rest(hub, Method::POST, "/api/v1/people", TOKEN, body).await;
    assert_eq!(status, 201, "{text}");
    let pat = field(&text, "/personKey");
    for (what, key) in [
        ("alice's key", &alice),
        ("bob's key", &bob),
        ("mallory's key", &mallory),
        ("the app's key", &app),
        ("pat's key", &pat),
    ] {
        c.secret(what, key);
    }
    let url = hub.ws_url();
    let mut pat_socket = RawSocket::connect(&url).await;
    let r = pat_socket
        .call(
            json!("c"),
            "person/network/connect",
            json!({"personKey": pat}),
        )
        .await;
    assert!(r.get("result").is_some(), "{r}");
    Cast {
        alice: RawSocket::connect_agent(&url, &alice).await,
        bob: RawSocket::connect_agent(&url, &bob).await,
        bob_id,
        mallory: RawSocket::connect_agent(&url, &mallory).await,
        app: RawSocket::connect_app(&url, &app).await,
        app_id,
        pat: pat_socket,
        keys: Keys {
            bob,
            mallory,
            app,
            pat,
        },
    }
}

/// Alice writes to Bob, text and a data part: the conversation's id.
async fn alice_writes_to_bob(cast: &mut Cast, c: &Canaries) -> String {
    let create = json!({"kind": "direct", "participants": [cast.bob_id]});
    let r = cast
        .alice
        .call(json!(1), "agent/conversation/create", create)
        .await;
    let conversation = r["result"]["conversation"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let parts = json!([
        {"type": "text", "text": c.get("message text")},
        {"type": "data", "data": { c.get("data part member"): c.get("data part value") }}
    ]);
    let send = json!({"conversationId": conversation, "parts": parts});
    let r = cast.alice.call(json!(2), "agent/message/send", send).await;
    assert!(r.get("result").is_some(), "{r}");
    conversation
}

/// Inputs the hub refuses, carrying canaries: their error bodies.
async fn refused_inputs(
    hub: &TestHub,
    cast: &mut Cast,
    c: &Canaries,
    conversation: &str,
) -> String {
    let refused = c.get("refused message text");
    let mut errors = Vec::new();
    let to_missing = json!({"conversationId": uuid::Uuid::now_v7(),
        "parts": [{"type": "text", "text": refused}]});
    errors.push(
        cast.alice
            .call(json!(3), "agent/message/send", to_missing)
            .await
            .to_string(),
    );
    let unknown_member = json!({"conversationId": conversation,
        "parts": [{"type": "text", "text": refused, "zz": refused}]});
    errors.push(
        cast.alice
            .call(json!(4), "agent/message/send", unknown_member)
            .await
            .to_string(),
    );
    let intrusion = json!({"conversationId": conversation});
    errors.push(
        cast.mallory
            .call(json!(5), "agent/message/list", intrusion)
            .await
            .to_string(),
    );
    let mut stranger = RawSocket::connect(&hub.ws_url()).await;
    let wrong = format!(
        "sbk_agent_0000000000000000_{}",
        c.get("a refused agent key")
    );
    let connect = json!({"agentKey": wrong});
    errors.push(
        stranger
            .call(json!(6), "agent/network/connect", connect)
            .await
            .to_string(),
    );
    let too_long = json!({"name": format!("{}{}", c.get("refused agent name"), "n".repeat(100))});
    let webhook = Some(json!({"url": "https://receiver.example/hook"}));
    let history = format!("/api/v1/conversations/{conversation}/messages");
    // A unique name taken twice: PostgreSQL's own error names the value.
    let space = Some(json!({"name": c.get("a space's name, created twice")}));
    let (status, text) = rest(hub, Method::POST, "/api/v1/spaces", TOKEN, space.clone()).await;
    assert_eq!(status, 201, "{text}");
    for (status, text) in [
        rest(
            hub,
            Method::GET,
            "/api/v1/events",
            c.get("a refused bearer"),
            None,
        )
        .await,
        rest(
            hub,
            Method::GET,
            "/api/v1/audit",
            c.get("a refused operator token"),
            None,
        )
        .await,
        register(
            hub,
            "/api/v1/agents/register",
            c.get("a refused registration secret"),
            json!({"name": "x"}),
        )
        .await,
        register(
            hub,
            "/api/v1/agents/register",
            REGISTRATION_SECRET,
            too_long,
        )
        .await,
        rest(hub, Method::POST, "/api/v1/webhooks/test", TOKEN, webhook).await,
        rest(hub, Method::GET, &history, &cast.keys.mallory, None).await,
        rest(hub, Method::POST, "/api/v1/spaces", TOKEN, space).await,
    ] {
        assert!(status >= 400 || text.contains("blocked"), "{status} {text}");
        errors.push(text);
    }
    errors.join("\n")
}

/// REST reads: the intruder's, the app's, the person's and the public
/// ones hold nothing; the receiver's catch-up holds no secret.
async fn scan_rest(hub: &TestHub, cast: &Cast, c: &Canaries, findings: &mut Findings) {
    let k = &cast.keys;
    let (_, text) = rest(hub, Method::GET, "/api/v1/events", &k.mallory, None).await;
    findings.scan_all(c, "mallory's GET /api/v1/events", &text);
    let (_, text) = rest(hub, Method::GET, "/api/v1/events", &k.pat, None).await;
    let pat = "pat's GET /api/v1/events";
    findings.scan_except(c, interactions_url::REPLY, pat, &text);
    let (_, text) = rest(hub, Method::GET, "/api/v1/events", &k.app, None).await;
    assert!(
        text.contains(c.get(commands::OPTION)),
        "the app got the invocation: {text}"
    );
    findings.scan_but_manifest(c, "the app's GET /api/v1/events", &text);
    for path in [
        "/api/v1/webhooks/keys",
        "/api/v1/cards",
        "/healthz",
        "/readyz",
    ] {
        let (_, text) = rest(hub, Method::GET, path, "", None).await;
        findings.scan_all(c, &format!("GET {path}"), &text);
    }
    let (_, text) = rest(hub, Method::GET, "/api/v1/events", &k.bob, None).await;
    assert!(
        text.contains(c.get("message text")),
        "the receiver got the message: {text}"
    );
    findings.scan_secrets(c, "bob's GET /api/v1/events", &text);
}

/// Frames: of those who are not receivers, none; of the app, nothing but
/// its manifest; of the two ends, no secret.
async fn scan_frames(cast: &mut Cast, c: &Canaries, findings: &mut Findings) {
    let frames = frames_so_far(&mut cast.mallory, "agent/identity/get").await;
    findings.scan_all(c, "mallory's frames", &frames);
    // Pat reads the channel the URL app answered in: its reply, nothing
    // else.
    let frames = frames_so_far(&mut cast.pat, "person/identity/get").await;
    assert!(
        frames.contains(c.get(interactions_url::REPLY)),
        "pat read the app's reply"
    );
    findings.scan_except(c, interactions_url::REPLY, "pat's frames", &frames);
    let app_frames = frames_so_far(&mut cast.app, "app/identity/get").await;
    assert!(
        app_frames.contains(c.get("manifest name")),
        "the app reads its manifest"
    );
    findings.scan_but_manifest(c, "the app's frames", &app_frames);
    let bob_frames = frames_so_far(&mut cast.bob, "agent/identity/get").await;
    assert!(
        bob_frames.contains(c.get("data part value")),
        "bob got the data part"
    );
    findings.scan_secrets(c, "bob's frames", &bob_frames);
    let alice_frames = frames_so_far(&mut cast.alice, "agent/identity/get").await;
    findings.scan_secrets(c, "alice's frames", &alice_frames);
}

/// The audit, once the refusals are written (`audit.flush_interval_ms`).
async fn written_audit(hub: &TestHub) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, text) = rest(hub, Method::GET, "/api/v1/audit", TOKEN, None).await;
        assert_eq!(status, 200, "{text}");
        if text.contains("\"resourceId\"") {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "no audit record was written: {text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn no_canary_reaches_an_output_it_must_not_on_sqlite() {
    scenario(None).await;
}

#[tokio::test]
async fn no_canary_reaches_an_output_it_must_not_on_postgres() {
    scenario(Some(crate::support::pg::fresh_database().await)).await;
}

async fn scenario(database_url: Option<String>) {
    let mut c = Canaries::new();
    let fake = crate::support::receiver::Receiver::start().await;
    let (hub, _data) = canary_hub(&mut c, database_url, &fake).await;
    let mut cast = cast(&hub, &mut c).await;
    let conversation = alice_writes_to_bob(&mut cast, &c).await;
    let mut errors = refused_inputs(&hub, &mut cast, &c, &conversation).await;
    errors.push_str(&commands::invoke(&hub, &mut cast, &c).await);
    let requests = interactions_url::invoke(&hub, &mut cast, &mut c, &fake).await;

    let mut findings = Findings::default();
    findings.scan_all(&c, "error bodies", &errors);
    findings.scan_secrets(
        &c,
        "the requests to the app's interactionsUrl and webhook subscription",
        &requests,
    );
    scan_rest(&hub, &cast, &c, &mut findings).await;
    scan_frames(&mut cast, &c, &mut findings).await;
    findings.scan_all(&c, "the audit", &written_audit(&hub).await);
    let (_, metrics) = rest(&hub, Method::GET, "/metrics", "", None).await;
    findings.scan_all(&c, "/metrics", &metrics);
    let log = hub.log();
    assert!(log.contains("DEBUG"), "the hub logged at debug level");
    findings.scan_all(&c, "the hub's log", &log);

    assert!(
        findings.0.is_empty(),
        "{} canary findings:\n{}",
        findings.0.len(),
        findings.0.join("\n")
    );
}
