//! The one authorization decision (ADR 0020 §3): pure, over facts a loader
//! gathered, so every handler asks the same question the same way and a
//! hidden resource cannot be told from a missing one.
//!
//! The steps run in a fixed order, each refusing with its own reason:
//! 1. the subject's kind is admitted by the action (`subject_kind_not_allowed`);
//! 2. the subject is active (`principal_inactive`);
//!
//!    2b. an app subject's installation is active (`app_not_installed`
//!    without a live one, `app_suspended`; ADR 0023 §6);
//! 3. the resource exists and the subject can read it (NotFound `no_grant`,
//!    or `not_self` for another's stream or lease);
//!
//!    3b. a command is offered only while its owning app is reachable
//!    (active, `commands:write`, write on the place) and in the place it
//!    is scoped to: otherwise NotFound `no_grant`, as an unknown command
//!    (ADR 0027 §3);
//! 4. the subject's level reaches the action's (`level_insufficient`);
//!
//!    4b. an app subject holds the action's scope (`scope_missing`), after
//!    readability so a hidden place stays hidden;
//! 5. a write respects the channel's state (`channel_archived`, then
//!    `channel_read_only` below admin);
//! 6. the action's rule holds for the principals the request names;
//! 7. on a component (ADR 0027 §3): the owning app's guard and the
//!    component's state (`component_inactive`), its capability
//!    (`capability_missing`) and restriction (`component_restricted`); a
//!    dispatch on an app's reply is refused `app_reply`.

pub mod action;
mod component;
pub mod level;
pub mod resource;

#[cfg(test)]
mod tests;

use uuid::Uuid;

pub use action::{Action, Requirement, Rule, Subjects};
pub use component::OwnerFacts;
use component::{check_component, component_reach};
pub use level::Level;
pub use resource::{ChannelState, ComponentOn, Place, PlaceKind, PlaceRef, Resource, ResourceKind};

use crate::domain::installation::{InstallationFacts, InstallationState, Scope};
use crate::domain::PrincipalKind;

/// Who asks: a principal, or the operator through the admin token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subject {
    Principal {
        id: Uuid,
        kind: PrincipalKind,
        /// False once disabled (or, later, whatever else retires it).
        active: bool,
    },
    Operator,
}

/// How the caller uses the decision. It changes no decision: a Filter-mode
/// denial is dropped silently (lists, fan-outs) and never audited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Request,
    Filter,
}

impl Mode {
    /// Only a request's denial is answered, so only it is audited.
    pub fn audits(self) -> bool {
        self == Mode::Request
    }
}

/// One principal a request names (participants, invitees, agents to add).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Named {
    pub id: Uuid,
    /// `None`: no principal has this id.
    pub kind: Option<PrincipalKind>,
    pub active: bool,
    /// Takes part in the task the resource is (`task.manage`).
    pub in_task: bool,
}

/// The facts about subject × resource the loader gathered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// The levels of the grants reaching the subject on the place itself:
    /// on a channel and its space, or on a space; see
    /// [`level::reaching_channel`].
    pub grants: Vec<Level>,
    /// On a space: the grants reaching the subject on each of its
    /// channels. Only `space.read` counts them (a reader of one channel
    /// may see its space); managing a space never does, so an admin of one
    /// channel is no admin of its space. Kept apart so a loader cannot mix
    /// them up.
    pub channel_grants: Vec<Level>,
    pub named: Vec<Named>,
    /// An app subject's live installation (`None`: it has none). Filled
    /// for app subjects only; never read for any other kind.
    pub installation: Option<InstallationFacts>,
    /// The app that owns the command or component a request is about
    /// (ADR 0027 §3), not the subject: filled for command resources and
    /// for `interaction.create` only.
    pub owner: Option<OwnerFacts>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Context {
    pub mode: Mode,
    pub facts: Facts,
}

