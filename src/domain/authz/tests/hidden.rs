//! Hidden equals missing: for every resource kind, a resource the subject
//! cannot read and a `Missing` one of that kind get one identical denial,
//! whatever the facts say.

use super::*;

/// For a subject: (action, kind, a resource of that kind it cannot read).
fn hidden_cases(me: Uuid) -> Vec<(Action, ResourceKind, Resource)> {
    let other = new_id();
    let hidden_places = [
        channel(ChannelState::Open),
        direct(&[other, new_id()]),
        group(&[other, new_id()]),
        task_place(new_id(), &[other]),
    ];
    let mut cases = Vec::new();
    for place in &hidden_places {
        for action in [
            Action::ConversationRead,
            Action::MessageCreate,
            Action::TypingSend,
            Action::ChannelList,
            Action::ChannelManage,
        ] {
            cases.push((
                action,
                ResourceKind::Conversation,
                Resource::Conversation(place.clone()),
            ));
        }
        let message = Resource::Message {
            place: place.clone(),
            sender: other,
            recipient: false,
            app_reply: false,
        };
        cases.push((Action::MessageRead, ResourceKind::Message, message.clone()));
        cases.push((Action::DispatchRequest, ResourceKind::Message, message));
        // A command in a place the subject cannot read (its owner being
        // reachable there changes nothing).
        let command = Resource::Command {
            place: place.clone(),
            owner: new_id(),
            required_level: Level::Read,
            scoped_to: None,
        };
        for action in [
            Action::CommandRead,
            Action::CommandInvoke,
            Action::CommandAutocomplete,
        ] {
            cases.push((action, ResourceKind::Command, command.clone()));
        }
    }
    // A member who neither sent nor received a message does not see it...
    let mine = direct(&[me, other]);
    let unseen = Resource::Message {
        place: mine.clone(),
        sender: other,
        recipient: false,
        app_reply: false,
    };
    cases.push((Action::MessageRead, ResourceKind::Message, unseen.clone()));
    cases.push((Action::DispatchRequest, ResourceKind::Message, unseen));
    // ...and its own message is none to dispatch.
    let own = Resource::Message {
        place: mine,
        sender: me,
        recipient: false,
        app_reply: false,
    };
    cases.push((Action::DispatchRequest, ResourceKind::Message, own));
    let stream = Resource::Stream { audience: other };
    cases.push((Action::EventRead, ResourceKind::Stream, stream.clone()));
    cases.push((Action::EventAck, ResourceKind::Stream, stream));
    let space = Resource::Space { id: new_id() };
    cases.push((Action::SpaceRead, ResourceKind::Space, space.clone()));
    cases.push((Action::ChannelCreate, ResourceKind::Space, space));
    let task = Resource::Task {
        app_id: other,
        participants: vec![new_id()],
    };
    cases.push((Action::TaskRead, ResourceKind::Task, task.clone()));
    cases.push((Action::TaskManage, ResourceKind::Task, task));
    for task_app in [Some(other), None] {
        let lease = Resource::Lease {
            recipient: other,
            task_app,
        };
        cases.push((Action::DispatchComplete, ResourceKind::Lease, lease.clone()));
        cases.push((Action::DispatchResolve, ResourceKind::Lease, lease));
    }
    for place in &hidden_places {
        let component = Resource::Component(Box::new(component_on(place.clone(), other)));
        cases.push((
            Action::InteractionCreate,
            ResourceKind::Component,
            component.clone(),
        ));
        cases.push((Action::ComponentUpdate, ResourceKind::Component, component));
    }
    cases.push((
        Action::InteractionRespond,
        ResourceKind::Interaction,
        Resource::Interaction { app_id: other },
    ));
    for owner in [Some(other), None] {
        let agent = Resource::Agent { owner };
        cases.push((Action::AgentKeysRead, ResourceKind::Agent, agent.clone()));
        cases.push((Action::AgentKeysRevoke, ResourceKind::Agent, agent));
    }
    for on in [
        PlaceRef::Space(new_id()),
        PlaceRef::Channel(channel(ChannelState::Open)),
    ] {
        cases.push((
            Action::GrantManage,
            ResourceKind::Grant,
            Resource::Grant { on },
        ));
    }
    cases
}

fn admitted(action: Action) -> Vec<PrincipalKind> {
    [
        PrincipalKind::Agent,
        PrincipalKind::Person,
        PrincipalKind::App,
    ]
    .into_iter()
    .filter(|k| action.requirement().subjects.admits_principal(*k))
    .collect()
}

#[test]
fn a_hidden_resource_and_a_missing_one_get_one_denial() {
    let mut checked = 0;
    for kind in [
        PrincipalKind::Agent,
        PrincipalKind::Person,
        PrincipalKind::App,
    ] {
        let subject = active(kind);
        for (action, resource_kind, resource) in hidden_cases(id_of(&subject)) {
            if !admitted(action).contains(&kind) {
                continue;
            }
            let hidden = authorize(&subject, action, &resource, &request(&[]));
            let missing = authorize(
                &subject,
                action,
                &Resource::Missing(resource_kind),
                &request(&[]),
            );
            assert_eq!(hidden, missing, "{action} by {kind} on {resource:?}");
            match hidden {
                Decision::Deny(Denial {
                    answer: Answer::NotFound,
                    named: None,
                    ..
                }) => {}
                other => panic!("{action} by {kind} on {resource:?}: {other:?}"),
            }
            checked += 1;
        }
    }
    assert!(checked > 60, "only {checked} cases ran");
}

