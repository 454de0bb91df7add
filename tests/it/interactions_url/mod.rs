//! Issue 17 parts 1, 2 and 4 (ADR 0032): an app without a socket, reached
//! at its `interactionsUrl`. The fake app is `support::receiver`'s scripted
//! app on real TLS sockets (its own CA, trusted through
//! `egress.extra_ca_file`), named `localhost` and admitted to a loopback
//! address by `egress.private_override`; the hub is a real `switchboard
//! serve` with a signing key made by `switchboard keys rotate`.

mod autocomplete;
mod deliveries;
mod failures;
mod security;
mod store;
mod verification;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};
use switchboard::client::webhooks::VerificationKey;
use uuid::Uuid;

use crate::support::hub::{Options, ADMIN_TOKEN};
use crate::support::receiver::{Received, Receiver};
use crate::support::world::{self, expect, grant, on_channel, principal, Member, World};
use crate::support::{werewolf_manifest, TestHub};

pub(crate) use crate::commands::both;

pub const KEK: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
/// `app.interaction_timeout_ms` in these tests.
pub const TIMEOUT_MS: u64 = 1_500;
/// `command.autocomplete_timeout_ms`: shorter, so it is the asker's bound.
pub const AUTOCOMPLETE_MS: u64 = 1_000;
/// `egress.max_response_bytes`: below the fake's oversized answer.
pub const ANSWER_CAP: usize = 32 * 1024;

/// A world with the scripted fake app, its CA and the hub's data.
pub struct Setup {
    pub w: World,
    pub fake: Receiver,
    pub database_url: Option<String>,
    pub data: PathBuf,
    /// Holds the CA file and the data directory.
    pub root: tempfile::TempDir,
}

/// The hub's options for `fake`: the allowlist (`allow`), the private
/// override when `private`, the CA, the key-encryption key and the short
/// deadlines.
pub fn wired(
    options: Options,
    s: (&Receiver, &std::path::Path, &std::path::Path),
    allow: &str,
    private: bool,
) -> Options {
    let (_, ca, data) = s;
    let entry = format!("[\"{allow}\"]");
    let mut o = Options {
        dir: Some(data.to_path_buf()),
        ..options
    }
    .env("SWITCHBOARD_WEBHOOKS__KEY_ENCRYPTION_KEY", KEK)
    .env("SWITCHBOARD_EGRESS__ALLOWLIST", &entry)
    .env("SWITCHBOARD_EGRESS__EXTRA_CA_FILE", ca.display())
    .env("SWITCHBOARD_EGRESS__MAX_RESPONSE_BYTES", ANSWER_CAP)
    .env("SWITCHBOARD_APP__INTERACTION_TIMEOUT_MS", TIMEOUT_MS)
    .env(
        "SWITCHBOARD_COMMAND__AUTOCOMPLETE_TIMEOUT_MS",
        AUTOCOMPLETE_MS,
    );
    if private {
        o = o.env("SWITCHBOARD_EGRESS__PRIVATE_OVERRIDE", &entry);
    }
    o
}

pub async fn setup(options: Options) -> Setup {
    setup_with(options, true).await
}

/// [`setup`], the fake's loopback address admitted only when `private`.
pub async fn setup_with(options: Options, private: bool) -> Setup {
    let fake = Receiver::start().await;
    let root = tempfile::tempdir().unwrap();
    let ca = root.path().join("ca.pem");
    std::fs::write(&ca, &fake.ca.ca_pem).unwrap();
    let data = root.path().join("data");
    let database_url = options.database_url.clone();
    let allow = format!("localhost:{}", fake.port());
    let options = wired(options, (&fake, &ca, &data), &allow, private);
    let w = world::world(options).await;
    rotate_key(&data, database_url.as_deref());
    fake.trust_keys(published(&w.hub).await);
    Setup {
        w,
        fake,
        database_url,
        data,
        root,
    }
}

