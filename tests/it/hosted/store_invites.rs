//! Invite links in the store, on both backends (ADR 0031 §6): the link
//! kept by its hash, one use spent per redemption with the join in the
//! same transaction, nothing written by a redemption that finds no use
//! left or the link expired, two redemptions racing for the last use with
//! one winner, and a channel join that raises `read` to `write` but never
//! lowers a higher grant.
//!
//! A link lends its maker's right, which the redemption decides in its own
//! transaction (ADR 0031, 2026-12-02 third pass), so a channel's maker here
//! is an app with `messages:write` and `write` on the channel's space.

use switchboard::domain::authz::level::{GrantPlace, Holder};
use switchboard::domain::authz::Level;
use switchboard::domain::event::NewEvent;
use switchboard::domain::hosted::invite;
use switchboard::domain::PrincipalKind;
use switchboard::store::{
    DynStore, InviteJoin, InviteRecord, InviteRedemption, JoinedEvents, NewChannel, NewGrant,
    NewSpace, Redeemed,
};
use uuid::Uuid;

use crate::store_contract::{agent_in, app_in, contract, new_key, postgres, principal, sqlite};
use crate::store_reads::active_room;

pub(super) fn link(room: Uuid, by: Uuid, uses: i64, expires_at: i64) -> InviteRecord {
    InviteRecord {
        id: Uuid::now_v7(),
        secret_hash: invite::hash(&[9u8; 32]),
        conversation_id: room,
        created_by: by,
        uses_left: uses,
        expires_at,
        created_at: 1,
    }
}

/// An installed app with `messages:write`: one that may write a channel
/// it holds `write` on, so its links to it lend that.
pub(super) async fn maker_in(store: &DynStore) -> Uuid {
    let mut m = crate::support::werewolf_manifest();
    m["scopes"] = serde_json::json!(["messages:write", "events:subscribe"]);
    let bounds = switchboard::config::Config::default().manifest_bounds();
    let m = switchboard::domain::manifest::validate(&m, &bounds).unwrap();
    let app = principal(PrincipalKind::App, "maker");
    let (_, key) = new_key(PrincipalKind::App);
    let install = switchboard::store::RegistrationInstall::new(
        app.id,
        &m,
        switchboard::domain::installation::Actor::Operator,
        1,
    );
    store
        .create_app(&app, &m, &key, Some(&install), None)
        .await
        .unwrap();
    app.id
}

/// `level` for `who` on `place`, by the operator: the grant's id.
pub(super) async fn grant_on(
    store: &DynStore,
    who: Holder,
    place: GrantPlace,
    level: Level,
) -> Uuid {
    store
        .put_grant(&NewGrant {
            id: Uuid::now_v7(),
            subject: who,
            place,
            level,
            granted_by: None,
            created_at: 1,
        })
        .await
        .unwrap()
        .id
}

/// A new channel in a new space, `by` holding `write` on the space (so
/// not on the channel itself: a maker redeeming its own link still gets
/// a grant of its own).
pub(super) async fn channel(store: &DynStore, by: Uuid) -> (Uuid, Uuid) {
    let (ch, space) = bare_channel(store, by).await;
    grant_on(
        store,
        Holder::Principal(by),
        GrantPlace::Space(space),
        Level::Write,
    )
    .await;
    (ch, space)
}

/// A new channel in a new space, with no grant.
pub(super) async fn bare_channel(store: &DynStore, by: Uuid) -> (Uuid, Uuid) {
    let space = Uuid::now_v7();
    store
        .create_space(&NewSpace {
            id: space,
            name: format!("s-{space}"),
            created_at: 1,
        })
        .await
        .unwrap();
    let c = NewChannel {
        id: Uuid::now_v7(),
        space_id: space,
        name: "general".into(),
        created_by: by,
        created_at: 2,
    };
    (store.create_channel(&c).await.unwrap().id, space)
}

