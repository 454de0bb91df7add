//! The action catalogue (ADR 0020 §3, "Actions today"): for each action,
//! who may ask, the level it needs, whether it writes into a place, and the
//! rule it applies to the principals a request names. Later issues add
//! their actions here; the decision in `mod.rs` does not change.

use super::level::Level;
use super::resource::ResourceKind;
use crate::domain::installation::Scope;
use crate::domain::PrincipalKind;

/// Everything a subject can ask the hub to do that needs a right.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    ConversationCreate,
    ConversationRead,
    MessageRead,
    MessageCreate,
    TypingSend,
    ChannelList,
    SpaceRead,
    SpaceCreate,
    GroupManage,
    PersonCreate,
    PersonDisable,
    AgentOwnerSet,
    AuditRead,
    ChannelCreate,
    ChannelManage,
    GrantManage,
    TaskRequest,
    TaskRead,
    TaskManage,
    DispatchRequest,
    DispatchComplete,
    DispatchResolve,
    EventRead,
    EventAck,
    AgentKeysRead,
    AgentKeysRevoke,
    /// An app reading its own installation (the operator's route needs no
    /// action: it is the admin token).
    InstallationRead,
    /// An app replacing its own manifest.
    AppUpgrade,
    /// An app rotating or revoking its own keys (`POST
    /// /api/v1/keys/rotate|revoke`; agents and people need no decision).
    AppKeysManage,
    // Issue 16, commands (ADR 0027 §1, §3).
    /// A command in a place's list (Filter mode).
    CommandRead,
    CommandInvoke,
    CommandAutocomplete,
    /// An app registers or removes one of its commands.
    CommandRegister,
    /// An app answers an autocomplete request later.
    CommandAutocompleteRespond,
    // ---- cards (ADR 0027 §3, §6) ----
    /// A person or agent operating a component of an app's card.
    InteractionCreate,
    /// The card's app answering an interaction.
    InteractionRespond,
    /// The card's app changing one of its components.
    ComponentUpdate,
    // Issue 21, the operator's view.
    /// An app reading its own hook health figures.
    AppHealthRead,
    /// An app running `app check` on its own hooks.
    AppCheck,
    // Issue 18, invite links (ADR 0031 §6).
    /// A principal redeeming an invite link: the link is the right to the
    /// room (its maker's write, decided again at the redemption); what is
    /// decided of the redeemer is its kind, that it is active and, for an
    /// app, its installation.
    InviteAccept,
}

/// The kinds of subject an action admits. The operator is the admin token,
/// not a principal, hence its own flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subjects {
    pub agent: bool,
    pub person: bool,
    pub app: bool,
    pub operator: bool,
}

impl Subjects {
    const fn of(agent: bool, person: bool, app: bool, operator: bool) -> Subjects {
        Subjects {
            agent,
            person,
            app,
            operator,
        }
    }
    pub const OPERATOR: Subjects = Subjects::of(false, false, false, true);
    pub const AGENT: Subjects = Subjects::of(true, false, false, false);
    pub const APP: Subjects = Subjects::of(false, false, true, false);
    pub const MEMBERS: Subjects = Subjects::of(true, true, false, false);
    pub const PRINCIPALS: Subjects = Subjects::of(true, true, true, false);
    pub const MANAGERS: Subjects = Subjects::of(false, true, false, true);
    pub const AGENT_OR_APP: Subjects = Subjects::of(true, false, true, false);

    pub fn admits_principal(self, kind: PrincipalKind) -> bool {
        match kind {
            PrincipalKind::Agent => self.agent,
            PrincipalKind::Person => self.person,
            PrincipalKind::App => self.app,
        }
    }
}

/// Step 6: what must hold of the principals a request names (`Facts.named`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Nothing is named, or what is named is not a right (input checks).
    None,
    /// Each named principal exists, is an agent or a person, and is active;
    /// anything else is the not-found of a missing principal.
    NamedMembers,
    /// Each named principal exists, is an agent, and is active; anything
    /// else is the not-found of a missing agent.
    NamedAgents,
    /// Each named principal is an agent taking part in the task; anything
    /// else is Forbidden `not_task_participant`.
    TaskParticipants,
}

