//! The place targets (spaces, grants) on the same fake as the other
//! loaders: hidden costs and reads what missing does, cold and warm.

use super::*;

/// A space, a channel in it and a grant on each, none of them the
/// caller's: a person's `grant.manage` and `space.read` on them cost the
/// statements a random id's do, with the channel's membership cached or
/// not, read the same things cold, and get the same denial.
#[tokio::test]
async fn a_hidden_place_or_grant_costs_the_statements_of_a_missing_one() {
    use crate::domain::authz::level::{GrantPlace, Holder};
    let mut w = world();
    let (space, channel, owner) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let (on_space, on_channel) = (Uuid::new_v4(), Uuid::new_v4());
    w.fake.spaces.insert(
        space,
        crate::store::SpaceRecord {
            id: space,
            name: "s".into(),
            created_at: 0,
        },
    );
    w.fake.memberships.insert(
        channel,
        Arc::new(Membership {
            id: channel,
            kind: ConversationKind::Channel,
            task_id: None,
            participants: vec![],
            people: Vec::new(),
            disabled: Vec::new(),
            name: Some("general".into()),
            key: None,
            created_by: owner,
            created_at: String::new(),
            channel: Some(ChannelPlace {
                space_id: space,
                state: crate::domain::authz::ChannelState::Open,
                levels: [(owner, (PrincipalKind::Person, Level::Admin))]
                    .into_iter()
                    .collect(),
            }),
        }),
    );
    let grant = |id, place| crate::store::GrantRecord {
        id,
        subject: Holder::Principal(owner),
        place,
        level: Level::Admin,
        granted_by: None,
        created_at: 0,
    };
    w.fake
        .grants
        .insert(on_space, grant(on_space, GrantPlace::Space(space)));
    w.fake
        .grants
        .insert(on_channel, grant(on_channel, GrantPlace::Channel(channel)));
    let person = Subject::Principal {
        id: w.me,
        kind: PrincipalKind::Person,
        active: true,
    };
    let random = Uuid::new_v4();
    let cases = [
        (
            Action::GrantManage,
            Target::grant(on_space),
            Target::grant(random),
        ),
        (
            Action::GrantManage,
            Target::grant(on_channel),
            Target::grant(random),
        ),
        (
            Action::SpaceRead,
            Target::space(space),
            Target::space(random),
        ),
        (
            Action::GrantManage,
            Target::grants_on_space(space),
            Target::grants_on_space(random),
        ),
        (
            Action::GrantManage,
            Target::grants_on_channel(channel),
            Target::grants_on_channel(random),
        ),
    ];
    for (action, hidden, missing) in cases {
        for cache in [vec![], vec![channel]] {
            let mut seen = Vec::new();
            for target in [&hidden, &missing] {
                *w.fake.cached.lock().unwrap() = cache.iter().copied().collect();
                w.fake.take();
                w.fake.take_statements();
                let outcome = crate::access::decide_with(&w.fake, w.me, &person, action, target)
                    .await
                    .unwrap();
                let crate::access::Outcome::Denied(denial) = outcome else {
                    panic!("{action} on {target:?}: granted");
                };
                seen.push((denial, w.fake.take(), w.fake.take_statements()));
            }
            assert!(seen[1].2 > 0, "{action}: no statement");
            let what = format!("{action} on {hidden:?}, cached {cache:?}");
            assert_eq!((seen[0].0, seen[0].2), (seen[1].0, seen[1].2), "{what}");
            // A cache hit is a read of no statement, answered again on the
            // store: only the cold reads are the same list.
            if cache.is_empty() {
                assert_eq!(seen[0].1, seen[1].1, "{what}");
            }
        }
    }
}
