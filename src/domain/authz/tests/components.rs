//! ADR 0027 §3: a component's decision, step by step: the trigger level,
//! the channel's state, the owning app's guard (answered as an inactive
//! component), the capability and the restriction; and the `app_reply`
//! refusal of a dispatch.

use super::*;
use crate::domain::component::{Capability, Restriction};
use crate::domain::installation::ScopeSet;

/// An interaction on a component of `on`, with the owner given.
fn press(subject: &Subject, on: ComponentOn, grants: &[Level], owner: OwnerFacts) -> Decision {
    let mut ctx = request(grants);
    ctx.facts.owner = Some(owner);
    authorize(
        subject,
        Action::InteractionCreate,
        &Resource::Component(Box::new(on)),
        &ctx,
    )
}

fn reachable_owner() -> OwnerFacts {
    OwnerFacts {
        installation: Some(installed()),
        level: Some(Level::Write),
    }
}

#[test]
fn the_trigger_level_and_the_channel_state_bind_first() {
    let alex = active(PrincipalKind::Person);
    let on = component_on(channel(ChannelState::Open), new_id());
    assert_eq!(
        press(&alex, on.clone(), &[Level::Write], reachable_owner()),
        Decision::Allow
    );
    let trigger = ComponentOn {
        trigger: Level::Trigger,
        ..on.clone()
    };
    assert_eq!(
        press(&alex, trigger, &[Level::Write], reachable_owner()),
        forbidden(Reason::LevelInsufficient)
    );
    let archived = component_on(channel(ChannelState::Archived), new_id());
    assert_eq!(
        press(&alex, archived, &[Level::Admin], reachable_owner()),
        forbidden(Reason::ChannelArchived)
    );
    let read_only = component_on(channel(ChannelState::ReadOnly), new_id());
    assert_eq!(
        press(&alex, read_only, &[Level::Write], reachable_owner()),
        forbidden(Reason::ChannelReadOnly)
    );
}

#[test]
fn an_unusable_component_or_an_unreachable_owner_is_inactive() {
    let agent = active(PrincipalKind::Agent);
    let on = component_on(channel(ChannelState::Open), new_id());
    let used = ComponentOn {
        usable: false,
        ..on.clone()
    };
    assert_eq!(
        press(&agent, used, &[Level::Write], reachable_owner()),
        forbidden(Reason::ComponentInactive)
    );
    let suspended = OwnerFacts {
        installation: Some(InstallationFacts {
            state: InstallationState::Suspended,
            ..installed()
        }),
        ..reachable_owner()
    };
    let no_scope = OwnerFacts {
        installation: Some(InstallationFacts {
            state: InstallationState::Active,
            scopes: ScopeSet::of([Scope::MessagesWrite, Scope::EventsSubscribe]),
        }),
        ..reachable_owner()
    };
    let lost_write = OwnerFacts {
        level: Some(Level::Read),
        ..reachable_owner()
    };
    for owner in [suspended, no_scope, lost_write, OwnerFacts::default()] {
        assert_eq!(
            press(&agent, on.clone(), &[Level::Write], owner),
            forbidden(Reason::ComponentInactive),
            "{owner:?}"
        );
    }
}

#[test]
fn only_a_person_with_trigger_approves_and_a_restriction_needs_admin() {
    let on = ComponentOn {
        capability: Some(Capability::ApproveActions),
        ..component_on(channel(ChannelState::Open), new_id())
    };
    let (person, agent) = (active(PrincipalKind::Person), active(PrincipalKind::Agent));
    assert_eq!(
        press(&person, on.clone(), &[Level::Trigger], reachable_owner()),
        Decision::Allow
    );
    assert_eq!(
        press(&person, on.clone(), &[Level::Write], reachable_owner()),
        forbidden(Reason::CapabilityMissing)
    );
    assert_eq!(
        press(&agent, on, &[Level::Admin], reachable_owner()),
        forbidden(Reason::CapabilityMissing)
    );
    for restriction in [Restriction::Owner, Restriction::RunStarter] {
        let on = ComponentOn {
            restricted_to: Some(restriction),
            ..component_on(channel(ChannelState::Open), new_id())
        };
        assert_eq!(
            press(&person, on.clone(), &[Level::Trigger], reachable_owner()),
            forbidden(Reason::ComponentRestricted)
        );
        assert_eq!(
            press(&person, on, &[Level::Admin], reachable_owner()),
            Decision::Allow
        );
    }
}

#[test]
fn a_component_not_on_the_card_is_left_to_the_handler() {
    let on = ComponentOn {
        on_card: false,
        usable: false,
        ..component_on(channel(ChannelState::Open), new_id())
    };
    let agent = active(PrincipalKind::Agent);
    assert_eq!(
        press(&agent, on, &[Level::Write], OwnerFacts::default()),
        Decision::Allow
    );
}

#[test]
fn only_the_author_changes_a_card_and_only_the_cards_app_answers() {
    let app = active(PrincipalKind::App);
    let me = id_of(&app);
    let mine = Resource::Component(Box::new(component_on(direct(&[new_id()]), me)));
    assert_eq!(
        authorize(&app, Action::ComponentUpdate, &mine, &request(&[])),
        Decision::Allow
    );
    let answer = Resource::Interaction { app_id: me };
    assert_eq!(
        authorize(&app, Action::InteractionRespond, &answer, &request(&[])),
        Decision::Allow
    );
    // components:write binds everywhere, task conversations included.
    let mut ctx = request(&[]);
    ctx.facts.installation = Some(InstallationFacts {
        state: InstallationState::Active,
        scopes: ScopeSet::of([Scope::MessagesWrite, Scope::EventsSubscribe]),
    });
    let in_task = Resource::Component(Box::new(component_on(task_place(me, &[new_id()]), me)));
    assert_eq!(
        authorize(&app, Action::ComponentUpdate, &in_task, &ctx),
        forbidden(Reason::ScopeMissing)
    );
    assert_eq!(
        authorize(&app, Action::InteractionRespond, &answer, &ctx),
        forbidden(Reason::ScopeMissing)
    );
}

#[test]
fn a_dispatch_on_an_apps_reply_is_refused_app_reply() {
    let agent = active(PrincipalKind::Agent);
    let me = id_of(&agent);
    let task = task_place(new_id(), &[me]);
    let message = |app_reply| Resource::Message {
        place: task.clone(),
        sender: new_id(),
        recipient: true,
        app_reply,
    };
    assert_eq!(
        authorize(
            &agent,
            Action::DispatchRequest,
            &message(false),
            &request(&[])
        ),
        Decision::Allow
    );
    assert_eq!(
        authorize(
            &agent,
            Action::DispatchRequest,
            &message(true),
            &request(&[])
        ),
        forbidden(Reason::AppReply)
    );
}