/// What one action needs, in the order the decision checks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Requirement {
    pub subjects: Subjects,
    /// The one kind of resource the action is about; any other is decided
    /// as hidden (fail closed on a loader's mistake).
    pub on: ResourceKind,
    /// `None`: being able to see the resource is enough (own stream, own
    /// lease, owned agent, an app that exists, the hub).
    pub level: Option<Level>,
    /// Puts content into a place, so a channel's state binds it.
    pub writes: bool,
    pub rule: Rule,
    /// The scope an app subject must hold (step 4b; ADR 0023 §6). On an
    /// action writing into a place it binds in channels only.
    pub scope: Option<Scope>,
}

const fn req(
    subjects: Subjects,
    on: ResourceKind,
    level: Option<Level>,
    writes: bool,
    rule: Rule,
) -> Requirement {
    Requirement {
        subjects,
        on,
        level,
        writes,
        rule,
        scope: None,
    }
}

impl Requirement {
    const fn with_scope(self, scope: Scope) -> Requirement {
        Requirement {
            scope: Some(scope),
            ..self
        }
    }
}

impl Action {
    pub const ALL: [Action; 40] = [
        Action::ConversationCreate,
        Action::ConversationRead,
        Action::MessageRead,
        Action::MessageCreate,
        Action::TypingSend,
        Action::ChannelList,
        Action::SpaceRead,
        Action::SpaceCreate,
        Action::GroupManage,
        Action::PersonCreate,
        Action::PersonDisable,
        Action::AgentOwnerSet,
        Action::AuditRead,
        Action::ChannelCreate,
        Action::ChannelManage,
        Action::GrantManage,
        Action::TaskRequest,
        Action::TaskRead,
        Action::TaskManage,
        Action::DispatchRequest,
        Action::DispatchComplete,
        Action::DispatchResolve,
        Action::EventRead,
        Action::EventAck,
        Action::AgentKeysRead,
        Action::AgentKeysRevoke,
        Action::InstallationRead,
        Action::AppUpgrade,
        Action::AppKeysManage,
        Action::CommandRead,
        Action::CommandInvoke,
        Action::CommandAutocomplete,
        Action::CommandRegister,
        Action::CommandAutocompleteRespond,
        Action::InteractionCreate,
        Action::InteractionRespond,
        Action::ComponentUpdate,
        Action::AppHealthRead,
        Action::AppCheck,
        Action::InviteAccept,
    ];

