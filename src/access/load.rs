//! The loaders: for each kind of target, the row and the facts `authorize`
//! decides on. A missing row is `Resource::Missing(kind)`, never an error,
//! and each loader makes the same reads in the same order whether the row
//! exists or not, each read one store statement for a hidden row as for a
//! missing one (a row and what depends on it come in one statement, see
//! `store::conversations`, `store::tasks`, `store::leases`), so a hidden id
//! costs what a missing one costs, counted in statements.

use std::sync::Arc;

use async_trait::async_trait;
use uuid::Uuid;

use super::{Target, What};
use crate::domain::authz::{Facts, Level, Named, Place, PlaceKind, Resource};
use crate::domain::component::Interaction;
use crate::domain::conversation::{Conversation, ConversationKind};
use crate::domain::installation::InstallationFacts;
use crate::domain::lease::Lease;
use crate::domain::message::Message;
use crate::domain::task::Task;
use crate::domain::PrincipalKind;
use crate::hub::membership::ChannelPlace;
use crate::hub::{Hub, Membership};
use crate::store::{
    AppRecord, GrantRecord, LeaseAccess, PrincipalRecord, SpaceLevels, SpaceRecord, StoreError,
    StoreResult,
};

/// Where a conversation's membership, and an app subject's installation,
/// is read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Source {
    /// The hub's membership cache (ADR 0019): the send path's read.
    Cache,
    /// The store itself: what a denial is decided again on.
    Store,
}

/// The reads a loader makes, each one store (or cache) call: the hub's,
/// and in the unit tests a recording fake that checks their order and
/// counts their statements.
#[async_trait]
pub(super) trait Reads: Sync {
    /// The membership, and whether it was read from the store (a cache
    /// miss, or [`Source::Store`]).
    async fn membership(&self, id: Uuid, source: Source) -> StoreResult<Fetched>;
    async fn conversation_whole(&self, id: Uuid)
        -> StoreResult<Option<(Conversation, Membership)>>;
    async fn message(&self, id: Uuid) -> StoreResult<Option<Message>>;
    async fn is_recipient(&self, message: Uuid, principal: Uuid) -> StoreResult<bool>;
    async fn task(&self, id: Uuid) -> StoreResult<Option<Task>>;
    async fn lease(&self, id: Uuid) -> StoreResult<Option<LeaseAccess>>;
    async fn app(&self, id: Uuid) -> StoreResult<Option<AppRecord>>;
    async fn principal_kinds(&self, ids: &[Uuid]) -> StoreResult<Vec<(Uuid, PrincipalKind, bool)>>;
    async fn principal(&self, id: Uuid) -> StoreResult<Option<PrincipalRecord>>;
    async fn space(&self, id: Uuid) -> StoreResult<Option<SpaceRecord>>;
    async fn space_levels(&self, principal: Uuid, space: Uuid) -> StoreResult<SpaceLevels>;
    async fn grant(&self, id: Uuid) -> StoreResult<Option<GrantRecord>>;
    /// A live command (ADR 0027 §2).
    async fn command(&self, id: Uuid) -> StoreResult<Option<crate::store::CommandRecord>>;
    async fn interaction(&self, id: Uuid) -> StoreResult<Option<Interaction>>;
    /// An app subject's live installation as the decision sees it, and
    /// whether it was read from the store.
    async fn installation(
        &self,
        app_id: Uuid,
        source: Source,
    ) -> StoreResult<(Option<InstallationFacts>, bool)>;
}

#[async_trait]
impl Reads for Hub {
    async fn membership(&self, id: Uuid, source: Source) -> StoreResult<Fetched> {
        let (membership, from_store) = match source {
            Source::Cache => self.memberships.lookup(&self.store, id).await?,
            Source::Store => (Membership::read(&self.store, id).await?.map(Arc::new), true),
        };
        Ok(Fetched {
            membership,
            from_store,
        })
    }

    async fn conversation_whole(
        &self,
        id: Uuid,
    ) -> StoreResult<Option<(Conversation, Membership)>> {
        Membership::read_whole(&self.store, id).await
    }

    async fn message(&self, id: Uuid) -> StoreResult<Option<Message>> {
        Ok(self.store.message(id).await?.map(|(m, _)| m))
    }

    async fn is_recipient(&self, message: Uuid, principal: Uuid) -> StoreResult<bool> {
        self.store.is_recipient(message, principal).await
    }

