//! The catalogue checked against ADR 0020's table written out as data, not
//! read back from `Action::requirement()`: a subject column changed in the
//! code fails here. Also the catalogue's places: actions about channels
//! see only channels, and a hidden place stays hidden whatever grants a
//! loader put in the facts.

use super::*;

/// ADR 0020 §3, "Actions today": the subjects column, row by row
/// (agent, person, app, operator).
const TABLE: [(Action, [bool; 4]); 40] = [
    (Action::ConversationCreate, [true, true, false, false]),
    (Action::ConversationRead, [true, true, true, false]),
    (Action::MessageRead, [true, true, true, false]),
    (Action::MessageCreate, [true, true, true, false]),
    (Action::TypingSend, [true, true, false, false]),
    (Action::ChannelList, [true, true, true, false]),
    (Action::SpaceRead, [true, true, true, false]),
    (Action::SpaceCreate, [false, false, false, true]),
    (Action::GroupManage, [false, false, false, true]),
    (Action::PersonCreate, [false, false, false, true]),
    (Action::PersonDisable, [false, false, false, true]),
    (Action::AgentOwnerSet, [false, false, false, true]),
    (Action::AuditRead, [false, false, false, true]),
    (Action::ChannelCreate, [false, true, false, true]),
    (Action::ChannelManage, [false, true, false, true]),
    (Action::GrantManage, [false, true, false, true]),
    (Action::TaskRequest, [true, false, false, false]),
    (Action::TaskRead, [true, false, true, false]),
    (Action::TaskManage, [false, false, true, false]),
    (Action::DispatchRequest, [true, false, false, false]),
    (Action::DispatchComplete, [true, false, false, false]),
    (Action::DispatchResolve, [false, false, true, false]),
    (Action::EventRead, [true, true, true, false]),
    (Action::EventAck, [true, true, true, false]),
    (Action::AgentKeysRead, [false, true, false, true]),
    (Action::AgentKeysRevoke, [false, true, false, true]),
    (Action::InstallationRead, [false, false, true, false]),
    (Action::AppUpgrade, [false, false, true, false]),
    (Action::AppKeysManage, [false, false, true, false]),
    (Action::CommandRead, [true, true, false, false]),
    (Action::CommandInvoke, [true, true, false, false]),
    (Action::CommandAutocomplete, [true, true, false, false]),
    (Action::CommandRegister, [false, false, true, false]),
    (
        Action::CommandAutocompleteRespond,
        [false, false, true, false],
    ),
    // ADR 0027 §3.
    (Action::InteractionCreate, [true, true, false, false]),
    (Action::InteractionRespond, [false, false, true, false]),
    (Action::ComponentUpdate, [false, false, true, false]),
    (Action::AppHealthRead, [false, false, true, false]),
    (Action::AppCheck, [false, false, true, false]),
    // ADR 0031 §6.
    (Action::InviteAccept, [true, true, true, false]),
];

#[test]
fn every_action_admits_exactly_the_subjects_of_the_adr_table() {
    assert_eq!(TABLE.len(), Action::ALL.len(), "a row per action");
    for (action, [agent, person, app, operator]) in TABLE {
        let cases = [
            (active(PrincipalKind::Agent), agent),
            (active(PrincipalKind::Person), person),
            (active(PrincipalKind::App), app),
            (Subject::Operator, operator),
        ];
        for (subject, admitted) in cases {
            // A missing resource: whatever else the action needs, a subject
            // it does not admit is refused for its kind first.
            let resource = Resource::Missing(action.requirement().on);
            let refused_for_kind = authorize(&subject, action, &resource, &request(&[]))
                == forbidden(Reason::SubjectKindNotAllowed);
            assert_eq!(refused_for_kind, !admitted, "{action:?} by {subject:?}");
        }
    }
}

#[test]
fn actions_about_channels_do_not_see_other_conversations() {
    let person = active(PrincipalKind::Person);
    let me = id_of(&person);
    for place in [
        direct(&[me, new_id()]),
        group(&[me, new_id()]),
        task_place(new_id(), &[me]),
    ] {
        let conversation = Resource::Conversation(place.clone());
        let grant = Resource::Grant {
            on: PlaceRef::Channel(place),
        };
        for subject in [person, Subject::Operator] {
            for (action, resource) in [
                (Action::ChannelManage, &conversation),
                (Action::ChannelList, &conversation),
                (Action::GrantManage, &grant),
            ] {
                if action == Action::ChannelList && subject == Subject::Operator {
                    continue; // not the operator's action
                }
                assert_eq!(
                    authorize(&subject, action, resource, &request(&[Level::Admin])),
                    hidden(),
                    "{action:?} by {subject:?} on a conversation that is no channel"
                );
            }
        }
    }
}

#[test]
fn grants_in_the_facts_do_not_open_a_conversation_one_is_not_part_of() {
    let agent = active(PrincipalKind::Agent);
    for place in [
        direct(&[new_id(), new_id()]),
        group(&[new_id(), new_id()]),
        task_place(new_id(), &[new_id()]),
    ] {
        for action in [Action::ConversationRead, Action::MessageCreate] {
            let resource = Resource::Conversation(place.clone());
            assert_eq!(
                authorize(&agent, action, &resource, &request(&[Level::Admin])),
                authorize(
                    &agent,
                    action,
                    &Resource::Missing(ResourceKind::Conversation),
                    &request(&[])
                ),
                "{action:?}: hidden equals missing"
            );
        }
    }
}

#[test]
fn only_agents_of_the_task_can_be_named_in_task_manage() {
    let app = active(PrincipalKind::App);
    let task = Resource::Task {
        app_id: id_of(&app),
        participants: Vec::new(),
    };
    let not_an_agent = named(Some(PrincipalKind::App), true, true);
    assert_eq!(
        authorize(&app, Action::TaskManage, &task, &naming(&[not_an_agent])),
        Decision::Deny(Denial {
            reason: Reason::NotTaskParticipant,
            answer: Answer::Forbidden,
            named: Some(not_an_agent.id),
        })
    );
}

#[test]
fn a_wrong_resource_kind_is_hidden_with_the_reason_of_the_actions_kind() {
    let agent = active(PrincipalKind::Agent);
    assert_eq!(
        authorize(
            &agent,
            Action::ConversationRead,
            &Resource::Missing(ResourceKind::Stream),
            &request(&[])
        ),
        hidden(),
        "no_grant, as for a conversation, not not_self"
    );
}
