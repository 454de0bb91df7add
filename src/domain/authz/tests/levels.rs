//! Effective levels: grants on a channel and its space, direct and through
//! a group, the highest of several, the app cap, and what membership
//! derives where there are no grants.

use super::*;
use crate::domain::authz::level::{
    self, derived, effective, fold, on_place, reaching_channel, reaching_space, Grant, GrantPlace,
    Holder, Holding,
};

struct World {
    me: Uuid,
    my_group: Uuid,
    other_group: Uuid,
    space: Uuid,
    channel: Uuid,
    other_channel: Uuid,
}

fn world() -> World {
    World {
        me: new_id(),
        my_group: new_id(),
        other_group: new_id(),
        space: new_id(),
        channel: new_id(),
        other_channel: new_id(),
    }
}

fn grant(holder: Holder, on: GrantPlace, level: Level) -> Grant {
    Grant { holder, on, level }
}

fn on_channel(w: &World, grants: &[Grant]) -> Vec<Level> {
    let groups = [w.my_group];
    let who = Holding {
        principal: w.me,
        groups: &groups,
    };
    reaching_channel(grants, who, w.channel, w.space)
}

#[test]
fn level_text_round_trips_and_orders() {
    for l in Level::ALL {
        assert_eq!(Level::parse(l.as_str()), Some(l));
    }
    assert_eq!(Level::parse("Admin"), None);
    assert_eq!(Level::parse("owner"), None);
    assert!(Level::Read < Level::Write);
    assert!(Level::Write < Level::Trigger);
    assert!(Level::Trigger < Level::Admin);
}

#[test]
fn a_channel_grant_and_a_space_grant_both_reach_the_channel() {
    let w = world();
    let me = Holder::Principal(w.me);
    let by_channel = [grant(me, GrantPlace::Channel(w.channel), Level::Write)];
    assert_eq!(on_channel(&w, &by_channel), vec![Level::Write]);
    let by_space = [grant(me, GrantPlace::Space(w.space), Level::Read)];
    assert_eq!(on_channel(&w, &by_space), vec![Level::Read]);
}

#[test]
fn a_group_grant_reaches_its_members_only() {
    let w = world();
    let grants = [
        grant(
            Holder::Group(w.my_group),
            GrantPlace::Space(w.space),
            Level::Write,
        ),
        grant(
            Holder::Group(w.other_group),
            GrantPlace::Channel(w.channel),
            Level::Admin,
        ),
    ];
    assert_eq!(on_channel(&w, &grants), vec![Level::Write]);
}

#[test]
fn grants_elsewhere_or_to_others_do_not_reach() {
    let w = world();
    let grants = [
        grant(
            Holder::Principal(w.me),
            GrantPlace::Channel(w.other_channel),
            Level::Admin,
        ),
        grant(
            Holder::Principal(w.me),
            GrantPlace::Space(new_id()),
            Level::Admin,
        ),
        grant(
            Holder::Principal(new_id()),
            GrantPlace::Channel(w.channel),
            Level::Admin,
        ),
    ];
    assert!(on_channel(&w, &grants).is_empty());
    assert_eq!(
        effective(PrincipalKind::Person, &on_channel(&w, &grants)),
        None
    );
}

#[test]
fn on_a_space_only_the_space_grants_count() {
    let w = world();
    let groups = [w.my_group];
    let who = Holding {
        principal: w.me,
        groups: &groups,
    };
    let grants = [
        grant(
            Holder::Principal(w.me),
            GrantPlace::Channel(w.channel),
            Level::Admin,
        ),
        grant(
            Holder::Group(w.my_group),
            GrantPlace::Space(w.space),
            Level::Read,
        ),
    ];
    assert_eq!(reaching_space(&grants, who, w.space), vec![Level::Read]);
}