/// Why an action was refused. Closed: the audit and the protocol's
/// `data.reason` carry exactly these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    NoGrant,
    LevelInsufficient,
    SubjectKindNotAllowed,
    NotSelf,
    ChannelReadOnly,
    ChannelArchived,
    PrincipalInactive,
    NotTaskParticipant,
    AppNotInstalled,
    AppSuspended,
    ScopeMissing,
    // ---- cards (ADR 0027 §3, §6) ----
    /// Used, disabled, expired, or its app unreachable: answered 409
    /// `component_used`.
    ComponentInactive,
    ComponentRestricted,
    CapabilityMissing,
    /// A dispatch on a reply an app wrote for an interaction.
    AppReply,
}

impl Reason {
    pub const ALL: [Reason; 15] = [
        Reason::NoGrant,
        Reason::LevelInsufficient,
        Reason::SubjectKindNotAllowed,
        Reason::NotSelf,
        Reason::ChannelReadOnly,
        Reason::ChannelArchived,
        Reason::PrincipalInactive,
        Reason::NotTaskParticipant,
        Reason::AppNotInstalled,
        Reason::AppSuspended,
        Reason::ScopeMissing,
        Reason::ComponentInactive,
        Reason::ComponentRestricted,
        Reason::CapabilityMissing,
        Reason::AppReply,
    ];

    /// The inverse of [`Reason::as_str`]: the audit's stored column and its
    /// query filter.
    pub fn parse(s: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::NoGrant => "no_grant",
            Reason::LevelInsufficient => "level_insufficient",
            Reason::SubjectKindNotAllowed => "subject_kind_not_allowed",
            Reason::NotSelf => "not_self",
            Reason::ChannelReadOnly => "channel_read_only",
            Reason::ChannelArchived => "channel_archived",
            Reason::PrincipalInactive => "principal_inactive",
            Reason::NotTaskParticipant => "not_task_participant",
            Reason::AppNotInstalled => "app_not_installed",
            Reason::AppSuspended => "app_suspended",
            Reason::ScopeMissing => "scope_missing",
            Reason::ComponentInactive => "component_inactive",
            Reason::ComponentRestricted => "component_restricted",
            Reason::CapabilityMissing => "capability_missing",
            Reason::AppReply => "app_reply",
        }
    }
}

/// How a denial is answered: NotFound when the subject may not know the
/// resource exists, Forbidden when it may.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    NotFound,
    Forbidden,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Denial {
    pub reason: Reason,
    pub answer: Answer,
    /// The named principal the denial is about (step 6), which the answer
    /// echoes under its field; `None` when it is about the resource.
    pub named: Option<Uuid>,
}

