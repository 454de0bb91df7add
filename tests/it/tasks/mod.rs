//! App-bound tasks, the three gates and dispatch leases, end to end, by
//! gate (the shared world and helpers are here).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchboard::client::{AgentClient, AppClient, ClientError};
use switchboard::domain::gate::{
    AdmissionAnswer, DispatchAuthorizeAnswer, MessageAuthorizeAnswer, MessageVerdict,
    TaskCreateAnswer, TaskVerdict,
};
use switchboard::protocol::conversations::{
    AgentMessageSend, DeliveryState, MessageSendParams, MessageSendResult,
};
use switchboard::protocol::tasks::*;
use switchboard::rpc::RpcError;
use tokio::sync::Notify;
use uuid::Uuid;

use crate::support::agents::{agent, next_of, text, Agent};
use crate::support::hub::Options;
use crate::support::{RawSocket, TestHub};

fn manifest(task_create: Value, message_authorize: Value, dispatch_authorize: Value) -> Value {
    json!({
        "name": "Gatekeeper",
        "description": "A test app",
        "limits": { "maxParticipants": 4 },
        "conversations": [
            { "key": "all", "name": "Everyone", "participantFilter": "all" },
            { "key": "none", "name": "Nobody yet", "participantFilter": "none" }
        ],
        "hooks": {
            "task_create": task_create,
            "message_authorize": message_authorize,
            "dispatch_authorize": dispatch_authorize
        }
    })
}

fn open() -> Value {
    manifest(
        json!({"kind": "accept"}),
        json!({"kind": "forwardAllExceptSender"}),
        json!({"kind": "grant"}),
    )
}

struct World {
    hub: TestHub,
    app_id: Uuid,
    app_key: String,
    agents: Vec<Agent>,
}

async fn world(options: Options, manifest: Value, agents: usize) -> World {
    let hub = TestHub::start_with(options).await;
    let (app_id, app_key) = hub.register_app(&manifest).await;
    let mut list = Vec::new();
    for i in 0..agents {
        list.push(agent(&hub, &format!("agent-{i}")).await);
    }
    World {
        hub,
        app_id: app_id.parse().unwrap(),
        app_key,
        agents: list,
    }
}

impl World {
    async fn client(&self, i: usize) -> AgentClient {
        AgentClient::connect(&self.hub.base, &self.agents[i].key)
            .await
            .unwrap()
    }

    async fn request(
        &self,
        client: &AgentClient,
        invited: &[usize],
    ) -> Result<AcceptedTask, ClientError> {
        client
            .call::<AgentTaskRequest>(TaskRequestParams {
                app_id: self.app_id,
                invited_agent_ids: invited.iter().map(|i| self.agents[*i].id).collect(),
                initial_conversation: None,
            })
            .await
    }
}

fn code_of(err: &ClientError) -> (String, Value) {
    let e = err
        .rpc()
        .unwrap_or_else(|| panic!("not an RPC error: {err}"));
    (
        e.tag.clone().unwrap(),
        e.data.as_deref().cloned().unwrap_or(Value::Null),
    )
}

async fn send(client: &AgentClient, conversation: Uuid, body: &str) -> MessageSendResult {
    client
        .call::<AgentMessageSend>(MessageSendParams {
            conversation_id: conversation,
            parts: text(body),
            client_msg_id: None,
            reply_to: None,
            thread_id: None,
            components: None,
            card_use: None,
        })
        .await
        .unwrap()
}

async fn on_postgres() -> Options {
    Options {
        database_url: Some(crate::support::pg::fresh_database().await),
        ..TestHub::fast_options()
    }
}

fn hooked(timeout_ms: u64) -> Value {
    manifest(
        json!({"kind": "hook", "timeoutMs": timeout_ms}),
        json!({"kind": "hook", "timeoutMs": timeout_ms}),
        json!({"kind": "hook", "timeoutMs": timeout_ms}),
    )
}

async fn send_result(
    client: &AgentClient,
    conversation: Uuid,
    body: &str,
) -> Result<MessageSendResult, ClientError> {
    client
        .call::<AgentMessageSend>(MessageSendParams {
            conversation_id: conversation,
            parts: text(body),
            client_msg_id: None,
            reply_to: None,
            thread_id: None,
            components: None,
            card_use: None,
        })
        .await
}

async fn dispatch(
    client: &AgentClient,
    conversation: Uuid,
    message: Uuid,
) -> Result<LeaseResult, ClientError> {
    client
        .call::<AgentDispatchRequest>(DispatchRequestParams {
            conversation_id: conversation,
            message_id: message,
        })
        .await
}

mod answers;
mod failing_gates;
mod leases;
mod load_and_restart;
mod message_gate;
mod sdk_deadline;
mod task_conversations;
mod task_gate;
