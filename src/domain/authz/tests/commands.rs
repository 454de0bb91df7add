//! ADR 0027 §3: a command is decided on the subject's level on the place
//! and on its owning app's guard; an unreachable owner hides the command
//! exactly as an unknown one, before the level says anything.

use super::*;
use crate::domain::installation::ScopeSet;

fn owner(scopes: &[Scope], state: InstallationState, level: Option<Level>) -> OwnerFacts {
    OwnerFacts {
        installation: Some(InstallationFacts {
            state,
            scopes: ScopeSet::of(scopes.iter().copied()),
        }),
        level,
    }
}

fn reachable() -> OwnerFacts {
    owner(
        &[Scope::CommandsWrite],
        InstallationState::Active,
        Some(Level::Write),
    )
}

fn command(place: Place, required: Level, scoped_to: Option<Uuid>) -> Resource {
    Resource::Command {
        place,
        owner: new_id(),
        required_level: required,
        scoped_to,
    }
}

fn with(grants: &[Level], owner: Option<OwnerFacts>) -> Context {
    let mut ctx = request(grants);
    ctx.facts.owner = owner;
    ctx
}

#[test]
fn an_unreachable_owner_hides_the_command_like_a_missing_one() {
    let person = active(PrincipalKind::Person);
    let place = channel(ChannelState::Open);
    let missing = Resource::Missing(ResourceKind::Command);
    let unreachable = [
        None,
        Some(owner(&[], InstallationState::Active, Some(Level::Write))),
        Some(owner(
            &[Scope::CommandsWrite],
            InstallationState::Suspended,
            Some(Level::Write),
        )),
        Some(owner(
            &[Scope::CommandsWrite],
            InstallationState::Active,
            Some(Level::Read),
        )),
        Some(owner(
            &[Scope::CommandsWrite],
            InstallationState::Active,
            None,
        )),
        Some(OwnerFacts::default()),
    ];
    for action in [
        Action::CommandRead,
        Action::CommandInvoke,
        Action::CommandAutocomplete,
    ] {
        let ctx = with(&[Level::Admin], Some(reachable()));
        assert_eq!(authorize(&person, action, &missing, &ctx), hidden());
        for o in unreachable {
            // Even with the level the command asks for, and above it.
            let r = command(place.clone(), Level::Trigger, None);
            let ctx = with(&[Level::Admin], o);
            assert_eq!(authorize(&person, action, &r, &ctx), hidden(), "{o:?}");
        }
        let r = command(place.clone(), Level::Trigger, None);
        let ctx = with(&[Level::Admin], Some(reachable()));
        assert_eq!(authorize(&person, action, &r, &ctx), Decision::Allow);
    }
}

#[test]
fn a_scoped_command_is_hidden_elsewhere() {
    let agent = active(PrincipalKind::Agent);
    let place = channel(ChannelState::Open);
    let ctx = with(&[Level::Trigger], Some(reachable()));
    let here = command(place.clone(), Level::Trigger, Some(place.id));
    let elsewhere = command(place, Level::Trigger, Some(new_id()));
    assert_eq!(
        authorize(&agent, Action::CommandInvoke, &here, &ctx),
        Decision::Allow
    );
    assert_eq!(
        authorize(&agent, Action::CommandInvoke, &elsewhere, &ctx),
        hidden()
    );
}

#[test]
fn the_command_level_is_its_own_and_the_place_hides_first() {
    let person = active(PrincipalKind::Person);
    let place = channel(ChannelState::Open);
    let r = command(place.clone(), Level::Trigger, None);
    let ctx = with(&[Level::Write], Some(reachable()));
    assert_eq!(
        authorize(&person, Action::CommandInvoke, &r, &ctx),
        forbidden(Reason::LevelInsufficient)
    );
    let low = command(place, Level::Read, None);
    let ctx = with(&[Level::Read], Some(reachable()));
    assert_eq!(
        authorize(&person, Action::CommandInvoke, &low, &ctx),
        Decision::Allow
    );
    // No read on the place at all: hidden, with a reachable owner too.
    let ctx = with(&[], Some(reachable()));
    assert_eq!(
        authorize(&person, Action::CommandInvoke, &r, &ctx),
        hidden()
    );
}

#[test]
fn a_channel_state_binds_an_invoke_like_a_write() {
    let person = active(PrincipalKind::Person);
    for (state, grant, decision) in [
        (
            ChannelState::Archived,
            Level::Admin,
            forbidden(Reason::ChannelArchived),
        ),
        (
            ChannelState::ReadOnly,
            Level::Trigger,
            forbidden(Reason::ChannelReadOnly),
        ),
        (ChannelState::ReadOnly, Level::Admin, Decision::Allow),
    ] {
        let r = command(channel(state), Level::Read, None);
        let ctx = with(&[grant], Some(reachable()));
        assert_eq!(
            authorize(&person, Action::CommandInvoke, &r, &ctx),
            decision
        );
        // Listing is no write: the state does not bind it.
        assert_eq!(
            authorize(&person, Action::CommandRead, &r, &ctx),
            Decision::Allow
        );
    }
}

#[test]
fn apps_never_invoke_and_members_never_register() {
    let app = active(PrincipalKind::App);
    let r = command(channel(ChannelState::Open), Level::Read, None);
    let ctx = with(&[Level::Write], Some(reachable()));
    assert_eq!(
        authorize(&app, Action::CommandInvoke, &r, &ctx),
        forbidden(Reason::SubjectKindNotAllowed)
    );
    let person = active(PrincipalKind::Person);
    assert_eq!(
        authorize(&person, Action::CommandRegister, &Resource::Hub, &ctx),
        forbidden(Reason::SubjectKindNotAllowed)
    );
}

#[test]
fn register_needs_the_scope_everywhere_and_write_on_a_named_place() {
    let app = active(PrincipalKind::App);
    let mut ctx = with(&[Level::Write], None);
    assert_eq!(
        authorize(&app, Action::CommandRegister, &Resource::Hub, &ctx),
        Decision::Allow
    );
    let task = task_place(id_of(&app), &[]);
    assert_eq!(
        authorize(
            &app,
            Action::CommandRegister,
            &Resource::Conversation(task.clone()),
            &ctx
        ),
        Decision::Allow
    );
    let read_only = channel(ChannelState::Open);
    let low = with(&[Level::Read], None);
    assert_eq!(
        authorize(
            &app,
            Action::CommandRegister,
            &Resource::Conversation(read_only),
            &low
        ),
        forbidden(Reason::LevelInsufficient)
    );
    ctx.facts.installation = Some(InstallationFacts {
        state: InstallationState::Active,
        scopes: ScopeSet::of([Scope::MessagesWrite]),
    });
    // The scope binds in the app's own task conversation too: a command
    // is no write into a place.
    for resource in [Resource::Hub, Resource::Conversation(task)] {
        assert_eq!(
            authorize(&app, Action::CommandRegister, &resource, &ctx),
            forbidden(Reason::ScopeMissing)
        );
    }
}
