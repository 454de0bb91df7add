//! Unit tests of the decision (ADR 0020 §6, unit part): effective levels,
//! the order of the steps, every action of the catalogue, channel states,
//! and a missing resource answered like a hidden one.

mod actions;
mod actions_manage;
mod catalogue;
mod commands;
mod components;
mod hidden;
mod installations;
mod levels;
mod order;
mod states;

use uuid::Uuid;

use super::*;

pub fn new_id() -> Uuid {
    Uuid::new_v4()
}

pub fn active(kind: PrincipalKind) -> Subject {
    Subject::Principal {
        id: new_id(),
        kind,
        active: true,
    }
}

pub fn id_of(subject: &Subject) -> Uuid {
    match subject {
        Subject::Principal { id, .. } => *id,
        Subject::Operator => panic!("the operator has no id"),
    }
}

pub fn request(grants: &[Level]) -> Context {
    Context {
        mode: Mode::Request,
        facts: Facts {
            grants: grants.to_vec(),
            named: Vec::new(),
            installation: Some(installed()),
            ..Facts::default()
        },
    }
}

pub fn naming(named: &[Named]) -> Context {
    Context {
        mode: Mode::Request,
        facts: Facts {
            grants: Vec::new(),
            named: named.to_vec(),
            installation: Some(installed()),
            ..Facts::default()
        },
    }
}

/// An active installation holding every scope: what an app subject has
/// in the tests not about installations (ignored for other kinds).
pub fn installed() -> InstallationFacts {
    InstallationFacts {
        state: InstallationState::Active,
        scopes: crate::domain::installation::ScopeSet::of(Scope::ALL),
    }
}

pub fn named(kind: Option<PrincipalKind>, active: bool, in_task: bool) -> Named {
    Named {
        id: new_id(),
        kind,
        active,
        in_task,
    }
}

pub fn channel(state: ChannelState) -> Place {
    Place {
        id: new_id(),
        kind: PlaceKind::Channel {
            space_id: new_id(),
            state,
        },
        participants: Vec::new(),
    }
}

pub fn direct(members: &[Uuid]) -> Place {
    Place {
        id: new_id(),
        kind: PlaceKind::Direct,
        participants: members.to_vec(),
    }
}

pub fn group(members: &[Uuid]) -> Place {
    Place {
        kind: PlaceKind::Group,
        ..direct(members)
    }
}

pub fn task_place(app_id: Uuid, members: &[Uuid]) -> Place {
    Place {
        kind: PlaceKind::Task { app_id },
        ..direct(members)
    }
}

/// A usable button of `author`'s card on `place`, seen by no one named.
pub fn component_on(place: Place, author: Uuid) -> ComponentOn {
    ComponentOn {
        place,
        author,
        recipient: false,
        on_card: true,
        usable: true,
        trigger: Level::Write,
        capability: None,
        restricted_to: None,
    }
}

pub fn denied(reason: Reason, answer: Answer) -> Decision {
    Decision::Deny(Denial {
        reason,
        answer,
        named: None,
    })
}

pub fn hidden() -> Decision {
    denied(Reason::NoGrant, Answer::NotFound)
}

pub fn forbidden(reason: Reason) -> Decision {
    denied(reason, Answer::Forbidden)
}
