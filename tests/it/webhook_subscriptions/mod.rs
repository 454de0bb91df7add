//! Webhook subscriptions against a real hub (ADR 0033): the scripted
//! receiver over real TLS on loopback, the hub's own keys from
//! `switchboard keys rotate`, events made by real manifest upgrades.

mod crash;
mod delivery;
mod lifecycle;
mod manifest;
mod operations;
mod pause;
mod signing;
mod store;

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use switchboard::client::webhooks::VerificationKey;

use crate::installations::{call, described};
use crate::support::hub::{Options, ADMIN_TOKEN};
use crate::support::receiver::Receiver;
use crate::support::{werewolf_manifest, TestHub};

pub const KEK: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
pub const SUBSCRIPTIONS: &str = "/api/v1/webhooks/subscriptions";
pub const CHANGED: &str = "app/installation/changed";

/// A hub that may send to the receiver, with a signing key, and one app.
pub struct World {
    pub receiver: Receiver,
    pub hub: TestHub,
    /// Holds the data directory and the CA file.
    _root: tempfile::TempDir,
    pub options: Options,
    pub app: String,
    pub key: String,
    /// Manifest upgrades made so far (each writes one event).
    pub editions: u32,
}

fn cli(args: &[&str], data: &Path, database_url: Option<&str>) -> (bool, String, String) {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"));
    c.args(args).arg("--data-dir").arg(data);
    if let Some(url) = database_url {
        c.arg("--database-url").arg(url);
    }
    c.env("SWITCHBOARD_WEBHOOKS__KEY_ENCRYPTION_KEY", KEK);
    let out = c.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

impl World {
    pub async fn new(options: Options) -> World {
        let receiver = Receiver::start().await;
        let root = tempfile::tempdir().unwrap();
        let data = root.path().join("data");
        let ca_file = root.path().join("ca.pem");
        std::fs::write(&ca_file, &receiver.ca.ca_pem).unwrap();
        crate::support::migrate(&data, options.database_url.as_deref());
        let (ok, _, err) = cli(&["keys", "rotate"], &data, options.database_url.as_deref());
        assert!(ok, "keys rotate: {err}");
        let entry = format!("[\"localhost:{}\"]", receiver.port());
        let options = Options {
            dir: Some(data),
            ..options
                .env("SWITCHBOARD_WEBHOOKS__KEY_ENCRYPTION_KEY", KEK)
                .env("SWITCHBOARD_EGRESS__ALLOWLIST", &entry)
                .env("SWITCHBOARD_EGRESS__PRIVATE_OVERRIDE", &entry)
                .env("SWITCHBOARD_EGRESS__EXTRA_CA_FILE", ca_file.display())
                .env("SWITCHBOARD_EGRESS__CONNECT_TIMEOUT_MS", 2_000)
                .env("SWITCHBOARD_EGRESS__REQUEST_TIMEOUT_MS", 2_000)
                .env("SWITCHBOARD_WEBHOOKS__CLAIM_MS", 4_000)
                .env("SWITCHBOARD_WEBHOOKS__POLL_INTERVAL_MS", 50)
                .env("SWITCHBOARD_WEBHOOKS__RETRY_BASE_MS", 200)
        };
        let hub = TestHub::start_with(clone_options(&options)).await;
        let (app, key) = hub.register_app(&werewolf_manifest()).await;
        let w = World {
            receiver,
            hub,
            _root: root,
            options,
            app,
            key,
            editions: 0,
        };
        w.receiver.trust_keys(w.published_keys().await);
        w
    }

    pub fn data(&self) -> PathBuf {
        self.options.dir.clone().unwrap()
    }

    /// The same hub again on the same database (after a kill).
    pub async fn restart(&mut self) {
        self.hub = TestHub::start_with(clone_options(&self.options)).await;
    }

    pub fn cli(&self, args: &[&str]) -> (bool, String, String) {
        cli(args, &self.data(), self.options.database_url.as_deref())
    }

    pub async fn published_keys(&self) -> Vec<VerificationKey> {
        let body: Value = self
            .hub
            .http
            .get(format!("{}/api/v1/webhooks/keys", self.hub.base))
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

    pub fn url(&self, path: &str) -> String {
        self.receiver.url("localhost", path)
    }

    /// `POST /api/v1/webhooks/subscriptions` with the app's key.
    pub async fn subscribe(&self, body: Value) -> (u16, Value) {
        call(
            &self.hub,
            Method::POST,
            SUBSCRIPTIONS,
            &self.key,
            Some(&body),
        )
        .await
    }

    /// A subscription to `path` of `types`; its id.
    pub async fn subscribed(&self, path: &str, types: &[&str]) -> String {
        let (status, body) = self
            .subscribe(json!({"url": self.url(path), "eventTypes": types}))
            .await;
        assert_eq!(status, 201, "{body}");
        assert!(body.get("secret").is_none(), "{body}");
        body["subscription"]["id"].as_str().unwrap().to_string()
    }

    /// One more event in the app's log: a manifest upgrade writes
    /// `app/installation/changed`. Its id.
    pub async fn event(&mut self) -> String {
        self.editions += 1;
        let path = format!("/api/v1/apps/{}/manifest", self.app);
        let next = described(&format!("edition {}", self.editions));
        let (status, body) = call(&self.hub, Method::PUT, &path, ADMIN_TOKEN, Some(&next)).await;
        assert_eq!(status, 200, "{body}");
        self.events(CHANGED).await.last().unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// The app's stored events of `event_type`, from its catch-up.
    pub async fn events(&self, event_type: &str) -> Vec<Value> {
        crate::installations::app_events(&self.hub, &self.key, event_type).await
    }

    pub async fn subscription(&self, id: &str) -> Value {
        let path = format!("{SUBSCRIPTIONS}/{id}");
        let (status, body) = call(&self.hub, Method::GET, &path, &self.key, None).await;
        assert_eq!(status, 200, "{body}");
        body["subscription"].clone()
    }

    /// The delivery log, oldest first, once it holds `n` attempts (the
    /// record follows the receiver's answer).
    pub async fn attempts(&self, id: &str, n: usize) -> Vec<Value> {
        let path = format!("{SUBSCRIPTIONS}/{id}/attempts");
        let read = async {
            let mut tick = tokio::time::interval(Duration::from_millis(50));
            loop {
                tick.tick().await;
                let (status, body) = call(&self.hub, Method::GET, &path, &self.key, None).await;
                assert_eq!(status, 200, "{body}");
                let mut log = body["attempts"].as_array().unwrap().clone();
                if log.len() >= n {
                    log.reverse();
                    return log;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(30), read)
            .await
            .unwrap_or_else(|_| panic!("{n} attempts recorded"))
    }

    pub async fn operator(&self, rest: &str) {
        let (status, body) =
            crate::installations::operator(&self.hub, Method::POST, &self.app, rest, None).await;
        assert_eq!(status, 200, "{rest}: {body}");
    }
}

fn clone_options(o: &Options) -> Options {
    Options {
        env: o.env.clone(),
        database_url: o.database_url.clone(),
        dir: o.dir.clone(),
        nofile: o.nofile,
    }
}

/// The `webhook-id` of each request.
pub fn ids(received: &[crate::support::receiver::Received]) -> Vec<String> {
    received
        .iter()
        .map(|r| r.header("webhook-id").unwrap_or_default().to_string())
        .collect()
}

/// Milliseconds between two of the hub's RFC 3339 times.
pub fn ms_between(from: &Value, to: &Value) -> i64 {
    let t = |v: &Value| {
        chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap())
            .unwrap()
            .timestamp_millis()
    };
    t(to) - t(from)
}