impl Denial {
    fn of(reason: Reason, answer: Answer) -> Denial {
        Denial {
            reason,
            answer,
            named: None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny(Denial),
}

/// Decides one action; see the module's doc for the order of the steps.
pub fn authorize(
    subject: &Subject,
    action: Action,
    resource: &Resource,
    ctx: &Context,
) -> Decision {
    match decide(subject, action, resource, &ctx.facts) {
        Ok(()) => Decision::Allow,
        Err(denial) => Decision::Deny(denial),
    }
}

fn decide(
    subject: &Subject,
    action: Action,
    resource: &Resource,
    facts: &Facts,
) -> Result<(), Denial> {
    let need = action.requirement();
    check_subject(subject, action, facts.installation)?;
    let level = readable(subject, action, need.on, resource, facts)?;
    let level = match subject {
        Subject::Principal { kind, .. } => level::cap(*kind, level),
        Subject::Operator => level,
    };
    check_owner(resource, facts.owner.as_ref())?;
    check_level(level, needed_level(action, need.level, resource))?;
    check_scope(subject, need, resource, facts)?;
    if need.writes {
        check_channel_state(resource, level)?;
    }
    check_rule(need.rule, &facts.named)?;
    check_component(subject, action, resource, level, facts)
}

fn check_kind(subject: &Subject, admitted: Subjects) -> Result<(), Denial> {
    let admits = match subject {
        Subject::Principal { kind, .. } => admitted.admits_principal(*kind),
        Subject::Operator => admitted.operator,
    };
    admits
        .then_some(())
        .ok_or(Denial::of(Reason::SubjectKindNotAllowed, Answer::Forbidden))
}

fn check_active(subject: &Subject) -> Result<(), Denial> {
    match subject {
        Subject::Principal { active: false, .. } => {
            Err(Denial::of(Reason::PrincipalInactive, Answer::Forbidden))
        }
        _ => Ok(()),
    }
}

/// Steps 1, 2 and 2b: about the subject alone, never the resource, so a
/// loader may refuse on them before reading the resource at all (and a
/// Forbidden here leaks nothing of it).
pub fn check_subject(
    subject: &Subject,
    action: Action,
    installation: Option<InstallationFacts>,
) -> Result<(), Denial> {
    check_kind(subject, action.requirement().subjects)?;
    check_active(subject)?;
    check_installation(subject, installation)
}

/// Step 2b: an app acts only through an active installation.
fn check_installation(
    subject: &Subject,
    installation: Option<InstallationFacts>,
) -> Result<(), Denial> {
    let Subject::Principal {
        kind: PrincipalKind::App,
        ..
    } = subject
    else {
        return Ok(());
    };
    match installation_refusal(installation, None) {
        Some(reason) => Err(Denial::of(reason, Answer::Forbidden)),
        None => Ok(()),
    }
}

/// Why an app cannot act through `installation` (steps 2b and 4b), or
/// `None` when it is active and holds `scope`: the decision's reason, and
/// the store's when a transaction holding the row finds it changed since.
pub fn installation_refusal(
    installation: Option<InstallationFacts>,
    scope: Option<Scope>,
) -> Option<Reason> {
    match installation {
        Some(i) if i.state == InstallationState::Active => scope
            .filter(|s| !i.scopes.contains(*s))
            .map(|_| Reason::ScopeMissing),
        Some(i) if i.state == InstallationState::Suspended => Some(Reason::AppSuspended),
        _ => Some(Reason::AppNotInstalled),
    }
}

/// Step 4b: an app holds the action's scope among its effective ones. A
/// scope on a write into a place binds only in channels (places reached by
/// grants): an app's own task conversations are its seed-000 contract and
/// need none (ADR 0023 §1).
fn check_scope(
    subject: &Subject,
    need: Requirement,
    resource: &Resource,
    facts: &Facts,
) -> Result<(), Denial> {
    let scope = need.scope;
    let (
        Subject::Principal {
            kind: PrincipalKind::App,
            ..
        },
        Some(scope),
    ) = (subject, scope)
    else {
        return Ok(());
    };
    if need.writes && resource.place().is_some_and(|p| !p.is_channel()) {
        return Ok(());
    }
    let held = facts.installation.is_some_and(|i| i.scopes.contains(scope));
    held.then_some(())
        .ok_or(Denial::of(Reason::ScopeMissing, Answer::Forbidden))
}

/// Step 3: the subject's level on a resource of the action's kind that it
/// can read; otherwise the hidden denial, the same for a missing row.
fn readable(
    subject: &Subject,
    action: Action,
    on: ResourceKind,
    resource: &Resource,
    facts: &Facts,
) -> Result<Level, Denial> {
    let kind = resource.kind();
    let scoped_register = action == Action::CommandRegister && kind == ResourceKind::Conversation;
    let level = if kind == on || scoped_register {
        reach(subject, action, resource, facts)
    } else {
        None
    };
    level.ok_or_else(|| Denial::of(hidden_reason(action, on), Answer::NotFound))
}

/// The subject's level on the resource, `None` when it cannot read it. A
/// `Missing` resource is `None` here, like any hidden one, so steps 4-6
/// never see it and its denial is the hidden one's. So is a conversation
/// that is not a channel for an action about channels, even to the
/// operator: to those actions it does not exist.
fn reach(subject: &Subject, action: Action, resource: &Resource, facts: &Facts) -> Option<Level> {
    if !of_the_right_place(action, resource) {
        return None;
    }
    let (id, kind) = match subject {
        Subject::Operator => {
            return (!matches!(resource, Resource::Missing(_))).then_some(Level::Admin)
        }
        Subject::Principal { id, kind, .. } => (*id, *kind),
    };
    let grants = &facts.grants;
    match resource {
        Resource::Missing(_) => None,
        Resource::Hub | Resource::App => Some(Level::Read),
        Resource::Stream { audience } => (*audience == id).then_some(Level::Admin),
        Resource::Space { .. } if action == Action::SpaceRead => {
            let all: Vec<Level> = grants
                .iter()
                .chain(&facts.channel_grants)
                .copied()
                .collect();
            level::effective(kind, &all)
        }
        Resource::Space { .. }
        | Resource::Grant {
            on: PlaceRef::Space(_),
        } => space_reach(kind, grants, &facts.channel_grants),
        Resource::Conversation(place)
        | Resource::Grant {
            on: PlaceRef::Channel(place),
        } => level::on_place(place, id, kind, grants),
        Resource::Message {
            place,
            sender,
            recipient,
            ..
        } => message_reach(action, place, id, kind, *sender, *recipient, grants),
        Resource::Component(c) => component_reach(action, c, id, kind, grants),
        Resource::Interaction { app_id } => {
            (action == Action::InteractionRespond && *app_id == id).then_some(level::DERIVED)
        }
        Resource::Task {
            app_id,
            participants,
        } => (*app_id == id || participants.contains(&id)).then_some(level::DERIVED),
        Resource::Lease {
            recipient,
            task_app,
        } => lease_reach(action, id, *recipient, *task_app),
        Resource::Agent { owner } => (*owner == Some(id)).then_some(Level::Admin),
        Resource::Command { place, .. } => level::on_place(place, id, kind, grants),
    }
}

/// Step 3b for a command (ADR 0027 §3): its owner is reachable with
/// `commands:write` and, for a scoped command, the place asked is its
/// place. Otherwise it is hidden, answered as an unknown command.
fn check_owner(resource: &Resource, owner: Option<&OwnerFacts>) -> Result<(), Denial> {
    let Resource::Command {
        place, scoped_to, ..
    } = resource
    else {
        return Ok(());
    };
    let here = scoped_to.is_none_or(|s| s == place.id);
    let reachable = owner.is_some_and(|o| o.reachable(Scope::CommandsWrite));
    (here && reachable)
        .then_some(())
        .ok_or(Denial::of(Reason::NoGrant, Answer::NotFound))
}

/// The level step 4 asks for: a command's own `requiredLevel`; write on
/// the place an app scopes a command to; a component's own `trigger` for
/// an interaction; otherwise the action's.
fn needed_level(action: Action, level: Option<Level>, resource: &Resource) -> Option<Level> {
    match resource {
        Resource::Command { required_level, .. } => Some(*required_level),
        Resource::Conversation(_) if action == Action::CommandRegister => Some(Level::Write),
        Resource::Component(c) if action == Action::InteractionCreate => Some(c.trigger),
        _ => level,
    }
}

/// A space is known to whoever holds a grant on it or on one of its
/// channels (as `space.read` decides), so no action on it hides it from
/// them; the level is the space's own. Known through its channels alone,
/// the level is the lowest, read: every action on a space but `space.read`
/// needs admin, so it is refused at step 4 (`level_insufficient`).
fn space_reach(kind: PrincipalKind, grants: &[Level], channel_grants: &[Level]) -> Option<Level> {
    match level::effective(kind, grants) {
        Some(level) => Some(level),
        None => level::effective(kind, channel_grants).map(|_| Level::Read),
    }
}

/// Actions about channels see only channels: a direct, group or task
/// conversation named as a channel is hidden (ADR 0020 §2: a channel is a
/// conversation of kind `channel`).
fn of_the_right_place(action: Action, resource: &Resource) -> bool {
    match (action, resource) {
        (Action::ChannelList | Action::ChannelManage, Resource::Conversation(place)) => {
            place.is_channel()
        }
        (
            _,
            Resource::Grant {
                on: PlaceRef::Channel(place),
            },
        ) => place.is_channel(),
        _ => true,
    }
}

/// A message is seen by whoever reads its channel, and elsewhere by its
/// sender and recipients. A dispatch needs a recipient of a message outside
/// channels: channels have no recipients until issue 16 says what one is.
fn message_reach(
    action: Action,
    place: &Place,
    id: Uuid,
    kind: PrincipalKind,
    sender: Uuid,
    recipient: bool,
    grants: &[Level],
) -> Option<Level> {
    let sees = match action {
        Action::DispatchRequest => !place.is_channel() && recipient,
        Action::MessageRead | Action::MessageCreate => {
            place.is_channel() || sender == id || recipient
        }
        _ => false,
    };
    level::on_place(place, id, kind, grants).filter(|_| sees)
}

/// A lease is its recipient's to complete and its task's app's to resolve;
/// no other action is about a lease.
fn lease_reach(action: Action, id: Uuid, recipient: Uuid, task_app: Option<Uuid>) -> Option<Level> {
    let reaches = match action {
        Action::DispatchComplete => recipient == id,
        Action::DispatchResolve => task_app == Some(id),
        _ => false,
    };
    reaches.then_some(level::DERIVED)
}

/// The reason of a step-3 denial depends only on the action and the kind
/// of resource asked for, never on whether the row exists: what makes a
/// hidden resource answer exactly like a missing one.
fn hidden_reason(action: Action, kind: ResourceKind) -> Reason {
    match (action, kind) {
        (_, ResourceKind::Stream) | (Action::DispatchComplete, ResourceKind::Lease) => {
            Reason::NotSelf
        }
        _ => Reason::NoGrant,
    }
}

fn check_level(held: Level, needed: Option<Level>) -> Result<(), Denial> {
    match needed {
        Some(needed) if held < needed => {
            Err(Denial::of(Reason::LevelInsufficient, Answer::Forbidden))
        }
        _ => Ok(()),
    }
}

/// Archived refuses every write; read-only every write below admin.
fn check_channel_state(resource: &Resource, held: Level) -> Result<(), Denial> {
    match resource.place().and_then(Place::channel_state) {
        Some(ChannelState::Archived) => Err(Denial::of(Reason::ChannelArchived, Answer::Forbidden)),
        Some(ChannelState::ReadOnly) if held < Level::Admin => {
            Err(Denial::of(Reason::ChannelReadOnly, Answer::Forbidden))
        }
        _ => Ok(()),
    }
}

/// Step 6: the first named principal breaking the rule, if any.
fn check_rule(rule: Rule, named: &[Named]) -> Result<(), Denial> {
    let (ok, denial): (fn(&Named) -> bool, _) = match rule {
        Rule::None => return Ok(()),
        Rule::NamedMembers => (
            |n| n.active && matches!(n.kind, Some(PrincipalKind::Agent | PrincipalKind::Person)),
            Denial::of(Reason::NoGrant, Answer::NotFound),
        ),
        Rule::NamedAgents => (
            |n| n.active && n.kind == Some(PrincipalKind::Agent),
            Denial::of(Reason::NoGrant, Answer::NotFound),
        ),
        Rule::TaskParticipants => (
            |n| n.in_task && n.kind == Some(PrincipalKind::Agent),
            Denial::of(Reason::NotTaskParticipant, Answer::Forbidden),
        ),
    };
    match named.iter().find(|n| !ok(n)) {
        Some(n) => Err(Denial {
            named: Some(n.id),
            ..denial
        }),
        None => Ok(()),
    }
}