/// `switchboard keys rotate` on the hub's database: its first signing key.
fn rotate_key(data: &std::path::Path, database_url: Option<&str>) {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"));
    c.arg("keys").arg("rotate").arg("--data-dir").arg(data);
    if let Some(url) = database_url {
        c.arg("--database-url").arg(url);
    }
    c.env("SWITCHBOARD_WEBHOOKS__KEY_ENCRYPTION_KEY", KEK);
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The keys the hub publishes, as a receiver verifies with them.
pub async fn published(hub: &TestHub) -> Vec<VerificationKey> {
    let body: Value = hub
        .http
        .get(format!("{}/api/v1/webhooks/keys", hub.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    body["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| VerificationKey::parse(k["publicKey"].as_str().unwrap()).unwrap())
        .collect()
}

/// Tracker's manifest at `url`: the command `ticket` (a required `title`,
/// a `queue` with autocomplete), cards, no socket.
pub fn tracker(url: &str) -> Value {
    let mut m = werewolf_manifest();
    m["name"] = json!("Tracker");
    // No socket: no gate is a hook.
    m["hooks"] = json!({"dispatch_authorize": {"kind": "grant"},
                        "message_authorize": {"kind": "forwardAllExceptSender"},
                        "task_create": {"kind": "accept"}});
    m["scopes"] = json!(["messages:write", "commands:write", "components:write"]);
    m["commands"] = json!([
        {"name": "ticket", "description": "File a ticket", "requiredLevel": "write",
         "options": [{"name": "title", "type": "string", "description": "What", "required": true},
                     {"name": "queue", "type": "string", "description": "Where", "autocomplete": true}]}
    ]);
    m["delivery"] = json!({"mode": "interactions_url", "interactionsUrl": url});
    m
}

/// The path of a scripted app (`/app/<verify>/<answer>`).
pub fn script(verify: &str, answer: &str) -> String {
    format!("/app/{verify}/{answer}")
}

/// A registered Tracker on the fake's `path`, with write on general; the
/// registration's answer too.
pub struct Tracker {
    pub app: Member,
    pub path: String,
    pub registered: Value,
}

impl Setup {
    pub fn hub(&self) -> &TestHub {
        &self.w.hub
    }

    /// Registers Tracker on `path` (through REST) and grants it write on
    /// general; the check runs after the commit, so `verified` waits for
    /// the `n`th verification job to end.
    pub async fn tracker(&self, path: &str) -> Tracker {
        let url = self.fake.url("localhost", path);
        let (status, registered) = self
            .hub()
            .post(
                "/api/v1/apps/register",
                &json!({ "manifest": tracker(&url) }),
            )
            .await;
        assert_eq!(status, 201, "{registered}");
        let app = Member {
            id: registered["appId"].as_str().unwrap().parse().unwrap(),
            key: registered["appKey"].as_str().unwrap().to_string(),
        };
        let alex = self.w.alex.key.clone();
        grant(
            self.hub(),
            &alex,
            principal(app.id),
            on_channel(self.w.general),
            "write",
        )
        .await;
        Tracker {
            app,
            path: path.to_string(),
            registered,
        }
    }

    /// Registers Tracker on `path` and waits for its check (the `n`th of
    /// this hub): its state.
    pub async fn checked_tracker(&self, path: &str, n: usize) -> (Tracker, Value) {
        let t = self.tracker(path).await;
        jobs_done(self.hub(), "app_url_verify", n).await;
        let state = url_state(self.hub(), t.app.id).await;
        (t, state)
    }

    /// Tracker's `ticket` as offered in general, by id.
    pub async fn ticket(&self, t: &Tracker) -> Uuid {
        let path = format!("/api/v1/conversations/{}/commands", self.w.general);
        let listed = expect(self.hub(), Method::GET, &path, &self.w.alex.key, None, 200).await;
        let command = listed["commands"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["appId"] == json!(t.app.id) && c["name"] == "ticket")
            .unwrap_or_else(|| panic!("ticket is not offered: {listed}"))
            .clone();
        command["commandId"].as_str().unwrap().parse().unwrap()
    }

    /// Alex runs `/ticket` in general with `title`: the invocation.
    pub async fn invoke(&self, t: &Tracker, title: &str) -> Value {
        self.invoke_in(t, title, None).await
    }

    /// [`invoke`](Self::invoke) in the thread of `root`, if given.
    pub async fn invoke_in(&self, t: &Tracker, title: &str, root: Option<&Value>) -> Value {
        let command = self.ticket(t).await;
        let path = format!("/api/v1/commands/{command}/invocations");
        let mut body = json!({"conversationId": self.w.general, "options": {"title": title}});
        if let Some(root) = root {
            body["threadId"] = root["id"].clone();
        }
        expect(
            self.hub(),
            Method::POST,
            &path,
            &self.w.alex.key,
            Some(body),
            202,
        )
        .await
    }

    /// Alex starts a thread in general: its root message.
    pub async fn root(&self, text: &str) -> Value {
        let path = format!("/api/v1/conversations/{}/messages", self.w.general);
        let body = json!({"parts": [{"type": "text", "text": text}]});
        let sent = expect(
            self.hub(),
            Method::POST,
            &path,
            &self.w.alex.key,
            Some(body),
            201,
        )
        .await;
        sent["message"].clone()
    }

    /// Tracker posts a card with one button into general: the message.
    pub async fn card(&self, t: &Tracker) -> Value {
        self.card_in(t, None).await
    }

    /// [`card`](Self::card) in the thread of `root`, if given.
    pub async fn card_in(&self, t: &Tracker, root: Option<&Value>) -> Value {
        let path = format!("/api/v1/conversations/{}/messages", self.w.general);
        let mut body = json!({"parts": [{"type": "text", "text": "Close the ticket?"}],
                          "components": [{"kind": "button", "customId": "close", "label": "Close"}]});
        if let Some(root) = root {
            body["threadId"] = root["id"].clone();
        }
        let sent = expect(self.hub(), Method::POST, &path, &t.app.key, Some(body), 201).await;
        assert_eq!(sent["message"]["origin"], "app", "{sent}");
        sent["message"].clone()
    }

    /// Alex presses the card's button: the interaction (`received`).
    pub async fn press(&self, card: &Value) -> Value {
        let component = card["card"]["components"][0]["componentId"].clone();
        let path = format!(
            "/api/v1/messages/{}/interactions",
            card["id"].as_str().unwrap()
        );
        let body = json!({ "componentId": component });
        let pressed = expect(
            self.hub(),
            Method::POST,
            &path,
            &self.w.alex.key,
            Some(body),
            201,
        )
        .await;
        assert_eq!(pressed["interaction"]["state"], "received", "{pressed}");
        pressed["interaction"].clone()
    }

    /// The interaction's state and reason as stored.
    pub async fn interaction(&self, id: &Value) -> (String, Option<String>) {
        let mut config = switchboard::config::Config::default();
        config.server.data_dir = self.data.clone();
        if let Some(url) = &self.database_url {
            config.storage.database_url = url.clone();
        }
        let store = switchboard::store::open_existing(&config).await.unwrap();
        let id: Uuid = id.as_str().unwrap().parse().unwrap();
        let i = store.interaction(id).await.unwrap().expect("stored");
        (i.state.as_str().to_string(), i.reason)
    }

    /// The messages of general's main thread, oldest first, as Alex reads
    /// them.
    pub async fn general_messages(&self) -> Vec<Value> {
        self.thread_messages(None).await
    }

    /// The messages of the thread under `root` (the main thread without).
    pub async fn thread_messages(&self, root: Option<&Value>) -> Vec<Value> {
        let mut path = format!("/api/v1/conversations/{}/messages", self.w.general);
        if let Some(root) = root {
            path.push_str(&format!("?threadId={}", root["id"].as_str().unwrap()));
        }
        let page = expect(self.hub(), Method::GET, &path, &self.w.alex.key, None, 200).await;
        let mut messages = page["messages"].as_array().cloned().unwrap_or_default();
        messages.sort_by_key(|m| m["seq"].as_u64());
        messages
    }
}

/// `GET /api/v1/apps/{id}/interactions-url` as the operator.
pub async fn url_state(hub: &TestHub, app: Uuid) -> Value {
    let path = format!("/api/v1/apps/{app}/interactions-url");
    expect(hub, Method::GET, &path, ADMIN_TOKEN, None, 200).await
}

/// Waits until `n` jobs of `kind` ended (counted by the runner), by a
/// deadline: `/metrics` is read again after a pause that doubles from 5 ms
/// to 200 ms, so a slow job costs the hub a few reads, not a busy loop.
pub async fn jobs_done(hub: &TestHub, kind: &str, n: usize) {
    let filter = format!("kind=\"{kind}\",outcome=\"done\"");
    let what = format!("{n} {kind} jobs ended");
    metric_reaches(hub, "switchboard_jobs_total", &filter, n as f64, &what).await;
}

/// Waits until the hub's `name{filter}` counts at least `n`, reading
/// `/metrics` with a doubling pause (5 ms to 200 ms) up to a 30 s deadline.
pub async fn metric_reaches(hub: &TestHub, name: &str, filter: &str, n: f64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut pause = Duration::from_millis(5);
    while hub.metric(name, filter).await < n {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(pause.min(deadline.saturating_duration_since(Instant::now()))).await;
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

/// The requests as the hub must send them: signed `v1a` only, verified,
/// no credential of any kind.
pub fn assert_signed_and_bare(requests: &[Received]) {
    for r in requests {
        let signature = r.header("webhook-signature").unwrap_or_default();
        assert!(
            !signature.is_empty() && signature.split(' ').all(|s| s.starts_with("v1a,")),
            "{signature}"
        );
        for (name, value) in &r.headers {
            let name = name.to_ascii_lowercase();
            assert!(
                ![
                    "authorization",
                    "cookie",
                    "proxy-authorization",
                    "x-api-key"
                ]
                .contains(&name.as_str()),
                "a request carried {name}"
            );
            assert!(!value.contains("sbk_"), "a request carried a key in {name}");
        }
    }
}

/// The hub's log holds none of `secrets` (paths, values, bodies).
pub fn assert_log_free_of(hub: &TestHub, secrets: &[&str]) {
    let log = hub.log();
    for s in secrets {
        assert!(!log.contains(s), "the log holds {s:?}");
    }
}

/// The log lines of the hub's requests to apps' URLs.
pub fn url_lines(hub: &TestHub) -> Vec<String> {
    hub.log()
        .lines()
        .filter(|l| l.contains("interactions_url request"))
        .map(str::to_string)
        .collect()
}
