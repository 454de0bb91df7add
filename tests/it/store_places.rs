//! The place store (ADR 0020 §2, §5), on SQLite and a throwaway
//! PostgreSQL: spaces, groups, grants, channels, what a principal may list
//! and the levels grants give, directly and through groups.

use switchboard::domain::authz::level::{GrantPlace, Holder};
use switchboard::domain::authz::{ChannelState, Level};
use switchboard::domain::conversation::ConversationKind;
use switchboard::domain::PrincipalKind;
use switchboard::store::{
    ChannelRecord, DynStore, NewChannel, NewGrant, NewGroup, NewSpace, SpaceLevels, StoreError,
};
use uuid::Uuid;

use crate::store_contract::{contract, new_key, postgres, principal, sqlite, werewolf};

contract!(
    spaces_have_unique_names,
    group_members_are_idempotent_and_checked,
    granting_again_replaces_the_level,
    grants_name_existing_subjects_and_places,
    channels_are_named_once_per_space,
    channels_change_name_and_state,
    a_channel_loads_as_a_conversation,
    channels_are_listed_to_whom_grants_reach,
    levels_fold_direct_and_group_grants,
    a_disabled_principal_reaches_nothing,
    a_refused_write_leaves_the_next_writer_free,
);

const T: i64 = 1_700_000_000_000;

pub(crate) async fn someone(store: &DynStore, kind: PrincipalKind, name: &str) -> Uuid {
    let p = principal(kind, name);
    let (_, key) = new_key(kind);
    match kind {
        PrincipalKind::Person => store.create_person(&p, &key, None).await.unwrap(),
        PrincipalKind::Agent => store.create_agent(&p, &key, None).await.unwrap(),
        PrincipalKind::App => {
            store
                .create_app(&p, &werewolf(), &key, None, None)
                .await
                .unwrap();
        }
    }
    p.id
}

pub(crate) async fn space(store: &DynStore, name: &str) -> Uuid {
    let id = Uuid::now_v7();
    let s = NewSpace {
        id,
        name: name.into(),
        created_at: T,
    };
    store.create_space(&s).await.unwrap();
    id
}

pub(crate) async fn group(store: &DynStore, name: &str) -> Uuid {
    let id = Uuid::now_v7();
    let g = NewGroup {
        id,
        name: name.into(),
        created_at: T,
    };
    store.create_group(&g).await.unwrap();
    id
}

fn new_channel(space_id: Uuid, name: &str, by: Uuid) -> NewChannel {
    NewChannel {
        id: Uuid::now_v7(),
        space_id,
        name: name.into(),
        created_by: by,
        created_at: T + 1,
    }
}

pub(crate) async fn channel(
    store: &DynStore,
    space_id: Uuid,
    name: &str,
    by: Uuid,
) -> ChannelRecord {
    store
        .create_channel(&new_channel(space_id, name, by))
        .await
        .unwrap()
}

pub(crate) fn grant(subject: Holder, place: GrantPlace, level: Level) -> NewGrant {
    NewGrant {
        id: Uuid::now_v7(),
        subject,
        place,
        level,
        granted_by: None,
        created_at: T + 2,
    }
}

async fn put(store: &DynStore, subject: Holder, place: GrantPlace, level: Level) {
    store
        .put_grant(&grant(subject, place, level))
        .await
        .unwrap();
}

fn conflict<T: std::fmt::Debug>(result: Result<T, StoreError>, says: &str) {
    match result {
        Err(StoreError::Conflict(m)) => assert!(m.contains(says), "{m}"),
        other => panic!("expected a conflict saying {says:?}, got {other:?}"),
    }
}

fn not_found<T: std::fmt::Debug>(result: Result<T, StoreError>) {
    assert!(
        matches!(result, Err(StoreError::NotFound)),
        "expected NotFound, got {result:?}"
    );
}

async fn spaces_have_unique_names(store: DynStore) {
    let id = space(&store, "support").await;
    let got = store.space(id).await.unwrap().unwrap();
    assert_eq!(
        (got.id, got.name.as_str(), got.created_at),
        (id, "support", T)
    );
    let again = NewSpace {
        id: Uuid::now_v7(),
        name: "support".into(),
        created_at: T,
    };
    conflict(store.create_space(&again).await, "space of this name");
    assert!(store.space(again.id).await.unwrap().is_none());
    space(&store, "research").await;
}

