//! The grown manifest (ADR 0023 §1) at registration, and the seed-002
//! callback names (§8) deciding real gates, over real sockets.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use switchboard::client::AgentClient;
use switchboard::protocol::conversations::DeliveryState;
use switchboard::protocol::tasks::{AgentTaskRequest, TaskRequestParams};
use uuid::Uuid;

use crate::support::agents::{agent, next_of, send};
use crate::support::hub::Options;
use crate::support::{werewolf_manifest, RawEvent, RawSocket, TestHub};

/// The registration route's answer to a refused manifest: its code, its
/// message, and exactly these problems.
fn assert_refused(status: u16, body: &Value, problems: &[(&str, &str)]) {
    assert_eq!(status, 400, "{body}");
    let details: Vec<Value> = problems
        .iter()
        .map(|(pointer, message)| json!({"pointer": pointer, "message": message}))
        .collect();
    assert_eq!(
        body,
        &json!({"error": {
            "code": "invalid_manifest",
            "message": "the manifest is invalid",
            "details": details,
        }}),
    );
}

#[tokio::test]
async fn manifest_hook_without_events_subscribe_refused() {
    let hub = TestHub::start().await;
    let mut m = werewolf_manifest();
    m["scopes"] = json!(["messages:write"]);
    m["hooks"]["dispatch_authorize"] = json!({"kind": "grant"});
    let (status, body) = hub
        .post("/api/v1/apps/register", &json!({"manifest": m}))
        .await;
    assert_refused(
        status,
        &body,
        &[(
            "/manifest/hooks/message_authorize/kind",
            "a hook gate needs the scope events:subscribe in /scopes",
        )],
    );
    // Asking for the scope, or no scopes at all (seed 000), registers.
    m["scopes"] = json!(["messages:write", "events:subscribe"]);
    hub.register_app(&m).await;
    hub.register_app(&werewolf_manifest()).await;
}

