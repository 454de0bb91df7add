//! Channel states bind every principal: read-only refuses writes below
//! admin, archived refuses every write, and management works in each.

use super::*;

const WRITES: [Action; 2] = [Action::MessageCreate, Action::TypingSend];

fn kinds_for(action: Action) -> Vec<PrincipalKind> {
    [
        PrincipalKind::Agent,
        PrincipalKind::Person,
        PrincipalKind::App,
    ]
    .into_iter()
    .filter(|k| action.requirement().subjects.admits_principal(*k))
    .collect()
}

fn decide(kind: PrincipalKind, action: Action, state: ChannelState, level: Level) -> Decision {
    let resource = Resource::Conversation(channel(state));
    authorize(&active(kind), action, &resource, &request(&[level]))
}

/// The two content actions on conversations, and the command triggers
/// (ADR 0027 §3, step 5; decided on commands in `tests/commands.rs`).
#[test]
fn only_the_two_content_actions_and_the_triggers_write() {
    let writing: Vec<Action> = Action::ALL
        .into_iter()
        .filter(|a| a.requirement().writes)
        .collect();
    let triggers = [Action::CommandInvoke, Action::CommandAutocomplete];
    assert_eq!(writing, [WRITES.as_slice(), triggers.as_slice()].concat());
}

#[test]
fn an_open_channel_lets_write_and_above_write() {
    for action in WRITES {
        for kind in kinds_for(action) {
            for level in [Level::Write, Level::Trigger, Level::Admin] {
                assert_eq!(
                    decide(kind, action, ChannelState::Open, level),
                    Decision::Allow
                );
            }
        }
    }
}

#[test]
fn read_only_refuses_writes_below_admin() {
    for action in WRITES {
        for kind in kinds_for(action) {
            for level in [Level::Write, Level::Trigger] {
                assert_eq!(
                    decide(kind, action, ChannelState::ReadOnly, level),
                    forbidden(Reason::ChannelReadOnly),
                    "{action} by {kind} at {level}"
                );
            }
        }
    }
    for kind in [PrincipalKind::Agent, PrincipalKind::Person] {
        assert_eq!(
            decide(
                kind,
                Action::MessageCreate,
                ChannelState::ReadOnly,
                Level::Admin
            ),
            Decision::Allow
        );
    }
}

#[test]
fn an_app_never_writes_in_a_read_only_channel() {
    // Its admin grant is capped at write, so read-only refuses it.
    assert_eq!(
        decide(
            PrincipalKind::App,
            Action::MessageCreate,
            ChannelState::ReadOnly,
            Level::Admin
        ),
        forbidden(Reason::ChannelReadOnly)
    );
}

#[test]
fn archived_refuses_every_write_even_an_admins() {
    for action in WRITES {
        for kind in kinds_for(action) {
            for level in [Level::Write, Level::Admin] {
                assert_eq!(
                    decide(kind, action, ChannelState::Archived, level),
                    forbidden(Reason::ChannelArchived)
                );
            }
        }
    }
}

#[test]
fn reading_works_in_every_state() {
    for state in ChannelState::ALL {
        for action in [Action::ConversationRead, Action::ChannelList] {
            assert_eq!(
                decide(PrincipalKind::Person, action, state, Level::Read),
                Decision::Allow
            );
        }
    }
}

#[test]
fn channel_manage_works_in_every_state() {
    for state in ChannelState::ALL {
        let resource = Resource::Conversation(channel(state));
        assert_eq!(
            authorize(
                &active(PrincipalKind::Person),
                Action::ChannelManage,
                &resource,
                &request(&[Level::Admin])
            ),
            Decision::Allow
        );
        assert_eq!(
            authorize(
                &Subject::Operator,
                Action::ChannelManage,
                &resource,
                &request(&[])
            ),
            Decision::Allow
        );
    }
}

#[test]
fn other_conversations_have_no_state() {
    let agent = active(PrincipalKind::Agent);
    let place = direct(&[id_of(&agent), new_id()]);
    assert_eq!(place.channel_state(), None);
    assert_eq!(
        authorize(
            &agent,
            Action::MessageCreate,
            &Resource::Conversation(place),
            &request(&[])
        ),
        Decision::Allow
    );
}
