//! Every action of the catalogue: the kinds it refuses, inactivity, then an
//! allow and each denial it can give (conversations, messages, streams).
//! Places, tasks, dispatch and agents are in `actions_manage.rs`.

use super::*;

const PRINCIPAL_KINDS: [PrincipalKind; 3] = [
    PrincipalKind::Agent,
    PrincipalKind::Person,
    PrincipalKind::App,
];

fn decide(subject: &Subject, action: Action, resource: Resource, grants: &[Level]) -> Decision {
    authorize(subject, action, &resource, &request(grants))
}

#[test]
fn catalogue_names_round_trip_and_are_unique() {
    let mut names: Vec<&str> = Action::ALL.iter().map(|a| a.as_str()).collect();
    for a in Action::ALL {
        assert_eq!(Action::parse(a.as_str()), Some(a));
    }
    names.sort();
    names.dedup();
    assert_eq!(names.len(), Action::ALL.len());
    assert_eq!(Action::parse("message.delete"), None);
}

#[test]
fn every_action_refuses_the_kinds_it_does_not_admit() {
    for action in Action::ALL {
        let admitted = action.requirement().subjects;
        for kind in PRINCIPAL_KINDS {
            if !admitted.admits_principal(kind) {
                assert_eq!(
                    decide(&active(kind), action, Resource::Hub, &[Level::Admin]),
                    forbidden(Reason::SubjectKindNotAllowed),
                    "{action} by {kind}"
                );
            }
        }
        if !admitted.operator {
            assert_eq!(
                decide(&Subject::Operator, action, Resource::Hub, &[]),
                forbidden(Reason::SubjectKindNotAllowed),
                "{action} by the operator"
            );
        }
    }
}

#[test]
fn every_action_refuses_an_inactive_principal_it_admits() {
    for action in Action::ALL {
        for kind in PRINCIPAL_KINDS {
            if action.requirement().subjects.admits_principal(kind) {
                let subject = Subject::Principal {
                    id: new_id(),
                    kind,
                    active: false,
                };
                assert_eq!(
                    decide(&subject, action, Resource::Hub, &[Level::Admin]),
                    forbidden(Reason::PrincipalInactive),
                    "{action} by {kind}"
                );
            }
        }
    }
}

#[test]
fn conversation_create_needs_active_agents_or_people() {
    let agent = active(PrincipalKind::Agent);
    let fine = [
        named(Some(PrincipalKind::Agent), true, false),
        named(Some(PrincipalKind::Person), true, false),
    ];
    for subject in [agent, active(PrincipalKind::Person)] {
        let ctx = naming(&fine);
        assert_eq!(
            authorize(&subject, Action::ConversationCreate, &Resource::Hub, &ctx),
            Decision::Allow
        );
    }
    for bad in [
        named(None, false, false),
        named(Some(PrincipalKind::App), true, false),
        named(Some(PrincipalKind::Person), false, false),
    ] {
        let ctx = naming(&[fine[0], bad]);
        assert_eq!(
            authorize(&agent, Action::ConversationCreate, &Resource::Hub, &ctx),
            Decision::Deny(Denial {
                reason: Reason::NoGrant,
                answer: Answer::NotFound,
                named: Some(bad.id),
            })
        );
    }
}

#[test]
fn conversation_read_needs_read_on_the_place() {
    let person = active(PrincipalKind::Person);
    let me = id_of(&person);
    let open = || Resource::Conversation(channel(ChannelState::Open));
    let read = Action::ConversationRead;
    assert_eq!(
        decide(&person, read, open(), &[Level::Read]),
        Decision::Allow
    );
    assert_eq!(
        decide(
            &person,
            read,
            Resource::Conversation(direct(&[me, new_id()])),
            &[]
        ),
        Decision::Allow
    );
    assert_eq!(decide(&person, read, open(), &[]), hidden());
    let app = active(PrincipalKind::App);
    let task = task_place(id_of(&app), &[new_id()]);
    assert_eq!(
        decide(&app, read, Resource::Conversation(task), &[]),
        Decision::Allow
    );
    assert_eq!(
        decide(
            &app,
            read,
            Resource::Conversation(direct(&[me, new_id()])),
            &[]
        ),
        hidden()
    );
}

#[test]
fn message_read_needs_read_and_outside_channels_a_part_in_it() {
    let agent = active(PrincipalKind::Agent);
    let (me, other) = (id_of(&agent), new_id());
    let message = |place: Place, sender: Uuid, recipient: bool| Resource::Message {
        place,
        sender,
        recipient,
        app_reply: false,
    };
    let read = Action::MessageRead;
    let mine = direct(&[me, other]);
    assert_eq!(
        decide(&agent, read, message(mine.clone(), me, false), &[]),
        Decision::Allow
    );
    assert_eq!(
        decide(&agent, read, message(mine.clone(), other, true), &[]),
        Decision::Allow
    );
    assert_eq!(
        decide(&agent, read, message(mine, other, false), &[]),
        hidden()
    );
    let open = channel(ChannelState::Open);
    assert_eq!(
        decide(
            &agent,
            read,
            message(open.clone(), other, false),
            &[Level::Read]
        ),
        Decision::Allow
    );
    assert_eq!(
        decide(&agent, read, message(open, other, false), &[]),
        hidden()
    );
}

#[test]
fn message_create_needs_write() {
    let agent = active(PrincipalKind::Agent);
    let create = Action::MessageCreate;
    let mine = direct(&[id_of(&agent), new_id()]);
    assert_eq!(
        decide(&agent, create, Resource::Conversation(mine), &[]),
        Decision::Allow
    );
    let open = || Resource::Conversation(channel(ChannelState::Open));
    assert_eq!(
        decide(&agent, create, open(), &[Level::Write]),
        Decision::Allow
    );
    assert_eq!(
        decide(&agent, create, open(), &[Level::Read]),
        forbidden(Reason::LevelInsufficient)
    );
    assert_eq!(decide(&agent, create, open(), &[]), hidden());
}

