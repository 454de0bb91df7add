//! The chaos run's world: the agents, the hook app and the conversations,
//! registered and opened over the hub's own API; and the verdicts read
//! back from the senders' logs over REST.

use std::collections::HashMap;

use serde_json::{json, Value};
use uuid::Uuid;

use super::checker::{Outcome, Verdict};
use super::hub::HubProcess;
use crate::client::{AgentClient, HttpClient};
use crate::protocol::conversations::{
    AgentConversationCreate, ConversationCreateParams, NewConversationKind,
};
use crate::protocol::tasks::{AgentTaskRequest, TaskRequestParams};

/// Agents in the group; the first [`TASK_MEMBERS`] also share the task.
const GROUP: usize = 6;
const TASK_MEMBERS: usize = 4;

#[derive(Clone, Debug)]
pub struct Agent {
    pub id: Uuid,
    pub key: String,
}

pub struct World {
    /// The senders, each also a receiver.
    pub group: Vec<Agent>,
    /// The consumer the run slows, written to by `flooder` only.
    pub slow: Agent,
    pub flooder: Agent,
    pub app_key: String,
    pub group_id: Uuid,
    pub task_conversation: Uuid,
    pub direct: Uuid,
    /// The slow consumer's place among [`World::receivers`].
    pub slow_index: usize,
}

impl World {
    /// Every agent whose events are checked: the group, then the slow one.
    pub fn receivers(&self) -> impl Iterator<Item = &Agent> {
        self.group.iter().chain(std::iter::once(&self.slow))
    }

    fn task_members(&self) -> Vec<Uuid> {
        self.group[..TASK_MEMBERS].iter().map(|a| a.id).collect()
    }

    /// Where `agent` sends.
    pub fn conversations_of(&self, agent: Uuid) -> Vec<Uuid> {
        let mut out = vec![self.group_id];
        if self.task_members().contains(&agent) {
            out.push(self.task_conversation);
        }
        out
    }

    /// Every agent member of each conversation.
    pub fn members(&self) -> HashMap<Uuid, Vec<Uuid>> {
        HashMap::from([
            (self.group_id, self.group.iter().map(|a| a.id).collect()),
            (self.task_conversation, self.task_members()),
            (self.direct, vec![self.flooder.id, self.slow.id]),
        ])
    }
}

/// The app: every message of its task conversations goes to its hook.
fn manifest() -> Value {
    json!({
        "name": "chaos",
        "description": "the chaos run's hook app",
        "limits": {"maxParticipants": 10},
        "conversations": [{"key": "room", "name": "Room", "participantFilter": "all"}],
        "hooks": {
            "task_create": {"kind": "accept"},
            "message_authorize": {"kind": "hook", "timeoutMs": 5000},
            "dispatch_authorize": {"kind": "grant"}
        }
    })
}

/// Registers everyone and opens the group, the task and the direct
/// conversation, on the hub as it is now.
pub async fn world(hub: &HubProcess) -> anyhow::Result<World> {
    let base = HubProcess::up(&mut hub.watch()).await?.base;
    let http = HttpClient::new(&base);
    let mut agents = Vec::new();
    for i in 0..GROUP + 2 {
        let c = http.register_agent(&format!("chaos-{i}"), None).await?;
        agents.push(Agent {
            id: c.agent_id,
            key: c.agent_key,
        });
    }
    let flooder = agents.pop().expect("flooder");
    let slow = agents.pop().expect("slow");
    let app = http.register_app(&manifest()).await?;
    let first = AgentClient::connect(&base, &agents[0].key).await?;
    let group_id = create(&first, NewConversationKind::Group, &agents[1..]).await?;
    let task = first
        .call::<AgentTaskRequest>(TaskRequestParams {
            app_id: app.app_id,
            invited_agent_ids: agents[1..TASK_MEMBERS].iter().map(|a| a.id).collect(),
            initial_conversation: None,
        })
        .await?;
    let task_conversation = task
        .conversations
        .first()
        .ok_or_else(|| anyhow::anyhow!("the task opened no conversation"))?
        .id;
    let from_flooder = AgentClient::connect(&base, &flooder.key).await?;
    let direct = create(
        &from_flooder,
        NewConversationKind::Direct,
        std::slice::from_ref(&slow),
    )
    .await?;
    Ok(World {
        slow_index: agents.len(),
        group: agents,
        slow,
        flooder,
        app_key: app.app_key,
        group_id,
        task_conversation,
        direct,
    })
}

async fn create(
    client: &AgentClient,
    kind: NewConversationKind,
    with: &[Agent],
) -> anyhow::Result<Uuid> {
    Ok(client
        .call::<AgentConversationCreate>(ConversationCreateParams {
            kind,
            participants: with.iter().map(|a| a.id).collect(),
            name: None,
        })
        .await?
        .conversation
        .id)
}

/// Every `agent/message/delivery` event in the senders' logs, read over
/// `GET /api/v1/events` page by page.
pub async fn verdicts(hub: &HubProcess, world: &World) -> anyhow::Result<Vec<Verdict>> {
    let base = HubProcess::up(&mut hub.watch()).await?.base;
    let http = reqwest::Client::new();
    let mut out = Vec::new();
    for agent in &world.group {
        let mut after = 0u64;
        loop {
            let page: Value = http
                .get(format!("{base}/api/v1/events?after={after}&limit=1000"))
                .bearer_auth(&agent.key)
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            let events = page["events"].as_array().cloned().unwrap_or_default();
            if events.is_empty() {
                break;
            }
            out.extend(events.iter().filter_map(verdict));
            after = page["nextAfter"]
                .as_u64()
                .ok_or_else(|| anyhow::anyhow!("a page without nextAfter: {page}"))?;
        }
    }
    Ok(out)
}

fn verdict(event: &Value) -> Option<Verdict> {
    if event["type"] != json!("agent/message/delivery") {
        return None;
    }
    let payload = &event["payload"];
    let outcome = match payload["delivery"]["state"].as_str()? {
        "forwarded" => Outcome::Forwarded,
        "blocked" => Outcome::Blocked,
        _ => Outcome::Pending,
    };
    Some(Verdict {
        message_id: payload["messageId"].as_str()?.parse().ok()?,
        outcome,
    })
}
