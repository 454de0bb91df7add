//! Conversations: ordered streams of messages with participants.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use super::authz::ChannelState;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ConversationKind {
    /// Two agents, outside any app. At most one per pair.
    Direct,
    /// Several agents, outside any app.
    Group,
    /// Inside an app-bound task; the app's gates apply.
    Task,
    /// A place of a space (ADR 0020 §2): its readers are the principals its
    /// grants reach, not stored participants.
    Channel,
}

impl ConversationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ConversationKind::Direct => "direct",
            ConversationKind::Group => "group",
            ConversationKind::Task => "task",
            ConversationKind::Channel => "channel",
        }
    }

    pub fn parse(s: &str) -> Option<ConversationKind> {
        match s {
            "direct" => Some(ConversationKind::Direct),
            "group" => Some(ConversationKind::Group),
            "task" => Some(ConversationKind::Task),
            "channel" => Some(ConversationKind::Channel),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Conversation {
    pub id: Uuid,
    pub kind: ConversationKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The manifest template (`conversations[].key`) a task conversation was
    /// opened from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<Uuid>,
    /// A channel's space.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub space_id: Option<Uuid>,
    /// A channel's state (`open`, `read_only`, `archived`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ChannelState>,
    pub created_by: Uuid,
    /// Stored participants; none for a channel.
    pub participants: Vec<Uuid>,
    /// Seq of the newest message (0: none).
    pub last_message_seq: u64,
    /// RFC 3339.
    pub created_at: String,
}

/// The key that makes a direct conversation unique per pair, whatever the
/// order the two agents are named in.
pub fn direct_key(a: Uuid, b: Uuid) -> String {
    if a < b {
        format!("{a}:{b}")
    } else {
        format!("{b}:{a}")
    }
}