    async fn task(&self, id: Uuid) -> StoreResult<Option<Task>> {
        Ok(self.store.task(id).await?.map(|r| r.task))
    }

    async fn lease(&self, id: Uuid) -> StoreResult<Option<LeaseAccess>> {
        self.store.lease_for_access(id).await
    }

    async fn app(&self, id: Uuid) -> StoreResult<Option<AppRecord>> {
        self.store.app(id).await
    }

    async fn principal_kinds(&self, ids: &[Uuid]) -> StoreResult<Vec<(Uuid, PrincipalKind, bool)>> {
        self.store.principal_kinds(ids).await
    }

    async fn principal(&self, id: Uuid) -> StoreResult<Option<PrincipalRecord>> {
        self.store.principal(id).await
    }

    async fn space(&self, id: Uuid) -> StoreResult<Option<SpaceRecord>> {
        self.store.space(id).await
    }

    async fn space_levels(&self, principal: Uuid, space: Uuid) -> StoreResult<SpaceLevels> {
        self.store.space_levels(principal, space).await
    }

    async fn grant(&self, id: Uuid) -> StoreResult<Option<GrantRecord>> {
        self.store.grant(id).await
    }

    async fn command(&self, id: Uuid) -> StoreResult<Option<crate::store::CommandRecord>> {
        self.store.command(id).await
    }

    async fn interaction(&self, id: Uuid) -> StoreResult<Option<Interaction>> {
        self.store.interaction(id).await
    }

    async fn installation(
        &self,
        app_id: Uuid,
        source: Source,
    ) -> StoreResult<(Option<InstallationFacts>, bool)> {
        let (record, from_store) = match source {
            Source::Cache => {
                let looked = self.installations.lookup(app_id).await?;
                (looked.installation, looked.from_store)
            }
            Source::Store => (self.installations.read_fresh(app_id).await?, true),
        };
        Ok((record.map(|r| r.facts()), from_store))
    }
}

/// A membership read, and whether it came from the store.
pub(super) struct Fetched {
    pub membership: Option<Arc<Membership>>,
    pub from_store: bool,
}

/// What a granted request loaded, handed to the handler.
#[derive(Debug)]
pub enum Loaded {
    /// The hub or a stream: nothing.
    Nothing,
    Conversation {
        membership: Arc<Membership>,
        /// Read whole for a [`Target::conversation_row`].
        row: Option<Conversation>,
    },
    Message {
        message: Message,
        membership: Arc<Membership>,
    },
    Task(Task),
    /// The membership is read only once the lease is granted
    /// ([`complete`]): deciding needs none.
    Lease {
        lease: Lease,
        membership: Option<Arc<Membership>>,
    },
    /// Boxed: the manifest inside is by far the largest variant.
    App(Box<AppRecord>),
    /// An agent and its owner, for `agent.keys.*`.
    Agent(PrincipalRecord),
    /// A space (`space.read`, `channel.create`, a grant put on it).
    Space(crate::store::SpaceRecord),
    /// A grant named by id.
    Grant(crate::store::GrantRecord),
    /// A command offered in a place, with the place's membership.
    Command {
        command: Box<crate::store::CommandRecord>,
        membership: Arc<Membership>,
    },
    /// A card's component (boxed: the card is large).
    Component(Box<super::components::GrantedComponent>),
    Interaction(Box<crate::domain::component::Interaction>),
}

pub(super) struct Loading {
    pub resource: Resource,
    pub facts: Facts,
    pub loaded: Loaded,
    /// Decided on store reads only (no cache hit): a denial needs no
    /// second read before it is answered.
    pub from_store: bool,
}

impl Loading {
    pub(super) fn missing(target: &Target, named: Vec<Named>) -> Loading {
        Loading {
            resource: Resource::Missing(target.kind()),
            facts: Facts {
                named,
                ..Facts::default()
            },
            loaded: Loaded::Nothing,
            from_store: true,
        }
    }

    pub(super) fn on_store(mut self, from_store: bool) -> Loading {
        self.from_store = from_store;
        self
    }
}