async fn group_members_are_idempotent_and_checked(store: DynStore) {
    let g = group(&store, "researchers").await;
    let again = NewGroup {
        id: Uuid::now_v7(),
        name: "researchers".into(),
        created_at: T,
    };
    conflict(store.create_group(&again).await, "group of this name");
    let robin = someone(&store, PrincipalKind::Person, "Robin").await;
    let s = space(&store, "research").await;
    let notes = channel(&store, s, "notes", robin).await;
    put(&store, Holder::Group(g), GrantPlace::Space(s), Level::Write).await;
    store.add_member(g, robin, T).await.unwrap();
    store.add_member(g, robin, T + 5).await.unwrap();
    let levels = store.channel_levels(notes.id, s).await.unwrap();
    assert_eq!(levels.len(), 1);
    assert_eq!(levels[&robin], (PrincipalKind::Person, Level::Write));
    store.remove_member(g, robin).await.unwrap();
    store.remove_member(g, robin).await.unwrap();
    assert!(store.channel_levels(notes.id, s).await.unwrap().is_empty());
    for (grp, who) in [(Uuid::now_v7(), robin), (g, Uuid::now_v7())] {
        not_found(store.add_member(grp, who, T).await);
        not_found(store.remove_member(grp, who).await);
    }
}

async fn granting_again_replaces_the_level(store: DynStore) {
    let sam = someone(&store, PrincipalKind::Person, "Sam").await;
    let alex = someone(&store, PrincipalKind::Person, "Alex").await;
    let s = space(&store, "support").await;
    let first = store
        .put_grant(&grant(
            Holder::Principal(sam),
            GrantPlace::Space(s),
            Level::Read,
        ))
        .await
        .unwrap();
    assert_eq!(first.level, Level::Read);
    assert_eq!(first.granted_by, None);
    let mut again = grant(Holder::Principal(sam), GrantPlace::Space(s), Level::Admin);
    again.granted_by = Some(alex);
    let second = store.put_grant(&again).await.unwrap();
    assert_eq!(second.id, first.id, "the grant is replaced, not added");
    assert_eq!(
        (second.level, second.granted_by),
        (Level::Admin, Some(alex))
    );
    let listed = store.grants_of_place(GrantPlace::Space(s)).await.unwrap();
    assert_eq!(listed, vec![second.clone()]);
    assert_eq!(store.grant(first.id).await.unwrap(), Some(second));
    let levels = store.space_levels(sam, s).await.unwrap();
    assert_eq!(levels.space, Some(Level::Admin));
    store.delete_grant(first.id, None, 1).await.unwrap();
    not_found(store.delete_grant(first.id, None, 1).await);
    assert!(store.grant(first.id).await.unwrap().is_none());
    assert!(store
        .grants_of_place(GrantPlace::Space(s))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store.space_levels(sam, s).await.unwrap(),
        SpaceLevels::default()
    );
}

async fn grants_name_existing_subjects_and_places(store: DynStore) {
    let sam = someone(&store, PrincipalKind::Person, "Sam").await;
    let g = group(&store, "staff").await;
    let s = space(&store, "support").await;
    let general = channel(&store, s, "general", sam).await;
    let unknown = Uuid::now_v7();
    for (subject, place) in [
        (Holder::Principal(unknown), GrantPlace::Space(s)),
        (Holder::Group(unknown), GrantPlace::Space(s)),
        (Holder::Group(sam), GrantPlace::Space(s)),
        (Holder::Principal(g), GrantPlace::Channel(general.id)),
        (Holder::Principal(sam), GrantPlace::Space(unknown)),
        (Holder::Principal(sam), GrantPlace::Channel(unknown)),
        (Holder::Principal(sam), GrantPlace::Space(general.id)),
        (Holder::Principal(sam), GrantPlace::Channel(s)),
    ] {
        not_found(store.put_grant(&grant(subject, place, Level::Read)).await);
    }
    assert!(store
        .grants_of_place(GrantPlace::Space(s))
        .await
        .unwrap()
        .is_empty());
    for (subject, place) in [
        (Holder::Principal(sam), GrantPlace::Channel(general.id)),
        (Holder::Group(g), GrantPlace::Channel(general.id)),
    ] {
        put(&store, subject, place, Level::Write).await;
    }
    let on_channel = store
        .grants_of_place(GrantPlace::Channel(general.id))
        .await
        .unwrap();
    let subjects: Vec<Holder> = on_channel.iter().map(|g| g.subject).collect();
    assert_eq!(subjects, vec![Holder::Principal(sam), Holder::Group(g)]);
}

