//! Canaries across every output (issue 22 part 4): one scenario puts unique
//! values into message text, data parts (a member's name and its value),
//! keys and tokens (agents', a person's, an app's, the operator token, the
//! registration secret), the webhook signing secrets (the key-encryption
//! key and a signing key) and manifest fields, including inputs the hub
//! refuses. Then it scans every line the hub logged at debug level,
//! `/metrics`, the audit, every error body, the REST answers and the
//! frames of every principal that is not an intended receiver.
//!
//! Content (text, data, manifest fields) may reach only its intended
//! receivers: the sender's own answer and the receiver's frames and REST
//! catch-up. Secrets may reach nobody: no output scanned here may hold
//! one. Expected findings: 0; each finding names the canary and the output.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchboard::webhooks::signature::secret_key_string;

use crate::support::hub::Options;
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
        // A key's secret part, after its public id, on its own too.
        if let Some(secret) = value.rsplit('_').next().filter(|s| s.len() >= 32) {
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

    /// `output` is the app's own: its manifest is its to read, nothing else.
    fn scan_but_manifest(&mut self, c: &Canaries, output: &str, text: &str) {
        let others: Vec<(&'static str, String)> = c
            .content
            .iter()
            .filter(|(what, _)| !what.starts_with("manifest"))
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
    method: reqwest::Method,
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
/// canary KEK, secret registration and the canary operator token.
async fn canary_hub(c: &mut Canaries) -> TestHub {
    let root = tempfile::tempdir().unwrap().keep();
    let data = root.join("data");
    let signing = secret_key_string(&ed25519_dalek::SigningKey::from_bytes(&[0x5a; 32]));
    c.secret("webhook signing key", &signing);
    let file = root.join("signing.key");
    std::fs::write(&file, &signing).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args([
            "keys",
            "rotate",
            "--secret-file",
            file.to_str().unwrap(),
            "--data-dir",
        ])
        .arg(&data)
        .env("SWITCHBOARD_WEBHOOKS__KEY_ENCRYPTION_KEY", KEK)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    TestHub::start_with(Options {
        dir: Some(data),
        ..TestHub::fast_options()
            .env("RUST_LOG", "debug")
            .env("SWITCHBOARD_ADMIN__TOKEN", TOKEN)
            .env("SWITCHBOARD_REGISTRATION__MODE", "secret")
            .env("SWITCHBOARD_REGISTRATION__SECRET", REGISTRATION_SECRET)
            .env("SWITCHBOARD_WEBHOOKS__KEY_ENCRYPTION_KEY", KEK)
            .env("SWITCHBOARD_AUDIT__FLUSH_INTERVAL_MS", 100)
    })
    .await
}

#[tokio::test]
async fn no_canary_reaches_an_output_it_must_not() {
    let mut c = Canaries::new();
    let hub = canary_hub(&mut c).await;
    let mut findings = Findings::default();
    let mut errors = String::new();

    // Principals, each key a canary of its own.
    let agent = |name: &'static str| {
        let hub = &hub;
        async move {
            let (status, text) = register(
                hub,
                "/api/v1/agents/register",
                REGISTRATION_SECRET,
                json!({"name": name}),
            )
            .await;
            assert_eq!(status, 201, "{text}");
            (field(&text, "/agentId"), field(&text, "/agentKey"))
        }
    };
    let (_, alice_key) = agent("alice").await;
    let (bob_id, bob_key) = agent("bob").await;
    let (_, mallory_key) = agent("mallory").await;
    let (status, text) = register(
        &hub,
        "/api/v1/apps/register",
        REGISTRATION_SECRET,
        json!({"manifest": manifest(&c)}),
    )
    .await;
    assert_eq!(status, 201, "{text}");
    let app_key = field(&text, "/appKey");
    let (status, text) = rest(
        &hub,
        reqwest::Method::POST,
        "/api/v1/people",
        TOKEN,
        Some(json!({"name": "pat"})),
    )
    .await;
    assert_eq!(status, 201, "{text}");
    let person_key = field(&text, "/personKey");
    for (what, key) in [
        ("alice's key", &alice_key),
        ("bob's key", &bob_key),
        ("mallory's key", &mallory_key),
        ("the app's key", &app_key),
        ("pat's key", &person_key),
    ] {
        c.secret(what, key);
    }

    let url = hub.ws_url();
    let mut alice = RawSocket::connect_agent(&url, &alice_key).await;
    let mut bob = RawSocket::connect_agent(&url, &bob_key).await;
    let mut mallory = RawSocket::connect_agent(&url, &mallory_key).await;
    let mut app = RawSocket::connect_app(&url, &app_key).await;
    let mut pat = RawSocket::connect(&url).await;
    let r = pat
        .call(
            json!("c"),
            "person/network/connect",
            json!({"personKey": person_key}),
        )
        .await;
    assert!(r.get("result").is_some(), "{r}");

    // Alice writes to Bob: text and a data part.
    let r = alice
        .call(
            json!(1),
            "agent/conversation/create",
            json!({"kind": "direct", "participants": [bob_id]}),
        )
        .await;
    let conversation = r["result"]["conversation"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let parts = json!([
        {"type": "text", "text": c.get("message text")},
        {"type": "data", "data": { c.get("data part member"): c.get("data part value") }}
    ]);
    let r = alice
        .call(
            json!(2),
            "agent/message/send",
            json!({"conversationId": conversation, "parts": parts}),
        )
        .await;
    assert!(r.get("result").is_some(), "{r}");

    // Refused inputs carrying canaries: their error bodies are scanned.
    let missing = uuid::Uuid::now_v7();
    let r = alice
        .call(
            json!(3),
            "agent/message/send",
            json!({"conversationId": missing,
            "parts": [{"type": "text", "text": c.get("refused message text")}]}),
        )
        .await;
    errors.push_str(&format!("{r}\n"));
    let r = alice
        .call(json!(4), "agent/message/send", json!({"conversationId": conversation,
            "parts": [{"type": "text", "text": c.get("refused message text"), "zz": c.get("refused message text")}]}))
        .await;
    errors.push_str(&format!("{r}\n"));
    let r = mallory
        .call(
            json!(5),
            "agent/message/list",
            json!({"conversationId": conversation}),
        )
        .await;
    errors.push_str(&format!("{r}\n"));
    let mut stranger = RawSocket::connect(&url).await;
    let wrong_key = format!(
        "sbk_agent_0000000000000000_{}",
        c.get("a refused agent key")
    );
    let r = stranger
        .call(
            json!(6),
            "agent/network/connect",
            json!({"agentKey": wrong_key}),
        )
        .await;
    errors.push_str(&format!("{r}\n"));
    let get = reqwest::Method::GET;
    let post = reqwest::Method::POST;
    for (status, text) in [
        rest(
            &hub,
            get.clone(),
            "/api/v1/events",
            c.get("a refused bearer"),
            None,
        )
        .await,
        rest(
            &hub,
            get.clone(),
            "/api/v1/audit",
            c.get("a refused operator token"),
            None,
        )
        .await,
        register(
            &hub,
            "/api/v1/agents/register",
            c.get("a refused registration secret"),
            json!({"name": "x"}),
        )
        .await,
        register(
            &hub,
            "/api/v1/agents/register",
            REGISTRATION_SECRET,
            json!({"name": format!("{}{}", c.get("refused agent name"), "n".repeat(100))}),
        )
        .await,
        rest(
            &hub,
            post.clone(),
            "/api/v1/webhooks/test",
            TOKEN,
            Some(json!({"url": "https://receiver.example/hook"})),
        )
        .await,
        rest(
            &hub,
            get.clone(),
            &format!("/api/v1/conversations/{conversation}/messages"),
            &mallory_key,
            None,
        )
        .await,
    ] {
        assert!(status >= 400 || text.contains("blocked"), "{status} {text}");
        errors.push_str(&text);
        errors.push('\n');
    }
    findings.scan_all(&c, "error bodies", &errors);

    // REST answers: the intruder's and everyone's public reads hold
    // nothing; the receiver's catch-up holds no secret.
    for (who, key) in [
        ("mallory", &mallory_key),
        ("the app", &app_key),
        ("pat", &person_key),
    ] {
        let (_, text) = rest(&hub, get.clone(), "/api/v1/events", key, None).await;
        findings.scan_all(&c, &format!("{who}'s GET /api/v1/events"), &text);
    }
    for path in [
        "/api/v1/webhooks/keys",
        "/api/v1/cards",
        "/healthz",
        "/readyz",
    ] {
        let (_, text) = rest(&hub, get.clone(), path, "", None).await;
        findings.scan_all(&c, &format!("GET {path}"), &text);
    }
    let (_, text) = rest(&hub, get.clone(), "/api/v1/events", &bob_key, None).await;
    assert!(
        text.contains(c.get("message text")),
        "the receiver got the message: {text}"
    );
    findings.scan_secrets(&c, "bob's GET /api/v1/events", &text);

    // Frames: of those who are not receivers, none; of the two ends, no secret.
    for (who, socket, identity) in [
        ("mallory", &mut mallory, "agent/identity/get"),
        ("pat", &mut pat, "person/identity/get"),
    ] {
        let frames = frames_so_far(socket, identity).await;
        findings.scan_all(&c, &format!("{who}'s frames"), &frames);
    }
    let app_frames = frames_so_far(&mut app, "app/identity/get").await;
    assert!(
        app_frames.contains(c.get("manifest name")),
        "the app reads its manifest"
    );
    findings.scan_but_manifest(&c, "the app's frames", &app_frames);
    let bob_frames = frames_so_far(&mut bob, "agent/identity/get").await;
    assert!(
        bob_frames.contains(c.get("data part value")),
        "bob got the data part"
    );
    findings.scan_secrets(&c, "bob's frames", &bob_frames);
    let alice_frames = frames_so_far(&mut alice, "agent/identity/get").await;
    findings.scan_secrets(&c, "alice's frames", &alice_frames);

    // The audit, once the refusals above are written.
    let deadline = Instant::now() + Duration::from_secs(20);
    let audit = loop {
        let (status, text) = rest(&hub, get.clone(), "/api/v1/audit", TOKEN, None).await;
        assert_eq!(status, 200, "{text}");
        if text.contains("\"resourceId\"") {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "no audit record was written: {text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    findings.scan_all(&c, "the audit", &audit);

    let (_, metrics) = rest(&hub, get, "/metrics", "", None).await;
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
