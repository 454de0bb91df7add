//! The fixed order of the steps: each test gives a subject that fails two
//! steps and expects the earlier one's reason.

use super::*;

fn inactive(kind: PrincipalKind) -> Subject {
    Subject::Principal {
        id: new_id(),
        kind,
        active: false,
    }
}

#[test]
fn a_wrong_kind_on_a_missing_resource_is_refused_for_its_kind() {
    let missing = Resource::Missing(ResourceKind::Lease);
    let app = active(PrincipalKind::App);
    assert_eq!(
        authorize(&app, Action::DispatchComplete, &missing, &request(&[])),
        forbidden(Reason::SubjectKindNotAllowed)
    );
    let missing = Resource::Missing(ResourceKind::Conversation);
    assert_eq!(
        authorize(
            &Subject::Operator,
            Action::ConversationRead,
            &missing,
            &request(&[])
        ),
        forbidden(Reason::SubjectKindNotAllowed)
    );
}

#[test]
fn a_wrong_kind_is_refused_before_inactivity() {
    let app = inactive(PrincipalKind::App);
    assert_eq!(
        authorize(&app, Action::TypingSend, &Resource::Hub, &request(&[])),
        forbidden(Reason::SubjectKindNotAllowed)
    );
}

#[test]
fn an_inactive_principal_is_refused_before_no_grant() {
    let person = inactive(PrincipalKind::Person);
    let place = channel(ChannelState::Open);
    for resource in [
        Resource::Conversation(place.clone()),
        Resource::Missing(ResourceKind::Conversation),
    ] {
        assert_eq!(
            authorize(&person, Action::ConversationRead, &resource, &request(&[])),
            forbidden(Reason::PrincipalInactive)
        );
    }
    // Even with every right, an inactive principal gets nothing.
    assert_eq!(
        authorize(
            &person,
            Action::MessageCreate,
            &Resource::Conversation(place),
            &request(&[Level::Admin])
        ),
        forbidden(Reason::PrincipalInactive)
    );
}

#[test]
fn no_read_is_refused_before_the_level_and_the_channel_state() {
    let agent = active(PrincipalKind::Agent);
    let archived = Resource::Conversation(channel(ChannelState::Archived));
    assert_eq!(
        authorize(&agent, Action::MessageCreate, &archived, &request(&[])),
        hidden()
    );
}

#[test]
fn the_level_is_refused_before_the_channel_state() {
    let agent = active(PrincipalKind::Agent);
    let archived = Resource::Conversation(channel(ChannelState::Archived));
    assert_eq!(
        authorize(
            &agent,
            Action::MessageCreate,
            &archived,
            &request(&[Level::Read])
        ),
        forbidden(Reason::LevelInsufficient)
    );
}

#[test]
fn archived_refuses_a_write_that_holds_the_level() {
    let agent = active(PrincipalKind::Agent);
    let archived = Resource::Conversation(channel(ChannelState::Archived));
    assert_eq!(
        authorize(
            &agent,
            Action::MessageCreate,
            &archived,
            &request(&[Level::Write])
        ),
        forbidden(Reason::ChannelArchived)
    );
}

#[test]
fn no_read_is_refused_before_the_rule_on_named_principals() {
    let app = active(PrincipalKind::App);
    let task = Resource::Task {
        app_id: new_id(),
        participants: Vec::new(),
    };
    let outsider = named(Some(PrincipalKind::Agent), true, false);
    // Not the task's app: hidden, though the named agent breaks the rule too.
    assert_eq!(
        authorize(&app, Action::TaskManage, &task, &naming(&[outsider])),
        hidden()
    );
}

#[test]
fn the_rule_names_the_first_principal_that_breaks_it() {
    let agent = active(PrincipalKind::Agent);
    let fine = named(Some(PrincipalKind::Person), true, false);
    let gone = named(None, false, false);
    let app = named(Some(PrincipalKind::App), true, false);
    let ctx = naming(&[fine, gone, app]);
    assert_eq!(
        authorize(&agent, Action::ConversationCreate, &Resource::Hub, &ctx),
        Decision::Deny(Denial {
            reason: Reason::NoGrant,
            answer: Answer::NotFound,
            named: Some(gone.id),
        })
    );
}

#[test]
fn filter_mode_changes_no_decision() {
    let person = active(PrincipalKind::Person);
    let cases = [
        (Resource::Conversation(channel(ChannelState::Open)), vec![]),
        (
            Resource::Conversation(channel(ChannelState::Open)),
            vec![Level::Read],
        ),
        (
            Resource::Conversation(channel(ChannelState::ReadOnly)),
            vec![Level::Write],
        ),
        (
            Resource::Missing(ResourceKind::Conversation),
            vec![Level::Admin],
        ),
    ];
    for action in [
        Action::ChannelList,
        Action::ConversationRead,
        Action::MessageCreate,
    ] {
        for (resource, grants) in &cases {
            let req = request(grants);
            let filter = Context {
                mode: Mode::Filter,
                ..req.clone()
            };
            assert_eq!(
                authorize(&person, action, resource, &req),
                authorize(&person, action, resource, &filter)
            );
        }
    }
    assert!(Mode::Request.audits());
    assert!(!Mode::Filter.audits());
}