async fn channels_are_named_once_per_space(store: DynStore) {
    let alex = someone(&store, PrincipalKind::Person, "Alex").await;
    let support = space(&store, "support").await;
    let research = space(&store, "research").await;
    let general = channel(&store, support, "general", alex).await;
    assert_eq!(general.space_id, support);
    assert_eq!(general.name, "general");
    assert_eq!(general.state, ChannelState::Open);
    assert_eq!((general.created_by, general.created_at), (alex, T + 1));
    assert_eq!(general.last_message_seq, 0);
    assert_eq!(
        store.channel(general.id).await.unwrap(),
        Some(general.clone())
    );
    let twin = new_channel(support, "general", alex);
    conflict(store.create_channel(&twin).await, "channel of this name");
    assert!(store.channel(twin.id).await.unwrap().is_none());
    channel(&store, research, "general", alex).await;
    not_found(
        store
            .create_channel(&new_channel(Uuid::now_v7(), "general", alex))
            .await,
    );
}

/// A transaction refused half-way (here by the unique name, after SQLite
/// took the file's write lock) is rolled back before the next writer
/// begins: each write right after a refusal lands, where a rollback merely
/// queued on the driver left it `database is locked` now and then.
async fn a_refused_write_leaves_the_next_writer_free(store: DynStore) {
    let alex = someone(&store, PrincipalKind::Person, "Alex").await;
    let support = space(&store, "support").await;
    channel(&store, support, "general", alex).await;
    for i in 0..1000 {
        let twin = new_channel(support, "general", alex);
        conflict(store.create_channel(&twin).await, "channel of this name");
        let next = new_channel(support, &format!("room-{i}"), alex);
        store
            .create_channel(&next)
            .await
            .unwrap_or_else(|e| panic!("write {i} after a refusal: {e}"));
    }
}

/// A channel is a `conversations` row of kind `channel`: it reads back as
/// a conversation with its space and state, and without participants.
async fn a_channel_loads_as_a_conversation(store: DynStore) {
    let alex = someone(&store, PrincipalKind::Person, "Alex").await;
    let support = space(&store, "support").await;
    let general = channel(&store, support, "general", alex).await;
    let c = store.conversation(general.id).await.unwrap().unwrap();
    assert_eq!(c.kind, ConversationKind::Channel);
    assert_eq!(c.name.as_deref(), Some("general"));
    assert_eq!(
        (c.space_id, c.state),
        (Some(support), Some(ChannelState::Open))
    );
    assert!(c.participants.is_empty());
    store
        .set_channel(general.id, None, Some(ChannelState::ReadOnly))
        .await
        .unwrap();
    let c = store.conversation(general.id).await.unwrap().unwrap();
    assert_eq!(c.state, Some(ChannelState::ReadOnly));
    assert_eq!(
        serde_json::to_value(&c).unwrap()["state"],
        serde_json::json!("read_only")
    );
}

