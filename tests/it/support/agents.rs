//! Helpers for tests that drive agents through the SDK.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::Value;
use switchboard::client::{AgentClient, Notification};
use switchboard::domain::message::Part;
use switchboard::protocol::conversations::{
    AgentConversationCreate, AgentMessageSend, ConversationCreateParams, MessageSendParams,
    MessageSendResult, NewConversationKind,
};
use tokio::sync::mpsc::UnboundedReceiver;
use uuid::Uuid;

use super::TestHub;

pub struct Agent {
    pub id: Uuid,
    pub key: String,
}

pub async fn agent(hub: &TestHub, name: &str) -> Agent {
    let (id, key) = hub.register_agent(name).await;
    Agent {
        id: id.parse().unwrap(),
        key,
    }
}

pub fn text(s: &str) -> Vec<Part> {
    vec![Part::Text {
        text: s.to_string(),
    }]
}

pub async fn direct(client: &AgentClient, other: Uuid) -> Uuid {
    client
        .call::<AgentConversationCreate>(ConversationCreateParams {
            kind: NewConversationKind::Direct,
            participants: vec![other],
            name: None,
        })
        .await
        .unwrap()
        .conversation
        .id
}

pub async fn send(client: &AgentClient, conversation: Uuid, body: &str) -> MessageSendResult {
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

/// Sends `n` messages numbered from `first`, up to `parallel` at a time.
pub async fn send_many(
    client: &AgentClient,
    conversation: Uuid,
    first: usize,
    n: usize,
    parallel: usize,
) {
    use futures_util::StreamExt;
    futures_util::stream::iter(first..first + n)
        .map(|i| async move { send(client, conversation, &format!("m{i}")).await })
        .buffer_unordered(parallel)
        .collect::<Vec<_>>()
        .await;
}

/// The next notification of `method`, skipping others, within 30 s.
pub async fn next_of(rx: &mut UnboundedReceiver<Notification>, method: &str) -> Value {
    loop {
        let n = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("no {method} within the deadline"))
            .expect("connection open");
        if n.method == method {
            return n.params;
        }
    }
}

/// Collects `n` stored-event notifications and checks they carry seq
/// `after+1 ..= after+n` in order, each id once.
pub async fn expect_sequence(
    rx: &mut UnboundedReceiver<Notification>,
    after: u64,
    n: u64,
) -> Vec<Value> {
    let mut out = Vec::with_capacity(n as usize);
    let mut ids = HashSet::new();
    while (out.len() as u64) < n {
        let note = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("only {} of {n} events arrived", out.len()))
            .expect("connection open");
        if note.params.get("seq").is_none() {
            continue; // ephemeral
        }
        let seq = note.params["seq"].as_u64().unwrap();
        assert_eq!(
            seq,
            after + 1 + out.len() as u64,
            "events arrive in seq order without gaps"
        );
        assert!(
            ids.insert(note.params["id"].as_str().unwrap().to_string()),
            "no duplicates"
        );
        out.push(note.params);
    }
    out
}