/// A redemption into a task room by `agent`, whose joined event is one
/// `agent/conversation/joined` telling the room as the transaction left it.
pub(super) fn into_task(
    invite: Uuid,
    room: Uuid,
    task: Uuid,
    agent: Uuid,
    max: u32,
    now: i64,
) -> InviteRedemption {
    InviteRedemption {
        invite,
        conversation_id: room,
        join: InviteJoin::Task {
            task_id: task,
            agent,
            max_participants: max,
            joined: JoinedEvents::new(move |room| {
                let body = serde_json::json!({ "conversation": room });
                vec![NewEvent::new(agent, "agent/conversation/joined", body)]
            }),
        },
        now,
    }
}

pub(super) fn on_channel(invite: &InviteRecord, who: Uuid, now: i64) -> InviteRedemption {
    InviteRedemption {
        invite: invite.id,
        conversation_id: invite.conversation_id,
        join: InviteJoin::Channel {
            principal: who,
            granted_by: invite.created_by,
        },
        now,
    }
}

/// `who` redeems the channel link `row` at `now`: refused, given no level
/// on the channel, and no use spent (`uses` still left).
pub(super) async fn refused_on_channel(
    store: &DynStore,
    row: &InviteRecord,
    space: Uuid,
    (who, now): (Uuid, i64),
    uses: i64,
) {
    let r = store
        .redeem_invite(&on_channel(row, who, now))
        .await
        .unwrap();
    assert_eq!(r, Redeemed::NotValid);
    assert_eq!(
        level(store, row.conversation_id, space, who).await,
        None,
        "nothing written"
    );
    let left = store.invite(row.id).await.unwrap().unwrap().uses_left;
    assert_eq!(left, uses, "no use spent");
}

pub(super) async fn level(
    store: &DynStore,
    channel: Uuid,
    space: Uuid,
    who: Uuid,
) -> Option<Level> {
    store
        .channel_levels(channel, space)
        .await
        .unwrap()
        .get(&who)
        .map(|(_, l)| *l)
}

async fn a_task_invite_spends_a_use_and_joins_task_and_room(store: DynStore) {
    let app = app_in(&store).await;
    let (a, b, c) = (
        agent_in(&store, "a").await,
        agent_in(&store, "b").await,
        agent_in(&store, "c").await,
    );
    let (task, room) = active_room(&store, app, a, b).await;
    let row = link(room.id, app, 2, 1_000);
    store.create_invite(&row, 100).await.unwrap();
    assert_eq!(store.invite(row.id).await.unwrap(), Some(row.clone()));
    assert_eq!(store.invite(Uuid::now_v7()).await.unwrap(), None);
    let joined = |now| into_task(row.id, room.id, task.id, c, 10, now);
    let Redeemed::Joined(done) = store.redeem_invite(&joined(10)).await.unwrap() else {
        panic!("joined")
    };
    assert_eq!(done.events.len(), 1);
    assert_eq!(done.events[0].audience, c);
    assert!(
        done.room.participants.contains(&c),
        "the room as it committed"
    );
    assert_eq!(store.invite(row.id).await.unwrap().unwrap().uses_left, 1);
    let conversation = store.conversation(room.id).await.unwrap().unwrap();
    assert!(conversation.participants.contains(&c));
    let t = store.task(task.id).await.unwrap().unwrap().task;
    assert!(t.participants.iter().any(|p| p.agent_id == c));
    assert_eq!(store.events_after(c, 0, 10).await.unwrap().len(), 1);
    // A member already spends nothing and writes nothing.
    let again = store.redeem_invite(&joined(11)).await.unwrap();
    assert_eq!(again, Redeemed::Member);
    assert_eq!(store.invite(row.id).await.unwrap().unwrap().uses_left, 1);
    assert_eq!(store.events_after(c, 0, 10).await.unwrap().len(), 1);
    // Past its expiry the use is not spent and nothing is written.
    let d = agent_in(&store, "d").await;
    let for_d = |now| into_task(row.id, room.id, task.id, d, 10, now);
    assert_eq!(
        store.redeem_invite(&for_d(1_000)).await.unwrap(),
        Redeemed::NotValid
    );
    assert_eq!(store.invite(row.id).await.unwrap().unwrap().uses_left, 1);
    assert!(store.events_after(d, 0, 10).await.unwrap().is_empty());
    // A link names its room: spending it on another is no use.
    let mut elsewhere = for_d(20);
    elsewhere.conversation_id = Uuid::now_v7();
    assert_eq!(
        store.redeem_invite(&elsewhere).await.unwrap(),
        Redeemed::NotValid
    );
    assert!(matches!(
        store.redeem_invite(&for_d(20)).await.unwrap(),
        Redeemed::Joined(_)
    ));
    let e = agent_in(&store, "e").await;
    let for_e = into_task(row.id, room.id, task.id, e, 10, 30);
    assert_eq!(
        store.redeem_invite(&for_e).await.unwrap(),
        Redeemed::NotValid,
        "used up"
    );
    assert_eq!(store.invite(row.id).await.unwrap().unwrap().uses_left, 0);
}