async fn channels_change_name_and_state(store: DynStore) {
    let alex = someone(&store, PrincipalKind::Person, "Alex").await;
    let support = space(&store, "support").await;
    let general = channel(&store, support, "general", alex).await;
    channel(&store, support, "escalation", alex).await;
    let renamed = store
        .set_channel(general.id, Some("lobby"), None)
        .await
        .unwrap();
    assert_eq!(
        (renamed.name.as_str(), renamed.state),
        ("lobby", ChannelState::Open)
    );
    let archived = store
        .set_channel(general.id, None, Some(ChannelState::Archived))
        .await
        .unwrap();
    assert_eq!(
        (archived.name.as_str(), archived.state),
        ("lobby", ChannelState::Archived)
    );
    let both = store
        .set_channel(general.id, Some("front"), Some(ChannelState::ReadOnly))
        .await
        .unwrap();
    assert_eq!(
        (both.name.as_str(), both.state),
        ("front", ChannelState::ReadOnly)
    );
    assert_eq!(store.channel(general.id).await.unwrap(), Some(both.clone()));
    conflict(
        store
            .set_channel(general.id, Some("escalation"), None)
            .await,
        "channel of this name",
    );
    assert_eq!(store.channel(general.id).await.unwrap(), Some(both));
    not_found(store.set_channel(Uuid::now_v7(), Some("x"), None).await);
}

async fn channels_are_listed_to_whom_grants_reach(store: DynStore) {
    let alex = someone(&store, PrincipalKind::Person, "Alex").await;
    let robin = someone(&store, PrincipalKind::Person, "Robin").await;
    let bot = someone(&store, PrincipalKind::Agent, "bot").await;
    let support = space(&store, "support").await;
    let research = space(&store, "research").await;
    let marketing = space(&store, "marketing").await;
    let general = channel(&store, support, "general", alex).await;
    let escalation = channel(&store, support, "escalation", alex).await;
    let notes = channel(&store, research, "notes", alex).await;
    let campaigns = channel(&store, marketing, "campaigns", alex).await;
    put(
        &store,
        Holder::Principal(alex),
        GrantPlace::Space(support),
        Level::Admin,
    )
    .await;
    let researchers = group(&store, "researchers").await;
    store.add_member(researchers, robin, T).await.unwrap();
    put(
        &store,
        Holder::Group(researchers),
        GrantPlace::Space(research),
        Level::Write,
    )
    .await;
    put(
        &store,
        Holder::Principal(robin),
        GrantPlace::Channel(general.id),
        Level::Read,
    )
    .await;
    let ids = |list: Vec<ChannelRecord>| list.into_iter().map(|c| c.id).collect::<Vec<_>>();
    let sorted = |mut v: Vec<Uuid>| {
        v.sort();
        v
    };
    let alex_sees = ids(store
        .channels_visible_to(alex, None, None, 10)
        .await
        .unwrap());
    assert_eq!(alex_sees, sorted(vec![general.id, escalation.id]));
    let robin_sees = ids(store
        .channels_visible_to(robin, None, None, 10)
        .await
        .unwrap());
    assert_eq!(robin_sees, sorted(vec![general.id, notes.id]));
    let in_research = store
        .channels_visible_to(robin, Some(research), None, 10)
        .await
        .unwrap();
    assert_eq!(in_research, vec![notes.clone()]);
    assert!(store
        .channels_visible_to(bot, None, None, 10)
        .await
        .unwrap()
        .is_empty());
    let first = ids(store
        .channels_visible_to(alex, None, None, 1)
        .await
        .unwrap());
    assert_eq!(first, alex_sees[..1]);
    let rest = ids(store
        .channels_visible_to(alex, None, Some(first[0]), 10)
        .await
        .unwrap());
    assert_eq!(rest, alex_sees[1..]);
    assert!(!alex_sees.contains(&campaigns.id));
}