#[test]
fn every_kind_that_can_be_hidden_is_covered() {
    let mut covered: Vec<ResourceKind> = hidden_cases(new_id()).into_iter().map(|c| c.1).collect();
    covered.sort_by_key(|k| k.as_str());
    covered.dedup();
    // The hub and an app named by `task.request` are never hidden: they are
    // there for everyone or missing (a principal that is no app is Missing).
    let hideable: Vec<ResourceKind> = ResourceKind::ALL
        .into_iter()
        .filter(|k| !matches!(k, ResourceKind::Hub | ResourceKind::App))
        .collect();
    assert_eq!(covered.len(), hideable.len());
    assert!(hideable.iter().all(|k| covered.contains(k)));
}

#[test]
fn a_missing_resource_ignores_every_fact_and_every_kind_is_not_found() {
    let facts = Context {
        mode: Mode::Request,
        facts: Facts {
            grants: vec![Level::Admin],
            channel_grants: vec![Level::Admin],
            named: vec![named(Some(PrincipalKind::Agent), true, true)],
            installation: Some(installed()),
            owner: Some(OwnerFacts {
                installation: Some(installed()),
                level: Some(Level::Write),
            }),
        },
    };
    for action in Action::ALL {
        for kind in ResourceKind::ALL {
            let missing = Resource::Missing(kind);
            let subjects = admitted(action).into_iter().map(active).chain(
                action
                    .requirement()
                    .subjects
                    .operator
                    .then_some(Subject::Operator),
            );
            for subject in subjects {
                let with = authorize(&subject, action, &missing, &facts);
                assert_eq!(with, authorize(&subject, action, &missing, &request(&[])));
                assert!(
                    matches!(
                        with,
                        Decision::Deny(Denial {
                            answer: Answer::NotFound,
                            named: None,
                            ..
                        })
                    ),
                    "{action} on missing {}: {with:?}",
                    kind.as_str()
                );
            }
        }
    }
}

#[test]
fn another_principals_stream_and_lease_are_not_self() {
    let agent = active(PrincipalKind::Agent);
    for resource in [
        Resource::Missing(ResourceKind::Stream),
        Resource::Stream { audience: new_id() },
    ] {
        assert_eq!(
            authorize(&agent, Action::EventAck, &resource, &request(&[])),
            denied(Reason::NotSelf, Answer::NotFound)
        );
    }
    for resource in [
        Resource::Missing(ResourceKind::Lease),
        Resource::Lease {
            recipient: new_id(),
            task_app: None,
        },
    ] {
        assert_eq!(
            authorize(&agent, Action::DispatchComplete, &resource, &request(&[])),
            denied(Reason::NotSelf, Answer::NotFound)
        );
    }
}

/// For a subject: one resource of each kind it could read, given admin.
fn readable_of_each_kind(me: Uuid) -> Vec<Resource> {
    let mine = direct(&[me, new_id()]);
    vec![
        Resource::Hub,
        Resource::App,
        Resource::Stream { audience: me },
        Resource::Space { id: new_id() },
        Resource::Conversation(mine.clone()),
        Resource::Message {
            place: mine,
            sender: me,
            recipient: true,
            app_reply: false,
        },
        Resource::Task {
            app_id: me,
            participants: vec![me],
        },
        Resource::Lease {
            recipient: me,
            task_app: Some(me),
        },
        Resource::Agent { owner: Some(me) },
        Resource::Grant {
            on: PlaceRef::Space(new_id()),
        },
        Resource::Command {
            place: direct(&[me, new_id()]),
            owner: new_id(),
            required_level: Level::Read,
            scoped_to: None,
        },
        Resource::Component(Box::new(ComponentOn {
            recipient: true,
            ..component_on(direct(&[me, new_id()]), me)
        })),
        Resource::Interaction { app_id: me },
    ]
}

#[test]
fn a_resource_of_another_kind_than_the_actions_is_hidden() {
    let subjects = [
        PrincipalKind::Agent,
        PrincipalKind::Person,
        PrincipalKind::App,
    ]
    .map(active)
    .into_iter()
    .chain([Subject::Operator]);
    for subject in subjects {
        let me = match subject {
            Subject::Principal { id, .. } => id,
            Subject::Operator => new_id(),
        };
        let all = readable_of_each_kind(me);
        assert_eq!(all.len(), ResourceKind::ALL.len());
        for action in Action::ALL {
            let need = action.requirement();
            let admits = match subject {
                Subject::Principal { kind, .. } => need.subjects.admits_principal(kind),
                Subject::Operator => need.subjects.operator,
            };
            if !admits {
                continue;
            }
            // A scoped register names a conversation besides the hub.
            let scoped_register = |r: &Resource| {
                action == Action::CommandRegister && r.kind() == ResourceKind::Conversation
            };
            for resource in all
                .iter()
                .filter(|r| r.kind() != need.on && !scoped_register(r))
            {
                let decision = authorize(&subject, action, resource, &request(&[Level::Admin]));
                let missing = authorize(
                    &subject,
                    action,
                    &Resource::Missing(resource.kind()),
                    &request(&[]),
                );
                assert_eq!(decision, missing, "{action} on {resource:?}");
                assert!(
                    matches!(
                        decision,
                        Decision::Deny(Denial {
                            answer: Answer::NotFound,
                            ..
                        })
                    ),
                    "{action} on {resource:?}: {decision:?}"
                );
            }
        }
    }
}
