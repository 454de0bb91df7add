//! Every action of the catalogue, continued: the operator's actions,
//! places and grants, tasks, dispatch, and owned agents.

use super::*;

fn decide(subject: &Subject, action: Action, resource: Resource, grants: &[Level]) -> Decision {
    authorize(subject, action, &resource, &request(grants))
}

const OPERATOR_ACTIONS: [Action; 6] = [
    Action::SpaceCreate,
    Action::GroupManage,
    Action::PersonCreate,
    Action::PersonDisable,
    Action::AgentOwnerSet,
    Action::AuditRead,
];

#[test]
fn the_operators_actions_are_the_operators_alone() {
    for action in OPERATOR_ACTIONS {
        assert_eq!(
            decide(&Subject::Operator, action, Resource::Hub, &[]),
            Decision::Allow
        );
        let person = active(PrincipalKind::Person);
        assert_eq!(
            decide(&person, action, Resource::Hub, &[Level::Admin]),
            forbidden(Reason::SubjectKindNotAllowed)
        );
    }
}

#[test]
fn channel_create_needs_admin_on_the_space() {
    let person = active(PrincipalKind::Person);
    let space = || Resource::Space { id: new_id() };
    let create = Action::ChannelCreate;
    assert_eq!(
        decide(&person, create, space(), &[Level::Admin]),
        Decision::Allow
    );
    for below in [Level::Read, Level::Write, Level::Trigger] {
        assert_eq!(
            decide(&person, create, space(), &[below]),
            forbidden(Reason::LevelInsufficient)
        );
    }
    assert_eq!(decide(&person, create, space(), &[]), hidden());
    assert_eq!(
        decide(&Subject::Operator, create, space(), &[]),
        Decision::Allow
    );
    let missing = Resource::Missing(ResourceKind::Space);
    assert_eq!(decide(&Subject::Operator, create, missing, &[]), hidden());
}

#[test]
fn channel_manage_needs_admin_on_the_channel() {
    let person = active(PrincipalKind::Person);
    let open = || Resource::Conversation(channel(ChannelState::Open));
    let manage = Action::ChannelManage;
    assert_eq!(
        decide(&person, manage, open(), &[Level::Admin]),
        Decision::Allow
    );
    assert_eq!(
        decide(&person, manage, open(), &[Level::Trigger]),
        forbidden(Reason::LevelInsufficient)
    );
    assert_eq!(decide(&person, manage, open(), &[]), hidden());
    assert_eq!(
        decide(&Subject::Operator, manage, open(), &[]),
        Decision::Allow
    );
}

#[test]
fn grant_manage_needs_admin_on_the_grants_place() {
    let person = active(PrincipalKind::Person);
    let places = || {
        [
            PlaceRef::Space(new_id()),
            PlaceRef::Channel(channel(ChannelState::Archived)),
        ]
    };
    let manage = Action::GrantManage;
    for on in places() {
        let grant = || Resource::Grant { on: on.clone() };
        assert_eq!(
            decide(&person, manage, grant(), &[Level::Admin]),
            Decision::Allow
        );
        assert_eq!(
            decide(&person, manage, grant(), &[Level::Write]),
            forbidden(Reason::LevelInsufficient)
        );
        assert_eq!(decide(&person, manage, grant(), &[]), hidden());
        assert_eq!(
            decide(&Subject::Operator, manage, grant(), &[]),
            Decision::Allow
        );
    }
    // Agents may hold admin, but only people and the operator manage.
    let agent = active(PrincipalKind::Agent);
    let grant = Resource::Grant {
        on: places()[0].clone(),
    };
    assert_eq!(
        decide(&agent, manage, grant, &[Level::Admin]),
        forbidden(Reason::SubjectKindNotAllowed)
    );
}

#[test]
fn task_request_needs_an_app_and_active_agents_as_invitees() {
    let agent = active(PrincipalKind::Agent);
    let invitees = [named(Some(PrincipalKind::Agent), true, false)];
    let request_task = |resource: Resource, named: &[Named]| {
        authorize(&agent, Action::TaskRequest, &resource, &naming(named))
    };
    assert_eq!(request_task(Resource::App, &invitees), Decision::Allow);
    assert_eq!(
        request_task(Resource::Missing(ResourceKind::App), &invitees),
        hidden()
    );
    for bad in [
        named(Some(PrincipalKind::Person), true, false),
        named(Some(PrincipalKind::App), true, false),
        named(Some(PrincipalKind::Agent), false, false),
        named(None, false, false),
    ] {
        assert_eq!(
            request_task(Resource::App, &[invitees[0], bad]),
            Decision::Deny(Denial {
                reason: Reason::NoGrant,
                answer: Answer::NotFound,
                named: Some(bad.id),
            })
        );
    }
}