/// Loads `target` as principal `me` sees it.
pub(super) async fn load(
    hub: &impl Reads,
    me: Uuid,
    target: &Target,
    source: Source,
) -> StoreResult<Loading> {
    match target.what {
        What::Hub => Ok(Loading {
            resource: Resource::Hub,
            facts: Facts {
                named: named(hub, &target.named, None).await?,
                ..Facts::default()
            },
            loaded: Loaded::Nothing,
            from_store: true,
        }),
        What::Stream(audience) => Ok(Loading {
            resource: Resource::Stream { audience },
            facts: Facts::default(),
            loaded: Loaded::Nothing,
            from_store: true,
        }),
        What::Conversation { id, row } => conversation(hub, me, target, id, row, source).await,
        What::Message { conversation, id } => {
            message(hub, me, target, conversation, id, source).await
        }
        What::Task(id) => task(hub, target, id).await,
        What::Lease(id) => lease(hub, target, id).await,
        What::App(id) => app(hub, target, id).await,
        What::Agent(id) => agent(hub, target, id).await,
        // Loaded by `access::places`, `access::commands` and
        // `access::components` before this is called; fails closed.
        What::Place(_) | What::Command { .. } | What::Component { .. } | What::Interaction(_) => {
            Ok(Loading::missing(target, Vec::new()))
        }
    }
}

async fn conversation(
    hub: &impl Reads,
    me: Uuid,
    target: &Target,
    id: Uuid,
    row: bool,
    source: Source,
) -> StoreResult<Loading> {
    let (membership, row, from_store) = if row {
        match hub.conversation_whole(id).await? {
            Some((c, m)) => (Some(Arc::new(m)), Some(c), true),
            None => (None, None, true),
        }
    } else {
        let fetched = hub.membership(id, source).await?;
        (fetched.membership, None, fetched.from_store)
    };
    let named = named(hub, &target.named, None).await?;
    let Some((membership, place)) = membership.and_then(|m| place_of(&m).map(|p| (m, p))) else {
        return Ok(Loading::missing(target, named).on_store(from_store));
    };
    Ok(Loading {
        facts: Facts {
            grants: grants_of(&membership, me),
            named,
            ..Facts::default()
        },
        resource: Resource::Conversation(place),
        loaded: Loaded::Conversation { membership, row },
        from_store,
    })
}

/// A message named inside a conversation (`replyTo`, a dispatch): the
/// conversation, the message and whether it reached `me`, always all three.
async fn message(
    hub: &impl Reads,
    me: Uuid,
    target: &Target,
    conversation: Uuid,
    id: Uuid,
    source: Source,
) -> StoreResult<Loading> {
    let fetched = hub.membership(conversation, source).await?;
    let message = hub.message(id).await?;
    let recipient = hub.is_recipient(id, me).await?;
    let from_store = fetched.from_store;
    let found = match (fetched.membership, message) {
        (Some(m), Some(msg)) if msg.conversation_id == m.id => {
            place_of(&m).map(|place| (m, msg, place))
        }
        _ => None,
    };
    let Some((membership, message, place)) = found else {
        return Ok(Loading::missing(target, Vec::new()).on_store(from_store));
    };
    Ok(Loading {
        facts: Facts {
            grants: grants_of(&membership, me),
            ..Facts::default()
        },
        resource: Resource::Message {
            place,
            sender: message.sender_id,
            recipient,
            app_reply: message.reply_to_interaction.is_some(),
        },
        loaded: Loaded::Message {
            message,
            membership,
        },
        from_store,
    })
}

async fn task(hub: &impl Reads, target: &Target, id: Uuid) -> StoreResult<Loading> {
    let task = hub.task(id).await?;
    let named = named(hub, &target.named, task.as_ref()).await?;
    let Some(task) = task else {
        return Ok(Loading::missing(target, named));
    };
    Ok(Loading {
        resource: Resource::Task {
            app_id: task.app_id,
            participants: task.participant_ids(),
        },
        facts: Facts {
            named,
            ..Facts::default()
        },
        loaded: Loaded::Task(task),
        from_store: true,
    })
}

/// A lease, with its conversation's kind and creator from the same
/// statement (the task's app resolves it): no membership read.
async fn lease(hub: &impl Reads, target: &Target, id: Uuid) -> StoreResult<Loading> {
    let Some(LeaseAccess { lease, task_app }) = hub.lease(id).await? else {
        return Ok(Loading::missing(target, Vec::new()));
    };
    Ok(Loading {
        resource: Resource::Lease {
            recipient: lease.recipient_id,
            task_app,
        },
        facts: Facts::default(),
        loaded: Loaded::Lease {
            lease,
            membership: None,
        },
        from_store: true,
    })
}