    /// The catalogue's name: the protocol's `data.action` and the audit's.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::ConversationCreate => "conversation.create",
            Action::ConversationRead => "conversation.read",
            Action::MessageRead => "message.read",
            Action::MessageCreate => "message.create",
            Action::TypingSend => "typing.send",
            Action::ChannelList => "channel.list",
            Action::SpaceRead => "space.read",
            Action::SpaceCreate => "space.create",
            Action::GroupManage => "group.manage",
            Action::PersonCreate => "person.create",
            Action::PersonDisable => "person.disable",
            Action::AgentOwnerSet => "agent.owner.set",
            Action::AuditRead => "audit.read",
            Action::ChannelCreate => "channel.create",
            Action::ChannelManage => "channel.manage",
            Action::GrantManage => "grant.manage",
            Action::TaskRequest => "task.request",
            Action::TaskRead => "task.read",
            Action::TaskManage => "task.manage",
            Action::DispatchRequest => "dispatch.request",
            Action::DispatchComplete => "dispatch.complete",
            Action::DispatchResolve => "dispatch.resolve",
            Action::EventRead => "event.read",
            Action::EventAck => "event.ack",
            Action::AgentKeysRead => "agent.keys.read",
            Action::AgentKeysRevoke => "agent.keys.revoke",
            Action::InstallationRead => "installation.read",
            Action::AppUpgrade => "app.upgrade",
            Action::AppKeysManage => "app.keys.manage",
            Action::CommandRead => "command.read",
            Action::CommandInvoke => "command.invoke",
            Action::CommandAutocomplete => "command.autocomplete",
            Action::CommandRegister => "command.register",
            Action::CommandAutocompleteRespond => "command.autocomplete.respond",
            Action::InteractionCreate => "interaction.create",
            Action::InteractionRespond => "interaction.respond",
            Action::ComponentUpdate => "component.update",
            Action::AppHealthRead => "app.health.read",
            Action::AppCheck => "app.check",
            Action::InviteAccept => "invite.accept",
        }
    }

    pub fn parse(s: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.as_str() == s)
    }

    /// The ADR's table, one row per action.
    pub fn requirement(self) -> Requirement {
        use Level::{Admin, Read, Write};
        use ResourceKind as K;
        use Subjects as S;
        match self {
            Action::ConversationCreate => req(S::MEMBERS, K::Hub, None, false, Rule::NamedMembers),
            Action::ConversationRead | Action::ChannelList => req(
                S::PRINCIPALS,
                K::Conversation,
                Some(Read),
                false,
                Rule::None,
            ),
            Action::MessageRead => req(S::PRINCIPALS, K::Message, Some(Read), false, Rule::None),
            Action::SpaceRead => req(S::PRINCIPALS, K::Space, Some(Read), false, Rule::None),
            Action::MessageCreate => req(
                S::PRINCIPALS,
                K::Conversation,
                Some(Write),
                true,
                Rule::None,
            )
            .with_scope(Scope::MessagesWrite),
            Action::TypingSend => req(S::MEMBERS, K::Conversation, Some(Write), true, Rule::None),
            Action::SpaceCreate
            | Action::GroupManage
            | Action::PersonCreate
            | Action::PersonDisable
            | Action::AgentOwnerSet
            | Action::AuditRead => req(S::OPERATOR, K::Hub, None, false, Rule::None),
            Action::ChannelCreate => req(S::MANAGERS, K::Space, Some(Admin), false, Rule::None),
            Action::ChannelManage => {
                req(S::MANAGERS, K::Conversation, Some(Admin), false, Rule::None)
            }
            Action::GrantManage => req(S::MANAGERS, K::Grant, Some(Admin), false, Rule::None),
            Action::TaskRequest => req(S::AGENT, K::App, None, false, Rule::NamedAgents),
            Action::TaskRead => req(S::AGENT_OR_APP, K::Task, Some(Read), false, Rule::None),
            Action::TaskManage => req(S::APP, K::Task, Some(Write), false, Rule::TaskParticipants),
            Action::DispatchRequest => req(S::AGENT, K::Message, Some(Read), false, Rule::None),
            Action::DispatchComplete => req(S::AGENT, K::Lease, None, false, Rule::None),
            Action::DispatchResolve => req(S::APP, K::Lease, None, false, Rule::None),
            Action::EventRead | Action::EventAck => {
                req(S::PRINCIPALS, K::Stream, None, false, Rule::None)
                    .with_scope(Scope::EventsSubscribe)
            }
            Action::AgentKeysRead | Action::AgentKeysRevoke => {
                req(S::MANAGERS, K::Agent, None, false, Rule::None)
            }
            // The route admits only the app's own id (another's answers as
            // missing before this runs): what is left to decide is step 2b,
            // the installation, which is the point of asking.
            Action::InstallationRead
            | Action::AppUpgrade
            | Action::AppKeysManage
            | Action::AppHealthRead
            | Action::AppCheck => req(S::APP, K::App, None, false, Rule::None),
            // The level is the command's own (`requiredLevel`, step 4 of
            // ADR 0027 §3), not the action's; invoking writes into the
            // place as far as its channel state goes.
            Action::CommandRead => req(S::MEMBERS, K::Command, None, false, Rule::None),
            Action::CommandInvoke | Action::CommandAutocomplete => {
                req(S::MEMBERS, K::Command, None, true, Rule::None)
            }
            // Hub-wide by default; a place the app names (a scoped
            // register) needs its write there too (`mod.rs`).
            Action::CommandRegister | Action::CommandAutocompleteRespond => {
                req(S::APP, K::Hub, None, false, Rule::None).with_scope(Scope::CommandsWrite)
            }
            // The level is the component's `trigger` (step 4 reads it from
            // the resource); the channel's state and the owner's guard are
            // the component's own step (`check_component`).
            Action::InteractionCreate => req(S::MEMBERS, K::Component, None, false, Rule::None),
            Action::InteractionRespond => req(S::APP, K::Interaction, None, false, Rule::None)
                .with_scope(Scope::ComponentsWrite),
            Action::ComponentUpdate => req(S::APP, K::Component, None, false, Rule::None)
                .with_scope(Scope::ComponentsWrite),
            Action::InviteAccept => req(S::PRINCIPALS, K::Hub, None, false, Rule::None),
        }
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
