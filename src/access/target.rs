//! What a request names ([`Target`]): the kind and the id the caller sent,
//! which the loader reads and the refusal is built from.

use uuid::Uuid;

use crate::domain::authz::ResourceKind;

/// What a request names, as the caller sent it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub(super) what: What,
    pub(super) named: Vec<Uuid>,
    pub(super) field: Option<&'static str>,
    /// What a NotFound calls the target, when the route names it otherwise
    /// than its kind (a channel is a conversation).
    pub(super) called: Option<&'static str>,
    /// A delivery's re-check of a press (ADR 0032 §3): the component's
    /// state and expiry were the press's to decide, and the press used
    /// it; the rights of this moment are judged alone.
    pub(super) delivering: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum What {
    Hub,
    Stream(Uuid),
    /// `row`: read the conversation itself from the store (a handler that
    /// answers with it), not the cached membership.
    Conversation {
        id: Uuid,
        row: bool,
    },
    Message {
        conversation: Uuid,
        id: Uuid,
    },
    Task(Uuid),
    Lease(Uuid),
    App(Uuid),
    Agent(Uuid),
    Place(PlaceAt),
    /// A command as offered in a conversation (ADR 0027 §3).
    Command {
        id: Uuid,
        conversation: Uuid,
    },
    /// A component named on a card by the card's message (ADR 0027 §3).
    Component {
        message: Uuid,
        component: Uuid,
    },
    Interaction(Uuid),
}

/// The places of ADR 0020 §2 a management request names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PlaceAt {
    Space(Uuid),
    /// The space a grant is put on or listed for.
    GrantOnSpace(Uuid),
    /// The channel a grant is put on or listed for.
    GrantOnChannel(Uuid),
    Grant(Uuid),
}

impl Target {
    pub(super) fn of(what: What) -> Target {
        Target {
            what,
            named: Vec::new(),
            field: None,
            called: None,
            delivering: false,
        }
    }

    /// A component target for a delivery's re-check: its state and
    /// expiry are not judged again.
    pub fn delivering(mut self) -> Target {
        self.delivering = true;
        self
    }

    /// The hub itself: creations.
    pub fn hub() -> Target {
        Target::of(What::Hub)
    }

    /// A principal's event stream.
    pub fn stream(audience: Uuid) -> Target {
        Target::of(What::Stream(audience))
    }

    /// A conversation, decided on the hub's membership cache (the send
    /// path's read).
    pub fn conversation(id: Uuid) -> Target {
        Target::of(What::Conversation { id, row: false })
    }

    /// A conversation read whole from the store, for a handler that answers
    /// with it (`*/conversation/get`, `app/conversation/add`).
    pub fn conversation_row(id: Uuid) -> Target {
        Target::of(What::Conversation { id, row: true })
    }

    /// A message the request names inside `conversation`.
    pub fn message(conversation: Uuid, id: Uuid) -> Target {
        Target::of(What::Message { conversation, id })
    }

    pub fn task(id: Uuid) -> Target {
        Target::of(What::Task(id))
    }

    pub fn lease(id: Uuid) -> Target {
        Target::of(What::Lease(id))
    }

    /// The app a `task.request` names.
    pub fn app(id: Uuid) -> Target {
        Target::of(What::App(id))
    }

    /// An agent whose keys its owner reads or revokes (`agent.keys.*`).
    pub fn agent(id: Uuid) -> Target {
        Target::of(What::Agent(id))
    }

    /// A space (`space.read`, `channel.create`): one uncached read.
    pub fn space(id: Uuid) -> Target {
        Target::of(What::Place(PlaceAt::Space(id)))
    }

    /// The space a grant is put on or listed for (`grant.manage`).
    pub fn grants_on_space(id: Uuid) -> Target {
        Target::of(What::Place(PlaceAt::GrantOnSpace(id)))
    }

