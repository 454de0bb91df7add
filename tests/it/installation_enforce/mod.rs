//! Issue 15 step C: the installation enforced everywhere (ADR 0023 §6, §7),
//! against a real hub and real sockets on SQLite and PostgreSQL. Lifecycle
//! changes are written by *this* process straight into the hub's database
//! through `InstallationStore`: exactly "another process changed it", which
//! the running hub learns only through its revocation sweep (or, for a
//! verdict, through the transaction's own check).

mod connect;
mod race;
mod suspend;

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use switchboard::config::Config;
use switchboard::domain::event::NewEvent;
use switchboard::domain::installation::{Actor, ScopeSet, Transition};
use switchboard::domain::now_millis;
use switchboard::store::{DynStore, InstallationRecord, NewInstallation};
use uuid::Uuid;

use crate::support::{pg, RawEvent, RawSocket, TestHub};

/// A hub on `backend` (`"sqlite"` or `"postgres"`) with `env`, and the
/// same database opened as a store in this process.
pub struct Setup {
    pub hub: TestHub,
    pub store: DynStore,
    _dir: tempfile::TempDir,
}

pub async fn setup(backend: &str, env: &[(&str, &str)]) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let mut options = TestHub::fast_options();
    let mut config = Config::default();
    match backend {
        "sqlite" => {
            options.dir = Some(dir.path().to_path_buf());
            config.server.data_dir = dir.path().to_path_buf();
        }
        _ => {
            let url = pg::fresh_database().await;
            options.database_url = Some(url.clone());
            config.storage.database_url = url;
            config.storage.max_connections = 4;
        }
    }
    for (k, v) in env {
        options = options.env(k, v);
    }
    let hub = TestHub::start_with(options).await;
    let store = switchboard::store::open(&config).await.unwrap();
    Setup {
        hub,
        store,
        _dir: dir,
    }
}

/// The sweep every 50 ms: a change written here reaches the hub at once.
pub const FAST_SWEEP: (&str, &str) = ("SWITCHBOARD_GATEWAY__REVOCATION_CHECK_INTERVAL_MS", "50");

impl Setup {
    pub async fn transition(&self, app: Uuid, transition: Transition) {
        let live = self.store.installation(app).await.unwrap().expect("live");
        self.store
            .transition(
                live.id,
                transition,
                Actor::Operator,
                now_millis(),
                &no_events,
            )
            .await
            .unwrap();
    }

    pub async fn set_scopes(&self, app: Uuid, granted: ScopeSet) {
        self.store
            .set_scopes(app, granted, Actor::Operator, now_millis(), &no_events)
            .await
            .unwrap();
    }

    pub async fn install(&self, app: Uuid) {
        let manifest = self.store.app(app).await.unwrap().unwrap().manifest;
        let requested = manifest.requested_scopes();
        let new = NewInstallation {
            id: Uuid::now_v7(),
            app_id: app,
            requested,
            granted: requested,
            key: None,
            idem: None,
            actor: Actor::Operator,
            now: now_millis(),
        };
        self.store.install(&new, &no_events).await.unwrap();
    }

    /// `GET /api/v1/events` with `key`: the status and body.
    pub async fn catch_up(&self, key: &str) -> (u16, Value) {
        let r = self
            .hub
            .http
            .get(format!("{}/api/v1/events?limit=10", self.hub.base))
            .bearer_auth(key)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }
}

/// Writes no event with the change: these tests watch sockets, gates and
/// answers, not the app's stream.
fn no_events(_: &InstallationRecord) -> Vec<NewEvent> {
    Vec::new()
}

/// An app's connect refused for its installation: the ForbiddenError with
/// `reason`, then the close with `code`.
pub async fn assert_connect_refused(hub: &TestHub, key: &str, reason: &str, code: u16) {
    let mut s = RawSocket::connect(&hub.ws_url()).await;
    let r = s
        .call(json!("c"), "app/network/connect", json!({"appKey": key}))
        .await;
    assert_eq!(r["error"]["code"], json!(-32003), "{r}");
    assert_eq!(r["error"]["data"]["reason"], json!(reason), "{r}");
    let closed = s.closed().await.map(|(c, _)| c);
    assert_eq!(closed, Some(code), "refused {reason}");
}

/// A REST answer 403 with `reason`.
pub fn assert_forbidden(answer: &(u16, Value), reason: &str) {
    assert_eq!(answer.0, 403, "{}", answer.1);
    assert_eq!(
        answer.1["error"]["code"],
        json!("forbidden"),
        "{}",
        answer.1
    );
    assert_eq!(answer.1["error"]["reason"], json!(reason), "{}", answer.1);
}

/// An app whose three gates are hooks, the fake app answering each.
pub fn hooked() -> Value {
    json!({
        "name": "Gatekeeper",
        "description": "Gates decided by a fake app",
        "limits": { "maxParticipants": 4 },
        "conversations": [{ "key": "all", "name": "Everyone", "participantFilter": "all" }],
        "hooks": {
            "task_create": {"kind": "hook", "timeoutMs": 10_000},
            "message_authorize": {"kind": "hook", "timeoutMs": 10_000},
            "dispatch_authorize": {"kind": "hook", "timeoutMs": 10_000}
        }
    })
}

/// A fake app on a raw socket: accepts every task, forwards every message
/// to `recipient`, grants every dispatch, and records every request's
/// method. `closed` holds its socket's close code once the hub closed it.
pub struct FakeApp {
    pub calls: Arc<Mutex<Vec<String>>>,
    pub closed: tokio::sync::oneshot::Receiver<Option<u16>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeApp {
    pub async fn start(hub: &TestHub, key: &str, recipient: Uuid) -> FakeApp {
        let mut socket = RawSocket::connect_app(&hub.ws_url(), key).await;
        let calls = Arc::new(Mutex::new(Vec::new()));
        let seen = calls.clone();
        let (tx, closed) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            loop {
                let frame = match socket.next_event().await {
                    RawEvent::Text(frame) => frame,
                    RawEvent::Close(c) => {
                        let _ = tx.send(c.map(|(code, _)| code));
                        return;
                    }
                    RawEvent::Ended => {
                        let _ = tx.send(None);
                        return;
                    }
                };
                let (Some(method), Some(id)) = (frame["method"].as_str(), frame.get("id")) else {
                    continue;
                };
                seen.lock().unwrap().push(method.to_string());
                let result = answer(method, recipient);
                socket
                    .send_json(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
                    .await;
            }
        });
        FakeApp {
            calls,
            closed,
            task,
        }
    }

    /// The close code the hub closed the socket with, within the deadline.
    pub async fn wait_closed(&mut self) -> Option<u16> {
        tokio::time::timeout(crate::support::raw::DEADLINE, &mut self.closed)
            .await
            .expect("the hub closes the socket within the deadline")
            .unwrap()
    }

    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

impl Drop for FakeApp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The fake app's answer to a gate.
pub fn answer(method: &str, recipient: Uuid) -> Value {
    match method {
        "app/task/create" => json!({"verdict": {"decision": "Accept"}}),
        "app/message/authorize" => {
            json!({"verdict": {"decision": "Forward", "recipients": [recipient]}})
        }
        _ => json!({"admission": {"decision": "grant", "leaseTimeoutMs": 60000}}),
    }
}

/// The hub's metrics page.
pub async fn metrics(hub: &TestHub) -> String {
    hub.http
        .get(format!("{}/metrics", hub.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The app's id as a Uuid.
pub fn id(s: &str) -> Uuid {
    s.parse().unwrap()
}