/// What a granted request still needs read, after the decision (so a
/// refusal never costs it): a lease's conversation membership.
pub(super) async fn complete(hub: &impl Reads, loaded: Loaded) -> StoreResult<Loaded> {
    let Loaded::Lease {
        lease,
        membership: None,
    } = loaded
    else {
        return Ok(loaded);
    };
    let membership = hub
        .membership(lease.conversation_id, Source::Cache)
        .await?
        .membership
        .ok_or_else(|| {
            StoreError::Corrupt(format!("lease {} without its conversation", lease.lease_id))
        })?;
    Ok(Loaded::Lease {
        lease,
        membership: Some(membership),
    })
}

/// The app a `task.request` names, and the agents it invites.
async fn app(hub: &impl Reads, target: &Target, id: Uuid) -> StoreResult<Loading> {
    let app = hub.app(id).await?;
    let named = named(hub, &target.named, None).await?;
    let Some(app) = app else {
        return Ok(Loading::missing(target, named));
    };
    Ok(Loading {
        resource: Resource::App,
        facts: Facts {
            named,
            ..Facts::default()
        },
        loaded: Loaded::App(Box::new(app)),
        from_store: true,
    })
}

/// An agent with its owner: one read; a principal of another kind is
/// `Missing(Agent)`, like an unknown id.
async fn agent(hub: &impl Reads, target: &Target, id: Uuid) -> StoreResult<Loading> {
    let record = hub.principal(id).await?;
    let Some(record) = record.filter(|r| r.kind == PrincipalKind::Agent) else {
        return Ok(Loading::missing(target, Vec::new()));
    };
    Ok(Loading {
        resource: Resource::Agent {
            owner: record.owner_id,
        },
        facts: Facts::default(),
        loaded: Loaded::Agent(record),
        from_store: true,
    })
}

/// The principals a request names, in its order, with their kinds (one
/// read for all); `task` says who takes part in it.
async fn named(hub: &impl Reads, ids: &[Uuid], task: Option<&Task>) -> StoreResult<Vec<Named>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let found = hub.principal_kinds(ids).await?;
    Ok(ids
        .iter()
        .map(|id| {
            let row = found.iter().find(|(p, _, _)| p == id);
            Named {
                id: *id,
                kind: row.map(|(_, kind, _)| *kind),
                active: row.is_some_and(|(_, _, active)| *active),
                in_task: task.is_some_and(|t| t.has_participant(*id)),
            }
        })
        .collect())
}

/// A channel's level for `me`, as the one grant level its readers map
/// holds (already the effective one); nothing elsewhere.
pub(super) fn grants_of(membership: &Membership, me: Uuid) -> Vec<Level> {
    membership
        .channel
        .as_ref()
        .and_then(|c| c.levels.get(&me))
        .map(|(_, level)| vec![*level])
        .unwrap_or_default()
}

/// The conversation as a place. A task conversation is created by its
/// task's app on every path (the task gate, `app/conversation/create`), so
/// its `created_by` is the task's app. `None` (decided as missing) for a
/// channel read without its place.
pub(super) fn place_of(m: &Membership) -> Option<Place> {
    Some(Place {
        id: m.id,
        kind: kind_of(m.kind, m.created_by, m.channel.as_ref())?,
        participants: m.participants.clone(),
    })
}

fn kind_of(
    kind: ConversationKind,
    created_by: Uuid,
    channel: Option<&ChannelPlace>,
) -> Option<PlaceKind> {
    Some(match kind {
        ConversationKind::Direct => PlaceKind::Direct,
        ConversationKind::Group => PlaceKind::Group,
        ConversationKind::Task => PlaceKind::Task { app_id: created_by },
        ConversationKind::Channel => {
            let c = channel?;
            PlaceKind::Channel {
                space_id: c.space_id,
                state: c.state,
            }
        }
    })
}

/// A listed conversation as a place, for Filter mode. A channel row has no
/// readers map here; lists of channels judge with their levels.
pub fn place_of_conversation(c: &Conversation) -> Option<Place> {
    let kind = match (c.kind, c.space_id, c.state) {
        (ConversationKind::Channel, Some(space_id), Some(state)) => {
            PlaceKind::Channel { space_id, state }
        }
        (ConversationKind::Channel, _, _) => return None,
        (kind, _, _) => kind_of(kind, c.created_by, None)?,
    };
    Some(Place {
        id: c.id,
        kind,
        participants: c.participants.clone(),
    })
}

#[cfg(test)]
#[path = "load_tests.rs"]
mod tests;