    /// The channel a grant is put on or listed for (`grant.manage`).
    pub fn grants_on_channel(id: Uuid) -> Target {
        Target::of(What::Place(PlaceAt::GrantOnChannel(id)))
    }

    /// A grant by id (`grant.manage`, its deletion).
    pub fn grant(id: Uuid) -> Target {
        Target::of(What::Place(PlaceAt::Grant(id)))
    }

    /// A component of a card (`interaction.create`, `component.update`):
    /// a hidden or missing card is NotFound `messageId`.
    pub fn component(message: Uuid, component: Uuid) -> Target {
        Target::of(What::Component { message, component }).called("message")
    }

    /// An interaction its card's app answers.
    pub fn interaction(id: Uuid) -> Target {
        Target::of(What::Interaction(id))
    }

    /// The principals the request names (participants, invitees, agents
    /// to add), judged by the action's rule.
    pub fn naming(mut self, ids: &[Uuid]) -> Target {
        self.named = ids.to_vec();
        self
    }

    /// The request's field that names the target (`replyTo`): a refusal is
    /// InvalidParams naming it, hidden or missing alike.
    pub fn field(mut self, field: &'static str) -> Target {
        self.field = Some(field);
        self
    }

    /// Names the target in a NotFound as the route does (`channel`).
    pub fn called(mut self, noun: &'static str) -> Target {
        self.called = Some(noun);
        self
    }

    /// The kind of resource the request asks for, whatever the row is.
    pub fn kind(&self) -> ResourceKind {
        match self.what {
            What::Hub => ResourceKind::Hub,
            What::Stream(_) => ResourceKind::Stream,
            What::Conversation { .. } => ResourceKind::Conversation,
            What::Message { .. } => ResourceKind::Message,
            What::Task(_) => ResourceKind::Task,
            What::Lease(_) => ResourceKind::Lease,
            What::App(_) => ResourceKind::App,
            What::Agent(_) => ResourceKind::Agent,
            What::Place(PlaceAt::Space(_)) => ResourceKind::Space,
            What::Place(_) => ResourceKind::Grant,
            What::Command { .. } => ResourceKind::Command,
            What::Component { .. } => ResourceKind::Component,
            What::Interaction(_) => ResourceKind::Interaction,
        }
    }

    /// The id the caller sent (nil for the hub).
    pub fn requested_id(&self) -> Uuid {
        match self.what {
            What::Hub => Uuid::nil(),
            What::Stream(id)
            | What::Conversation { id, .. }
            | What::Message { id, .. }
            | What::Task(id)
            | What::Lease(id)
            | What::App(id)
            | What::Agent(id)
            | What::Command { id, .. }
            | What::Component { message: id, .. }
            | What::Interaction(id)
            | What::Place(
                PlaceAt::Space(id)
                | PlaceAt::GrantOnSpace(id)
                | PlaceAt::GrantOnChannel(id)
                | PlaceAt::Grant(id),
            ) => id,
        }
    }

    /// What a NotFound calls the target: its kind, except for the place a
    /// grant is put on, which the request named as a space or a channel.
    pub fn noun(&self) -> &'static str {
        if let Some(noun) = self.called {
            return noun;
        }
        match self.what {
            What::Place(PlaceAt::GrantOnSpace(_)) => "space",
            What::Place(PlaceAt::GrantOnChannel(_)) => "channel",
            _ => self.kind().as_str(),
        }
    }

    /// The conversation whose cached entry a fresh Allow invalidates (the
    /// next get refills it): only a target decided on the membership cache
    /// (ADR 0019). A grant by id is decided on the store and needs none.
    pub(super) fn cached_conversation(&self) -> Option<Uuid> {
        match self.what {
            What::Conversation { id, row: false } => Some(id),
            What::Message { conversation, .. } => Some(conversation),
            What::Place(PlaceAt::GrantOnChannel(id)) => Some(id),
            What::Command { conversation, .. } => Some(conversation),
            _ => None,
        }
    }
}