#[tokio::test]
async fn interactions_urls_are_https_and_on_the_egress_allowlist() {
    let hub = TestHub::start_with(
        Options::default().env("SWITCHBOARD_EGRESS__ALLOWLIST", r#"["hooks.example.com"]"#),
    )
    .await;
    let with_url = |url: &str| {
        let mut m = werewolf_manifest();
        m["delivery"] = json!({"mode": "interactions_url", "interactionsUrl": url});
        json!({"manifest": m})
    };
    let at = "/manifest/delivery/interactionsUrl";
    for (url, message) in [
        ("http://hooks.example.com/i", "must use https"),
        (
            "https://elsewhere.example.com/i",
            "its host and port must be on the hub's egress.allowlist",
        ),
        (
            "https://hooks.example.com:8443/i",
            "its host and port must be on the hub's egress.allowlist",
        ),
    ] {
        let (status, body) = hub.post("/api/v1/apps/register", &with_url(url)).await;
        assert_refused(status, &body, &[(at, message)]);
    }
    let (status, body) = hub
        .post(
            "/api/v1/apps/register",
            &with_url("https://hooks.example.com/i"),
        )
        .await;
    assert_eq!(status, 201, "{body}");
}

/// What the hub stores is what the app declared: the seed-000 manifest
/// comes back without any new member, a grown one with all of them.
async fn manifests_are_stored_as_declared_on(options: Options) {
    let hub = TestHub::start_with(options).await;
    let (_, key) = hub.register_app(&werewolf_manifest()).await;
    let mut app = RawSocket::connect_app(&hub.ws_url(), &key).await;
    let me = app.call(json!(1), "app/identity/get", json!({})).await;
    assert_eq!(me["result"]["manifest"], werewolf_manifest(), "{me}");

    let mut grown = werewolf_manifest();
    grown["scopes"] = json!(["events:subscribe", "commands:write"]);
    grown["commands"] = json!([{"name": "vote", "description": "Vote", "requiredLevel": "write"}]);
    grown["components"] = json!(["button"]);
    grown["eventSubscriptions"] = json!(["app/task/activated"]);
    grown["callbackNames"] = json!("moltzap-v1");
    let (_, key) = hub.register_app(&grown).await;
    let mut app = RawSocket::connect_app(&hub.ws_url(), &key).await;
    let me = app.call(json!(1), "app/identity/get", json!({})).await;
    assert_eq!(me["result"]["manifest"], grown, "{me}");
}

#[tokio::test]
async fn manifests_are_stored_as_declared() {
    manifests_are_stored_as_declared_on(Options::default()).await;
}

#[tokio::test]
async fn manifests_are_stored_as_declared_on_postgres() {
    manifests_are_stored_as_declared_on(on_postgres().await).await;
}

async fn on_postgres() -> Options {
    Options {
        database_url: Some(crate::support::pg::fresh_database().await),
        ..TestHub::fast_options()
    }
}

/// A fake app on a raw socket that answers only the two gate methods it
/// is given, by the text of the message: "block" blocks, "deny" denies the
/// dispatch, anything else is forwarded to `recipient` or granted. Any
/// other request gets -32601, as an app written against other names would
/// answer. It records every method the hub sends it.
struct FakeApp {
    received: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeApp {
    async fn start(hub: &TestHub, key: &str, answers: [&'static str; 2], recipient: Uuid) -> Self {
        let mut socket = RawSocket::connect_app(&hub.ws_url(), key).await;
        let received = Arc::new(Mutex::new(Vec::new()));
        let seen = received.clone();
        let task = tokio::spawn(async move {
            loop {
                let frame = match socket.next_event().await {
                    RawEvent::Text(frame) => frame,
                    RawEvent::Close(_) | RawEvent::Ended => return,
                };
                let Some(method) = frame["method"].as_str() else {
                    continue;
                };
                // Events (`app/task/activated`, `app/message/received`)
                // are notifications: only the hub's calls are recorded.
                if frame.get("id").is_none() {
                    continue;
                }
                seen.lock().unwrap().push(method.to_string());
                let text = frame["params"]["message"]["parts"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let answer = if method == answers[0] {
                    if text.contains("block") {
                        json!({"result": {"verdict": {"decision": "Block", "reason": "blocked by the app"}}})
                    } else {
                        json!({"result": {"verdict": {"decision": "Forward", "recipients": [recipient]}}})
                    }
                } else if method == answers[1] {
                    if text.contains("deny") {
                        json!({"result": {"admission": {"decision": "deny", "reason": "denied by the app"}}})
                    } else {
                        json!({"result": {"admission": {"decision": "grant", "leaseTimeoutMs": 60000}}})
                    }
                } else {
                    json!({"error": {"code": -32601, "message": "Method not found"}})
                };
                let mut reply = json!({"jsonrpc": "2.0", "id": frame["id"]});
                for (k, v) in answer.as_object().unwrap() {
                    reply[k] = v.clone();
                }
                socket.send_json(&reply).await;
            }
        });
        FakeApp { received, task }
    }

    /// The requests (not notifications) received so far, in order.
    fn requests(&self) -> Vec<String> {
        self.received.lock().unwrap().clone()
    }

    fn all(&self) -> Vec<String> {
        self.received.lock().unwrap().clone()
    }
}

impl Drop for FakeApp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn gated(callback_names: Option<&str>) -> Value {
    let mut m = json!({
        "name": "Gatekeeper",
        "description": "Gates decided by a fake app",
        "limits": { "maxParticipants": 4 },
        "conversations": [{ "key": "all", "name": "Everyone", "participantFilter": "all" }],
        "hooks": {
            "task_create": {"kind": "accept"},
            "message_authorize": {"kind": "hook", "timeoutMs": 10_000},
            "dispatch_authorize": {"kind": "hook", "timeoutMs": 10_000}
        }
    });
    if let Some(names) = callback_names {
        m["callbackNames"] = json!(names);
    }
    m
}

/// Two messages and two dispatches through one app's gates, each decided
/// by the fake app's answer.
async fn drive_gates(
    app_id: &str,
    c0: &AgentClient,
    c1: &AgentClient,
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<switchboard::client::Notification>,
    a1: Uuid,
) {
    let task = c0
        .call::<AgentTaskRequest>(TaskRequestParams {
            app_id: app_id.parse().unwrap(),
            invited_agent_ids: vec![a1],
            initial_conversation: None,
        })
        .await
        .unwrap();
    let town = task.conversations[0].id;

    let hello = send(c0, town, "hello").await;
    assert_eq!(hello.delivery.state, DeliveryState::Forwarded, "{hello:?}");
    assert_eq!(hello.delivery.recipients, Some(1));
    let blocked = send(c0, town, "block this one").await;
    assert_eq!(blocked.delivery.state, DeliveryState::Blocked);
    assert_eq!(
        blocked.delivery.reason.as_deref(),
        Some("blocked by the app")
    );

    let lease = |v: &Value| {
        let l = &v["payload"]["lease"];
        (l["state"].as_str().map(str::to_string), l["reason"].clone())
    };
    dispatch(c1, town, hello.message.id).await;
    let granted = next_of(rx, "agent/dispatch/released").await;
    assert_eq!(lease(&granted), (Some("granted".into()), Value::Null));
    let deny = send(c0, town, "deny me").await;
    assert_eq!(deny.delivery.state, DeliveryState::Forwarded);
    dispatch(c1, town, deny.message.id).await;
    let denied = next_of(rx, "agent/dispatch/released").await;
    assert_eq!(
        lease(&denied),
        (Some("denied".into()), json!("denied by the app"))
    );
}

async fn dispatch(client: &AgentClient, conversation: Uuid, message: Uuid) {
    use switchboard::protocol::tasks::{AgentDispatchRequest, DispatchRequestParams};
    client
        .call::<AgentDispatchRequest>(DispatchRequestParams {
            conversation_id: conversation,
            message_id: message,
        })
        .await
        .unwrap();
}

const V1_NAMES: [&str; 2] = ["apps/onBeforeMessageDelivery", "apps/onBeforeDispatch"];
const CURRENT_NAMES: [&str; 2] = ["app/message/authorize", "app/dispatch/authorize"];

/// The order the hub calls each app in `drive_gates`: a message gate per
/// send (three), a dispatch gate per dispatch (two).
fn expected_calls(names: [&str; 2]) -> Vec<String> {
    [names[0], names[0], names[1], names[0], names[1]]
        .map(str::to_string)
        .to_vec()
}

async fn moltzap_v1_callbacks_decide_gates_on(options: Options) {
    let hub = TestHub::start_with(options).await;
    let (v1_id, v1_key) = hub.register_app(&gated(Some("moltzap-v1"))).await;
    let (current_id, current_key) = hub.register_app(&gated(None)).await;
    let (a0, a1) = (agent(&hub, "a0").await, agent(&hub, "a1").await);
    let c0 = AgentClient::connect(&hub.base, &a0.key).await.unwrap();
    let c1 = AgentClient::connect(&hub.base, &a1.key).await.unwrap();
    let mut rx = c1.connection.notifications().unwrap();

    let v1 = FakeApp::start(&hub, &v1_key, V1_NAMES, a1.id).await;
    drive_gates(&v1_id, &c0, &c1, &mut rx, a1.id).await;
    assert_eq!(v1.requests(), expected_calls(V1_NAMES));

    let current = FakeApp::start(&hub, &current_key, CURRENT_NAMES, a1.id).await;
    drive_gates(&current_id, &c0, &c1, &mut rx, a1.id).await;
    assert_eq!(current.requests(), expected_calls(CURRENT_NAMES));
    assert!(
        !current.all().iter().any(|m| V1_NAMES.contains(&m.as_str())),
        "a current app never receives the seed-002 names: {:?}",
        current.all()
    );

    // Metrics keep the canonical name whatever the app was called by.
    let metrics = hub
        .http
        .get(format!("{}/metrics", hub.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!metrics.contains("onBefore"), "{metrics}");
    assert!(metrics.contains("app/message/authorize"));
}

#[tokio::test]
async fn moltzap_v1_callbacks_decide_gates() {
    moltzap_v1_callbacks_decide_gates_on(TestHub::fast_options()).await;
}

#[tokio::test]
async fn moltzap_v1_callbacks_decide_gates_on_postgres() {
    moltzap_v1_callbacks_decide_gates_on(on_postgres().await).await;
}

/// The SDK's app answers a gate under the seed-002 name as well, so an SDK
/// app works whatever its manifest's `callbackNames`.
#[tokio::test]
async fn an_sdk_app_answers_the_seed_002_names() {
    use switchboard::client::AppClient;
    use switchboard::domain::gate::{MessageAuthorizeAnswer, MessageVerdict};
    use switchboard::protocol::tasks::AppMessageAuthorize;

    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let mut m = gated(Some("moltzap-v1"));
    m["hooks"]["dispatch_authorize"] = json!({"kind": "grant"});
    let (app_id, app_key) = hub.register_app(&m).await;
    let (a0, a1) = (agent(&hub, "a0").await, agent(&hub, "a1").await);
    let recipient = a1.id;
    let _app = AppClient::builder(&hub.base, &app_key)
        .handle::<AppMessageAuthorize, _, _>(move |_| async move {
            Ok(MessageAuthorizeAnswer {
                verdict: MessageVerdict::Forward {
                    recipients: vec![recipient],
                },
            })
        })
        .connect()
        .await
        .unwrap();
    let c0 = AgentClient::connect(&hub.base, &a0.key).await.unwrap();
    let task = c0
        .call::<AgentTaskRequest>(TaskRequestParams {
            app_id: app_id.parse().unwrap(),
            invited_agent_ids: vec![a1.id],
            initial_conversation: None,
        })
        .await
        .unwrap();
    let r = send(&c0, task.conversations[0].id, "hello").await;
    assert_eq!(r.delivery.state, DeliveryState::Forwarded, "{r:?}");
    assert_eq!(r.delivery.recipients, Some(1));
}