#[test]
fn task_read_is_for_participants_and_the_tasks_app() {
    let (agent, app) = (active(PrincipalKind::Agent), active(PrincipalKind::App));
    let task = Resource::Task {
        app_id: id_of(&app),
        participants: vec![id_of(&agent)],
    };
    assert_eq!(
        decide(&agent, Action::TaskRead, task.clone(), &[]),
        Decision::Allow
    );
    assert_eq!(
        decide(&app, Action::TaskRead, task.clone(), &[]),
        Decision::Allow
    );
    for outsider in [active(PrincipalKind::Agent), active(PrincipalKind::App)] {
        assert_eq!(
            decide(&outsider, Action::TaskRead, task.clone(), &[Level::Admin]),
            hidden()
        );
    }
}

#[test]
fn task_manage_is_the_tasks_apps_over_its_participants() {
    let (app, participant) = (active(PrincipalKind::App), new_id());
    let task = Resource::Task {
        app_id: id_of(&app),
        participants: vec![participant],
    };
    let inside = Named {
        id: participant,
        kind: Some(PrincipalKind::Agent),
        active: true,
        in_task: true,
    };
    let manage = |subject: &Subject, named: &[Named]| {
        authorize(subject, Action::TaskManage, &task, &naming(named))
    };
    assert_eq!(manage(&app, &[inside]), Decision::Allow);
    for outside in [
        named(Some(PrincipalKind::Agent), true, false),
        named(None, false, false),
    ] {
        assert_eq!(
            manage(&app, &[inside, outside]),
            Decision::Deny(Denial {
                reason: Reason::NotTaskParticipant,
                answer: Answer::Forbidden,
                named: Some(outside.id),
            })
        );
    }
    assert_eq!(manage(&active(PrincipalKind::App), &[inside]), hidden());
}

#[test]
fn dispatch_request_needs_read_and_to_be_a_recipient() {
    let agent = active(PrincipalKind::Agent);
    let (me, other) = (id_of(&agent), new_id());
    let message = |place: Place, recipient: bool| Resource::Message {
        place,
        sender: other,
        recipient,
        app_reply: false,
    };
    let dispatch = Action::DispatchRequest;
    let task = task_place(new_id(), &[me, other]);
    assert_eq!(
        decide(&agent, dispatch, message(task.clone(), true), &[]),
        Decision::Allow
    );
    assert_eq!(
        decide(&agent, dispatch, message(task, false), &[]),
        hidden()
    );
    // Channels have no recipients yet (issue 16 decides): a channel
    // message is hidden to a dispatch, whatever the grants.
    let open = channel(ChannelState::Open);
    assert_eq!(
        decide(
            &agent,
            dispatch,
            message(open.clone(), true),
            &[Level::Admin]
        ),
        hidden()
    );
    assert_eq!(decide(&agent, dispatch, message(open, true), &[]), hidden());
}

#[test]
fn dispatch_complete_is_the_recipients() {
    let agent = active(PrincipalKind::Agent);
    let lease = |recipient| Resource::Lease {
        recipient,
        task_app: Some(new_id()),
    };
    let complete = Action::DispatchComplete;
    assert_eq!(
        decide(&agent, complete, lease(id_of(&agent)), &[]),
        Decision::Allow
    );
    assert_eq!(
        decide(&agent, complete, lease(new_id()), &[]),
        denied(Reason::NotSelf, Answer::NotFound)
    );
}

#[test]
fn dispatch_resolve_is_the_tasks_apps() {
    let app = active(PrincipalKind::App);
    let lease = |task_app| Resource::Lease {
        recipient: new_id(),
        task_app,
    };
    let resolve = Action::DispatchResolve;
    assert_eq!(
        decide(&app, resolve, lease(Some(id_of(&app))), &[]),
        Decision::Allow
    );
    assert_eq!(decide(&app, resolve, lease(Some(new_id())), &[]), hidden());
    assert_eq!(decide(&app, resolve, lease(None), &[]), hidden());
}

#[test]
fn agent_keys_are_the_owners_and_the_operators() {
    let person = active(PrincipalKind::Person);
    for action in [Action::AgentKeysRead, Action::AgentKeysRevoke] {
        let owned = Resource::Agent {
            owner: Some(id_of(&person)),
        };
        assert_eq!(decide(&person, action, owned.clone(), &[]), Decision::Allow);
        assert_eq!(
            decide(&Subject::Operator, action, owned.clone(), &[]),
            Decision::Allow
        );
        let stranger = active(PrincipalKind::Person);
        assert_eq!(decide(&stranger, action, owned, &[Level::Admin]), hidden());
        assert_eq!(
            decide(&person, action, Resource::Agent { owner: None }, &[]),
            hidden()
        );
        let agent = Resource::Agent { owner: None };
        assert_eq!(
            decide(&Subject::Operator, action, agent, &[]),
            Decision::Allow
        );
    }
}
