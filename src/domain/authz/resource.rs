//! What an action is about, as the loader found it (ADR 0020 §3).
//!
//! A missing row is a value here, not an error, so the decision can answer
//! it exactly like a row the subject may not read.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A channel's state; it binds every principal (ADR 0020 §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChannelState {
    Open,
    /// Only admins write.
    ReadOnly,
    /// Nobody writes; `channel.manage` still works, so it can be reopened.
    Archived,
}

impl ChannelState {
    pub const ALL: [ChannelState; 3] = [
        ChannelState::Open,
        ChannelState::ReadOnly,
        ChannelState::Archived,
    ];

    /// The text stored in `conversations.state`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelState::Open => "open",
            ChannelState::ReadOnly => "read_only",
            ChannelState::Archived => "archived",
        }
    }

    pub fn parse(s: &str) -> Option<ChannelState> {
        ChannelState::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

/// The kind of a conversation, with what each kind needs to be decided on:
/// a task's app, a channel's space and state. (A sum type rather than the
/// ADR's `kind` plus optional `task_app` and `channel`, so that a channel
/// without a space cannot be built.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlaceKind {
    Direct,
    Group,
    Task { app_id: Uuid },
    Channel { space_id: Uuid, state: ChannelState },
}

/// A conversation as a place: where messages are read and written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    pub id: Uuid,
    pub kind: PlaceKind,
    /// Stored participants: direct, group and task conversations only;
    /// channels have none (their readers are their levels).
    pub participants: Vec<Uuid>,
}

impl Place {
    pub fn channel_state(&self) -> Option<ChannelState> {
        match self.kind {
            PlaceKind::Channel { state, .. } => Some(state),
            _ => None,
        }
    }

    pub fn is_channel(&self) -> bool {
        matches!(self.kind, PlaceKind::Channel { .. })
    }
}

/// Where a grant applies, as a resource of `grant.manage`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlaceRef {
    Space(Uuid),
    Channel(Place),
}

/// The kinds of resource, also what a `Missing` one was asked for as. It
/// names the not-found answer and the audit's `resource_kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResourceKind {
    Hub,
    Stream,
    Space,
    Conversation,
    Message,
    Task,
    Lease,
    Agent,
    App,
    Grant,
    Command,
    /// A card's component (ADR 0027 §3).
    Component,
    Interaction,
}

impl ResourceKind {
    pub const ALL: [ResourceKind; 13] = [
        ResourceKind::Hub,
        ResourceKind::Stream,
        ResourceKind::Space,
        ResourceKind::Conversation,
        ResourceKind::Message,
        ResourceKind::Task,
        ResourceKind::Lease,
        ResourceKind::Agent,
        ResourceKind::App,
        ResourceKind::Grant,
        ResourceKind::Command,
        ResourceKind::Component,
        ResourceKind::Interaction,
    ];

    /// The inverse of [`ResourceKind::as_str`] (the audit's stored column).
    pub fn parse(s: &str) -> Option<ResourceKind> {
        ResourceKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ResourceKind::Hub => "hub",
            ResourceKind::Stream => "stream",
            ResourceKind::Space => "space",
            ResourceKind::Conversation => "conversation",
            ResourceKind::Message => "message",
            ResourceKind::Task => "task",
            ResourceKind::Lease => "lease",
            ResourceKind::Agent => "agent",
            ResourceKind::App => "app",
            ResourceKind::Grant => "grant",
            ResourceKind::Command => "command",
            ResourceKind::Component => "component",
            ResourceKind::Interaction => "interaction",
        }
    }
}

/// The resource of one decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resource {
    /// The requested row does not exist.
    Missing(ResourceKind),
    /// The hub itself: creations and the operator's management.
    Hub,
    /// A principal's event stream.
    Stream {
        audience: Uuid,
    },
    Space {
        id: Uuid,
    },
    Conversation(Place),
    /// `recipient`: a `message_recipients` row names the subject.
    /// `app_reply`: an app's reply to an interaction (ADR 0027 §6).
    Message {
        place: Place,
        sender: Uuid,
        recipient: bool,
        app_reply: bool,
    },
    /// A component of an app's card (boxed: the largest variant).
    Component(Box<ComponentOn>),
    /// An interaction, known to its card's app.
    Interaction {
        app_id: Uuid,
    },
    Task {
        app_id: Uuid,
        participants: Vec<Uuid>,
    },
    Lease {
        recipient: Uuid,
        task_app: Option<Uuid>,
    },
    Agent {
        owner: Option<Uuid>,
    },
    /// An app named by a request (`task.request`): it exists and is an app.
    App,
    Grant {
        on: PlaceRef,
    },
    /// A command offered in `place` (ADR 0027 §3): whose it is, the level
    /// it needs, and the one place it is scoped to, if any. The owner's
    /// own facts are `Facts.owner`.
    Command {
        place: Place,
        owner: Uuid,
        required_level: super::Level,
        scoped_to: Option<Uuid>,
    },
}

impl Resource {
    pub fn kind(&self) -> ResourceKind {
        match self {
            Resource::Missing(kind) => *kind,
            Resource::Hub => ResourceKind::Hub,
            Resource::Stream { .. } => ResourceKind::Stream,
            Resource::Space { .. } => ResourceKind::Space,
            Resource::Conversation(_) => ResourceKind::Conversation,
            Resource::Message { .. } => ResourceKind::Message,
            Resource::Task { .. } => ResourceKind::Task,
            Resource::Lease { .. } => ResourceKind::Lease,
            Resource::Agent { .. } => ResourceKind::Agent,
            Resource::App => ResourceKind::App,
            Resource::Grant { .. } => ResourceKind::Grant,
            Resource::Command { .. } => ResourceKind::Command,
            Resource::Component(_) => ResourceKind::Component,
            Resource::Interaction { .. } => ResourceKind::Interaction,
        }
    }

    /// The conversation whose channel state a write must respect.
    pub fn place(&self) -> Option<&Place> {
        match self {
            Resource::Conversation(place)
            | Resource::Message { place, .. }
            | Resource::Command { place, .. } => Some(place),
            Resource::Component(c) => Some(&c.place),
            Resource::Grant {
                on: PlaceRef::Channel(place),
            } => Some(place),
            _ => None,
        }
    }
}

/// A component as the decision sees it (ADR 0027 §3): the card's place and
/// author, whether the subject sees the card, and the component's rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ComponentOn {
    pub place: Place,
    /// The app that posted the card.
    pub author: Uuid,
    /// A `message_recipients` row names the subject (outside channels).
    pub recipient: bool,
    /// The card has the component named; when not, the decision stops
    /// after readability and the handler answers InvalidParams.
    pub on_card: bool,
    /// Active and not expired.
    pub usable: bool,
    /// The level needed to operate it.
    pub trigger: super::Level,
    pub capability: Option<crate::domain::component::Capability>,
    pub restricted_to: Option<crate::domain::component::Restriction>,
}
