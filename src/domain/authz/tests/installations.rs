//! Steps 2b and 4b (ADR 0023 §6): an app acts only through an active
//! installation, and holds the scope an action needs; neither step ever
//! reads the facts of another kind of subject.

use super::*;
use crate::domain::installation::ScopeSet;

fn with_installation(installation: Option<InstallationFacts>, grants: &[Level]) -> Context {
    Context {
        mode: Mode::Request,
        facts: Facts {
            grants: grants.to_vec(),
            installation,
            ..Facts::default()
        },
    }
}

fn facts(state: InstallationState, scopes: &[Scope]) -> Option<InstallationFacts> {
    Some(InstallationFacts {
        state,
        scopes: ScopeSet::of(scopes.iter().copied()),
    })
}

/// An action an app may take on a resource it reaches, whatever its
/// scopes: reading its own task.
fn own_task(app: &Subject) -> Resource {
    Resource::Task {
        app_id: id_of(app),
        participants: Vec::new(),
    }
}

#[test]
fn an_app_without_an_active_installation_is_refused_for_it() {
    use InstallationState::*;
    let app = active(PrincipalKind::App);
    let resource = own_task(&app);
    let all = &Scope::ALL[..];
    for (installation, expected) in [
        (None, forbidden(Reason::AppNotInstalled)),
        (facts(Uninstalled, all), forbidden(Reason::AppNotInstalled)),
        (facts(Suspended, all), forbidden(Reason::AppSuspended)),
        (facts(Active, &[]), Decision::Allow),
    ] {
        let ctx = with_installation(installation, &[]);
        assert_eq!(
            authorize(&app, Action::TaskRead, &resource, &ctx),
            expected,
            "{installation:?}"
        );
    }
}

#[test]
fn the_installation_is_refused_before_the_resource_is_looked_at() {
    // 2b is about the subject: a missing resource answers the same
    // Forbidden, so nothing of the resource leaks.
    let app = active(PrincipalKind::App);
    let ctx = with_installation(facts(InstallationState::Suspended, &Scope::ALL), &[]);
    for resource in [
        Resource::Missing(ResourceKind::Task),
        own_task(&app),
        Resource::Missing(ResourceKind::Conversation),
    ] {
        assert_eq!(
            authorize(&app, Action::TaskRead, &resource, &ctx),
            forbidden(Reason::AppSuspended)
        );
    }
    // ...but after the kind and the principal's own activity.
    let ctx = with_installation(None, &[]);
    assert_eq!(
        authorize(&app, Action::TypingSend, &Resource::Hub, &ctx),
        forbidden(Reason::SubjectKindNotAllowed)
    );
    let inactive = Subject::Principal {
        id: new_id(),
        kind: PrincipalKind::App,
        active: false,
    };
    assert_eq!(
        authorize(&inactive, Action::TaskRead, &own_task(&inactive), &ctx),
        forbidden(Reason::PrincipalInactive)
    );
}

#[test]
fn events_need_events_subscribe_for_apps() {
    let app = active(PrincipalKind::App);
    let stream = Resource::Stream {
        audience: id_of(&app),
    };
    for action in [Action::EventRead, Action::EventAck] {
        let without = with_installation(
            facts(InstallationState::Active, &[Scope::MessagesWrite]),
            &[],
        );
        assert_eq!(
            authorize(&app, action, &stream, &without),
            forbidden(Reason::ScopeMissing),
            "{action}"
        );
        let with = with_installation(
            facts(InstallationState::Active, &[Scope::EventsSubscribe]),
            &[],
        );
        assert_eq!(authorize(&app, action, &stream, &with), Decision::Allow);
        // Another's stream stays not_self: 4b comes after readability.
        let other = Resource::Stream { audience: new_id() };
        assert_eq!(
            authorize(&app, action, &other, &without),
            denied(Reason::NotSelf, Answer::NotFound)
        );
    }
}

#[test]
fn a_channel_send_needs_messages_write_and_an_own_task_send_none() {
    let app = active(PrincipalKind::App);
    let channel = Resource::Conversation(channel(ChannelState::Open));
    let none = with_installation(
        facts(InstallationState::Active, &[Scope::EventsSubscribe]),
        &[Level::Write],
    );
    assert_eq!(
        authorize(&app, Action::MessageCreate, &channel, &none),
        forbidden(Reason::ScopeMissing)
    );
    let scoped = with_installation(
        facts(InstallationState::Active, &[Scope::MessagesWrite]),
        &[Level::Write],
    );
    assert_eq!(
        authorize(&app, Action::MessageCreate, &channel, &scoped),
        Decision::Allow
    );
    // Its own task's conversation: the seed-000 task contract, no scope.
    let task = Resource::Conversation(task_place(id_of(&app), &[]));
    assert_eq!(
        authorize(&app, Action::MessageCreate, &task, &none),
        Decision::Allow
    );
    // A channel it cannot read stays hidden, scope or not.
    assert_eq!(
        authorize(
            &app,
            Action::MessageCreate,
            &channel,
            &with_installation(facts(InstallationState::Active, &[]), &[])
        ),
        hidden()
    );
    // A level too low is refused for the level, before the scope.
    assert_eq!(
        authorize(
            &app,
            Action::MessageCreate,
            &channel,
            &with_installation(facts(InstallationState::Active, &[]), &[Level::Read])
        ),
        forbidden(Reason::LevelInsufficient)
    );
}

#[test]
fn other_subjects_never_need_an_installation_or_a_scope() {
    let ctx = with_installation(None, &[Level::Write]);
    for kind in [PrincipalKind::Agent, PrincipalKind::Person] {
        let subject = active(kind);
        let stream = Resource::Stream {
            audience: id_of(&subject),
        };
        assert_eq!(
            authorize(&subject, Action::EventRead, &stream, &ctx),
            Decision::Allow
        );
        let channel = Resource::Conversation(channel(ChannelState::Open));
        assert_eq!(
            authorize(&subject, Action::MessageCreate, &channel, &ctx),
            Decision::Allow,
            "{kind}"
        );
    }
}

#[test]
fn only_the_catalogue_s_scoped_actions_carry_a_scope() {
    for action in Action::ALL {
        let expected = match action {
            Action::MessageCreate => Some(Scope::MessagesWrite),
            Action::EventRead | Action::EventAck => Some(Scope::EventsSubscribe),
            Action::CommandRegister | Action::CommandAutocompleteRespond => {
                Some(Scope::CommandsWrite)
            }
            Action::InteractionRespond | Action::ComponentUpdate => Some(Scope::ComponentsWrite),
            _ => None,
        };
        assert_eq!(action.requirement().scope, expected, "{action}");
    }
}