#[test]
fn an_app_sends_in_its_own_task_or_a_granted_channel_only() {
    let app = active(PrincipalKind::App);
    let create = Action::MessageCreate;
    let own = task_place(id_of(&app), &[new_id()]);
    assert_eq!(
        decide(&app, create, Resource::Conversation(own), &[]),
        Decision::Allow
    );
    let open = || Resource::Conversation(channel(ChannelState::Open));
    assert_eq!(
        decide(&app, create, open(), &[Level::Admin]),
        Decision::Allow
    );
    assert_eq!(
        decide(&app, create, open(), &[Level::Read]),
        forbidden(Reason::LevelInsufficient)
    );
    let others = task_place(new_id(), &[new_id()]);
    assert_eq!(
        decide(&app, create, Resource::Conversation(others), &[]),
        hidden()
    );
    let direct = direct(&[new_id(), new_id()]);
    assert_eq!(
        decide(
            &app,
            create,
            Resource::Conversation(direct),
            &[Level::Write]
        ),
        hidden()
    );
}

#[test]
fn typing_send_needs_write_and_is_for_agents_and_people() {
    let open = || Resource::Conversation(channel(ChannelState::Open));
    for kind in [PrincipalKind::Agent, PrincipalKind::Person] {
        let subject = active(kind);
        assert_eq!(
            decide(&subject, Action::TypingSend, open(), &[Level::Write]),
            Decision::Allow
        );
        assert_eq!(
            decide(&subject, Action::TypingSend, open(), &[Level::Read]),
            forbidden(Reason::LevelInsufficient)
        );
        assert_eq!(decide(&subject, Action::TypingSend, open(), &[]), hidden());
    }
    assert_eq!(
        decide(
            &active(PrincipalKind::App),
            Action::TypingSend,
            open(),
            &[Level::Write]
        ),
        forbidden(Reason::SubjectKindNotAllowed)
    );
}

#[test]
fn channel_list_keeps_the_channels_one_reads() {
    for kind in PRINCIPAL_KINDS {
        let subject = active(kind);
        let row = || Resource::Conversation(channel(ChannelState::Archived));
        assert_eq!(
            decide(&subject, Action::ChannelList, row(), &[Level::Read]),
            Decision::Allow
        );
        assert_eq!(decide(&subject, Action::ChannelList, row(), &[]), hidden());
    }
}

#[test]
fn space_read_needs_a_grant_on_the_space_or_one_of_its_channels() {
    // The loader folds the channels' grants into the facts for space.read.
    for kind in PRINCIPAL_KINDS {
        let subject = active(kind);
        let space = || Resource::Space { id: new_id() };
        assert_eq!(
            decide(&subject, Action::SpaceRead, space(), &[Level::Read]),
            Decision::Allow
        );
        assert_eq!(decide(&subject, Action::SpaceRead, space(), &[]), hidden());
    }
}

#[test]
fn a_channels_grants_make_its_space_known_never_managed() {
    // What makes a space known through its channels safe: every other
    // action on a space or its grants needs admin on the space.
    for action in Action::ALL {
        let need = action.requirement();
        if matches!(need.on, ResourceKind::Space | ResourceKind::Grant)
            && action != Action::SpaceRead
        {
            assert_eq!(need.level, Some(Level::Admin), "{action:?}");
        }
    }
    let admin_of_a_channel = Context {
        mode: Mode::Request,
        facts: Facts {
            channel_grants: vec![Level::Admin],
            ..Facts::default()
        },
    };
    let space = Resource::Space { id: new_id() };
    let person = active(PrincipalKind::Person);
    assert_eq!(
        authorize(&person, Action::SpaceRead, &space, &admin_of_a_channel),
        Decision::Allow
    );
    for action in [Action::ChannelCreate, Action::GrantManage] {
        let resource = match action {
            Action::GrantManage => Resource::Grant {
                on: PlaceRef::Space(new_id()),
            },
            _ => space.clone(),
        };
        // It knows the space (space.read says so): not hidden, but its
        // level there is not admin.
        assert_eq!(
            authorize(&person, action, &resource, &admin_of_a_channel),
            forbidden(Reason::LevelInsufficient),
            "{action:?}"
        );
        let mut writer_there = admin_of_a_channel.clone();
        writer_there.facts.grants = vec![Level::Write];
        assert_eq!(
            authorize(&person, action, &resource, &writer_there),
            forbidden(Reason::LevelInsufficient),
            "{action:?}: the level is the space's own"
        );
        let mut admin_there = writer_there.clone();
        admin_there.facts.grants = vec![Level::Admin];
        assert_eq!(
            authorize(&person, action, &resource, &admin_there),
            Decision::Allow,
            "{action:?}"
        );
        assert_eq!(
            authorize(&person, action, &resource, &request(&[])),
            hidden(),
            "{action:?}: a stranger"
        );
    }
}

#[test]
fn event_read_and_ack_are_on_ones_own_stream() {
    for action in [Action::EventRead, Action::EventAck] {
        for kind in PRINCIPAL_KINDS {
            let subject = active(kind);
            let own = Resource::Stream {
                audience: id_of(&subject),
            };
            assert_eq!(decide(&subject, action, own, &[]), Decision::Allow);
            let other = Resource::Stream { audience: new_id() };
            assert_eq!(
                decide(&subject, action, other, &[Level::Admin]),
                denied(Reason::NotSelf, Answer::NotFound)
            );
        }
    }
}