async fn levels_fold_direct_and_group_grants(store: DynStore) {
    let alex = someone(&store, PrincipalKind::Person, "Alex").await;
    let sam = someone(&store, PrincipalKind::Person, "Sam").await;
    let bot = someone(&store, PrincipalKind::Agent, "bot").await;
    let app = someone(&store, PrincipalKind::App, "Werewolf").await;
    let support = space(&store, "support").await;
    let general = channel(&store, support, "general", alex).await;
    let escalation = channel(&store, support, "escalation", alex).await;
    let staff = group(&store, "staff").await;
    for member in [bot, app] {
        store.add_member(staff, member, T).await.unwrap();
    }
    put(
        &store,
        Holder::Principal(sam),
        GrantPlace::Space(support),
        Level::Read,
    )
    .await;
    put(
        &store,
        Holder::Principal(sam),
        GrantPlace::Channel(general.id),
        Level::Write,
    )
    .await;
    put(
        &store,
        Holder::Group(staff),
        GrantPlace::Channel(general.id),
        Level::Admin,
    )
    .await;
    put(
        &store,
        Holder::Principal(alex),
        GrantPlace::Channel(escalation.id),
        Level::Trigger,
    )
    .await;
    let levels = store.channel_levels(general.id, support).await.unwrap();
    assert_eq!(levels.len(), 3, "{levels:?}");
    assert_eq!(
        levels[&sam],
        (PrincipalKind::Person, Level::Write),
        "channel above space"
    );
    assert_eq!(levels[&bot], (PrincipalKind::Agent, Level::Admin));
    assert_eq!(
        levels[&app],
        (PrincipalKind::App, Level::Write),
        "apps are capped"
    );
    let on_escalation = store.channel_levels(escalation.id, support).await.unwrap();
    assert_eq!(on_escalation.len(), 2);
    assert_eq!(
        on_escalation[&sam].1,
        Level::Read,
        "the space's grant reaches"
    );
    assert_eq!(on_escalation[&alex].1, Level::Trigger);
    let expected = [
        (sam, Some(Level::Read), Some(Level::Write)),
        (alex, None, Some(Level::Trigger)),
        (bot, None, Some(Level::Admin)),
        (app, None, Some(Level::Write)),
    ];
    for (who, space, channels) in expected {
        let got = store.space_levels(who, support).await.unwrap();
        assert_eq!(got, SpaceLevels { space, channels }, "{who}");
    }
    let elsewhere = space(&store, "marketing").await;
    assert_eq!(
        store.space_levels(sam, elsewhere).await.unwrap(),
        SpaceLevels::default()
    );
}

async fn a_disabled_principal_reaches_nothing(store: DynStore) {
    let alex = someone(&store, PrincipalKind::Person, "Alex").await;
    let sam = someone(&store, PrincipalKind::Person, "Sam").await;
    let support = space(&store, "support").await;
    let general = channel(&store, support, "general", alex).await;
    let staff = group(&store, "staff").await;
    store.add_member(staff, sam, T).await.unwrap();
    put(
        &store,
        Holder::Principal(sam),
        GrantPlace::Space(support),
        Level::Admin,
    )
    .await;
    put(
        &store,
        Holder::Group(staff),
        GrantPlace::Channel(general.id),
        Level::Write,
    )
    .await;
    put(
        &store,
        Holder::Principal(alex),
        GrantPlace::Space(support),
        Level::Read,
    )
    .await;
    assert_eq!(
        store
            .channels_visible_to(sam, None, None, 10)
            .await
            .unwrap()
            .len(),
        1
    );
    store.disable_person(sam, T + 10).await.unwrap();
    assert!(store
        .channels_visible_to(sam, None, None, 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store.space_levels(sam, support).await.unwrap(),
        SpaceLevels::default()
    );
    let levels = store.channel_levels(general.id, support).await.unwrap();
    assert_eq!(levels.keys().copied().collect::<Vec<_>>(), vec![alex]);
    assert_eq!(
        store
            .channels_visible_to(alex, None, None, 10)
            .await
            .unwrap()
            .len(),
        1
    );
    // A disabled principal is answered like a missing one: no new grant,
    // no new membership; it can still be taken out of a group.
    let grant = NewGrant {
        id: Uuid::now_v7(),
        subject: Holder::Principal(sam),
        place: GrantPlace::Space(support),
        level: Level::Admin,
        granted_by: None,
        created_at: T + 11,
    };
    assert!(matches!(
        store.put_grant(&grant).await,
        Err(StoreError::NotFound)
    ));
    let team = Uuid::now_v7();
    store
        .create_group(&NewGroup {
            id: team,
            name: "after-disable".into(),
            created_at: T + 12,
        })
        .await
        .unwrap();
    assert!(matches!(
        store.add_member(team, sam, T + 13).await,
        Err(StoreError::NotFound)
    ));
    store.remove_member(team, sam).await.unwrap();
}