async fn two_redemptions_race_for_the_last_use_and_one_wins(store: DynStore) {
    let app = maker_in(&store).await;
    let (ch, space) = channel(&store, app).await;
    for round in 0..5 {
        let row = link(ch, app, 1, i64::MAX);
        store.create_invite(&row, 100).await.unwrap();
        let (x, y) = (
            agent_in(&store, &format!("x{round}")).await,
            agent_in(&store, &format!("y{round}")).await,
        );
        let (s1, s2) = (store.clone(), store.clone());
        let (r1, r2) = (on_channel(&row, x, 5), on_channel(&row, y, 5));
        let (a, b) = tokio::join!(
            tokio::spawn(async move { s1.redeem_invite(&r1).await.unwrap() }),
            tokio::spawn(async move { s2.redeem_invite(&r2).await.unwrap() }),
        );
        let joined = |r: Redeemed| matches!(r, Redeemed::Joined(_));
        let (a, b) = (joined(a.unwrap()), joined(b.unwrap()));
        assert!(a ^ b, "round {round}: exactly one wins ({a}, {b})");
        let winner = if a { x } else { y };
        let loser = if a { y } else { x };
        assert_eq!(level(&store, ch, space, winner).await, Some(Level::Write));
        assert_eq!(
            level(&store, ch, space, loser).await,
            None,
            "the loser writes nothing"
        );
        assert_eq!(store.invite(row.id).await.unwrap().unwrap().uses_left, 0);
    }
}

async fn a_channel_join_raises_read_and_keeps_admin(store: DynStore) {
    let app = maker_in(&store).await;
    let (ch, space) = channel(&store, app).await;
    let (reader, admin) = (agent_in(&store, "r").await, agent_in(&store, "ad").await);
    for (who, lvl) in [(reader, Level::Read), (admin, Level::Admin)] {
        store
            .put_grant(&NewGrant {
                id: Uuid::now_v7(),
                subject: Holder::Principal(who),
                place: GrantPlace::Channel(ch),
                level: lvl,
                granted_by: None,
                created_at: 1,
            })
            .await
            .unwrap();
    }
    let before = store.rights_version().await.unwrap();
    let row = link(ch, app, 5, i64::MAX);
    store.create_invite(&row, 100).await.unwrap();
    assert!(matches!(
        store
            .redeem_invite(&on_channel(&row, reader, 3))
            .await
            .unwrap(),
        Redeemed::Joined(_)
    ));
    assert_eq!(
        store
            .redeem_invite(&on_channel(&row, admin, 3))
            .await
            .unwrap(),
        Redeemed::Member,
        "an admin writes already: no use spent"
    );
    assert_eq!(store.invite(row.id).await.unwrap().unwrap().uses_left, 4);
    assert_eq!(level(&store, ch, space, reader).await, Some(Level::Write));
    assert_eq!(level(&store, ch, space, admin).await, Some(Level::Admin));
    assert!(
        store.rights_version().await.unwrap() > before,
        "a change of rights other processes learn of"
    );
}

contract!(
    a_task_invite_spends_a_use_and_joins_task_and_room,
    two_redemptions_race_for_the_last_use_and_one_wins,
    a_channel_join_raises_read_and_keeps_admin
);
