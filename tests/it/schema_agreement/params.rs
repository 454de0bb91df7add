//! Params: each method's `schemas/<method>.params.schema.json` against a
//! real call of the method on a real socket. The hub answers either a
//! result (or an error other than InvalidParams: the params were good) or
//! InvalidParams.

use serde_json::{json, Value};
use uuid::Uuid;

use super::param_cases::{
    app_conversations, connect, conversation_create, event_ack, lists, message_list, message_send,
    task_close, task_request,
};
use super::{judge, validator, Case};
use crate::support::agents::{agent, Agent};
use crate::support::{RawSocket, TestHub};

/// Where a case's `taskId` is filled in with a fresh active task.
pub(super) const FRESH_TASK: &str = "fresh-task";

/// Others the caller puts in the largest group the defaults allow
/// (`messages.max_group_participants` 256, the caller included).
const GROUP_OTHERS_MAX: usize = 255;

pub(super) struct World {
    pub(super) hub: TestHub,
    pub(super) caller: Agent,
    pub(super) others: Vec<Agent>,
    pub(super) app_id: Uuid,
    agent_socket: RawSocket,
    app_socket: RawSocket,
    pub(super) direct: Uuid,
    pub(super) task: Uuid,
    pub(super) task_conversation: Uuid,
    calls: u64,
}

/// The methods' callers, and what the cases name.
pub(super) enum Caller {
    Agent,
    App,
    /// A new socket per case: the connect itself is the call.
    NewSocket,
}

pub(super) struct Group {
    pub(super) method: &'static str,
    pub(super) caller: Caller,
    pub(super) cases: Vec<Case>,
}

impl World {
    async fn start() -> World {
        let hub = TestHub::start_with(TestHub::fast_options()).await;
        let caller = agent(&hub, "caller").await;
        let mut others = Vec::new();
        for i in 0..GROUP_OTHERS_MAX {
            others.push(agent(&hub, &format!("other-{i}")).await);
        }
        let manifest = json!({
            "name": "Bounds",
            "description": "Tasks at the edges",
            "limits": { "maxParticipants": 4 },
            "hooks": {
                "dispatch_authorize": { "kind": "grant" },
                "message_authorize": { "kind": "forwardAllExceptSender" },
                "task_create": { "kind": "accept" }
            }
        });
        let (app_id, app_key) = hub.register_app(&manifest).await;
        let agent_socket = RawSocket::connect_agent(&hub.ws_url(), &caller.key).await;
        let app_socket = RawSocket::connect_app(&hub.ws_url(), &app_key).await;
        let mut w = World {
            app_id: app_id.parse().expect("app id"),
            hub,
            caller,
            others,
            agent_socket,
            app_socket,
            direct: Uuid::nil(),
            task: Uuid::nil(),
            task_conversation: Uuid::nil(),
            calls: 0,
        };
        let b = w.others[0].id;
        let direct = w
            .ok(
                Caller::Agent,
                "agent/conversation/create",
                json!({"kind": "direct", "participants": [b]}),
            )
            .await;
        w.direct = id_at(&direct, "/conversation/id");
        w.task = w.fresh_task().await;
        let created = w
            .ok(
                Caller::App,
                "app/conversation/create",
                json!({"taskId": w.task, "name": "Side", "participants": [w.caller.id]}),
            )
            .await;
        w.task_conversation = id_at(&created, "/conversation/id");
        w
    }

    /// A call that must succeed; its result.
    async fn ok(&mut self, caller: Caller, method: &str, params: Value) -> Value {
        let frame = self.call(&caller, method, params).await;
        frame
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{method} failed: {frame}"))
    }

    async fn call(&mut self, caller: &Caller, method: &str, params: Value) -> Value {
        self.calls += 1;
        let id = json!(self.calls);
        match caller {
            Caller::Agent => self.agent_socket.call(id, method, params).await,
            Caller::App => self.app_socket.call(id, method, params).await,
            Caller::NewSocket => {
                let mut s = RawSocket::connect(&self.hub.ws_url()).await;
                s.call(id, method, params).await
            }
        }
    }

    /// An active task of the app, the caller its initiator and the first
    /// other agent invited.
    async fn fresh_task(&mut self) -> Uuid {
        let params = json!({"appId": self.app_id, "invitedAgentIds": [self.others[0].id]});
        let accepted = self.ok(Caller::Agent, "agent/task/request", params).await;
        id_at(&accepted, "/task/id")
    }

    /// Whether the hub took the params: any answer but InvalidParams.
    async fn hub_takes(&mut self, group: &Group, params: Value) -> bool {
        let frame = self.call(&group.caller, group.method, params).await;
        match frame.get("error") {
            None => true,
            Some(e) => e["code"] != json!(-32602),
        }
    }
}

fn id_at(v: &Value, pointer: &str) -> Uuid {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no id at {pointer} in {v}"))
}

/// A `limit` of `1..=messages.page_max` (default 200) and a bad `after`.
#[tokio::test]
async fn params_agree_with_the_hub_on_every_case() {
    let mut w = World::start().await;
    let mut groups = vec![
        conversation_create(&w),
        message_send(&w),
        message_list(&w),
        event_ack(),
        task_request(&w),
        task_close(),
        connect(&w),
    ];
    groups.extend(lists());
    groups.extend(app_conversations(&w));
    let mut problems = Vec::new();
    let mut count = 0;
    for group in &groups {
        let schema = validator(&format!(
            "{}.params.schema.json",
            group.method.replace('/', ".")
        ));
        for c in &group.cases {
            let mut doc = c.doc.clone();
            if doc.get("taskId") == Some(&json!(FRESH_TASK)) {
                doc["taskId"] = json!(w.fresh_task().await);
            }
            let schema_valid = schema.is_valid(&doc);
            let hub_valid = w.hub_takes(group, doc).await;
            let named = Case {
                name: format!("{} {}", group.method, c.name),
                doc: Value::Null,
                verdict: c.verdict,
            };
            problems.extend(judge(&named, schema_valid, hub_valid));
            count += 1;
        }
    }
    eprintln!(
        "schema agreement: {count} params cases over {} methods",
        groups.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