#[test]
fn the_highest_of_several_grants_wins() {
    let w = world();
    let grants = [
        grant(
            Holder::Principal(w.me),
            GrantPlace::Space(w.space),
            Level::Read,
        ),
        grant(
            Holder::Group(w.my_group),
            GrantPlace::Channel(w.channel),
            Level::Trigger,
        ),
        grant(
            Holder::Principal(w.me),
            GrantPlace::Channel(w.channel),
            Level::Write,
        ),
    ];
    let levels = on_channel(&w, &grants);
    assert_eq!(levels.len(), 3);
    assert_eq!(
        effective(PrincipalKind::Agent, &levels),
        Some(Level::Trigger)
    );
    // A space's admin outranks a lower channel grant, and the reverse.
    assert_eq!(
        effective(PrincipalKind::Person, &[Level::Admin, Level::Read]),
        Some(Level::Admin)
    );
    assert_eq!(
        effective(PrincipalKind::Person, &[Level::Read, Level::Admin]),
        Some(Level::Admin)
    );
}

#[test]
fn apps_are_capped_at_write_and_others_are_not() {
    for l in Level::ALL {
        let capped = effective(PrincipalKind::App, &[l]).unwrap();
        assert_eq!(capped, l.min(Level::Write));
        assert_eq!(effective(PrincipalKind::Agent, &[l]), Some(l));
        assert_eq!(effective(PrincipalKind::Person, &[l]), Some(l));
    }
    assert_eq!(effective(PrincipalKind::App, &[]), None);
}

#[test]
fn fold_takes_each_principals_highest_capped_level() {
    let (person, app) = (new_id(), new_id());
    let map = fold([
        (person, PrincipalKind::Person, Level::Read),
        (app, PrincipalKind::App, Level::Admin),
        (person, PrincipalKind::Person, Level::Admin),
        (app, PrincipalKind::App, Level::Read),
    ]);
    assert_eq!(map.len(), 2);
    assert_eq!(map[&person], (PrincipalKind::Person, Level::Admin));
    assert_eq!(map[&app], (PrincipalKind::App, Level::Write));
}

#[test]
fn direct_and_group_participants_derive_write_and_nobody_else_anything() {
    let (a, b, c) = (new_id(), new_id(), new_id());
    for place in [direct(&[a, b]), group(&[a, b, c])] {
        assert_eq!(derived(&place, a), Some(level::DERIVED));
        assert_eq!(derived(&place, b), Some(Level::Write));
        assert_eq!(derived(&place, new_id()), None);
        // Grants never reach a conversation that is not a channel.
        assert_eq!(
            on_place(&place, new_id(), PrincipalKind::Person, &[Level::Admin]),
            None
        );
    }
}

#[test]
fn a_task_gives_write_to_its_participants_and_its_app_only() {
    let (app, agent, other_app) = (new_id(), new_id(), new_id());
    let place = task_place(app, &[agent]);
    assert_eq!(derived(&place, agent), Some(Level::Write));
    assert_eq!(derived(&place, app), Some(Level::Write));
    assert_eq!(derived(&place, other_app), None);
    assert_eq!(
        on_place(&place, other_app, PrincipalKind::App, &[Level::Write]),
        None
    );
}

#[test]
fn a_channel_derives_nothing_from_participants() {
    let mut place = channel(ChannelState::Open);
    let member = new_id();
    place.participants.push(member);
    assert_eq!(derived(&place, member), None);
    assert_eq!(on_place(&place, member, PrincipalKind::Agent, &[]), None);
    assert_eq!(
        on_place(&place, member, PrincipalKind::Agent, &[Level::Trigger]),
        Some(Level::Trigger)
    );
    assert_eq!(
        on_place(&place, member, PrincipalKind::App, &[Level::Trigger]),
        Some(Level::Write)
    );
}

#[test]
fn channel_state_text_round_trips() {
    for s in ChannelState::ALL {
        assert_eq!(ChannelState::parse(s.as_str()), Some(s));
    }
    assert_eq!(ChannelState::parse("readonly"), None);
}
