//! What a link lends is decided inside the redemption's transaction, on
//! both backends (ADR 0031, 2026-12-02 third pass): a maker whose grant
//! (its own or its group's) was revoked, or whose `messages:write` was
//! withdrawn, after the handler's recheck lends nothing; a task room's
//! link needs the task app's installation active, whoever made the link,
//! and a maker that writes the room; and the joined event tells the room
//! as the join committed, not as the caller last read it.
//!
//! Each case changes the right between the handler's recheck and the
//! store call (the store is called directly, after the change), which is
//! exactly the window a racing change had before.

use switchboard::domain::authz::level::{GrantPlace, Holder};
use switchboard::domain::authz::Level;
use switchboard::domain::installation::{Actor, ScopeSet, Transition};
use switchboard::store::{DynStore, NewGroup, Redeemed};
use uuid::Uuid;

use super::store_invite_guards::suspend;
use super::store_invites::{
    bare_channel, grant_on, into_task, link, maker_in, on_channel, refused_on_channel,
};
use crate::store_contract::{agent_in, app_in, contract, postgres, sqlite};
use crate::store_installations::no_events;
use crate::store_reads::active_room;

fn joined(r: &Redeemed) -> bool {
    matches!(r, Redeemed::Joined(_))
}

async fn uses_left(store: &DynStore, invite: Uuid) -> i64 {
    store.invite(invite).await.unwrap().unwrap().uses_left
}

async fn a_makers_revoked_grant_lends_nothing(store: DynStore) {
    let maker = maker_in(&store).await;
    let (ch, space) = bare_channel(&store, maker).await;
    let own = grant_on(
        &store,
        Holder::Principal(maker),
        GrantPlace::Channel(ch),
        Level::Write,
    )
    .await;
    let row = link(ch, maker, 5, i64::MAX);
    store.create_invite(&row, 10).await.unwrap();
    let first = agent_in(&store, "first").await;
    let r = store
        .redeem_invite(&on_channel(&row, first, 3))
        .await
        .unwrap();
    assert!(joined(&r), "the maker writes the channel: {r:?}");

    // Revoked after the handler looked: the transaction reads the level.
    store.delete_grant(own, None, 4).await.unwrap();
    let who = agent_in(&store, "late").await;
    refused_on_channel(&store, &row, space, (who, 5), 4).await;

    // Only `read` left: no write to lend either.
    grant_on(
        &store,
        Holder::Principal(maker),
        GrantPlace::Channel(ch),
        Level::Read,
    )
    .await;
    let who = agent_in(&store, "later").await;
    refused_on_channel(&store, &row, space, (who, 6), 4).await;

    // Through a group: leaving the group is a revocation too.
    let group = Uuid::now_v7();
    store
        .create_group(&NewGroup {
            id: group,
            name: format!("g-{group}"),
            created_at: 1,
        })
        .await
        .unwrap();
    store.add_member(group, maker, 7).await.unwrap();
    grant_on(
        &store,
        Holder::Group(group),
        GrantPlace::Space(space),
        Level::Write,
    )
    .await;
    let late = agent_in(&store, "grouped").await;
    let r = store
        .redeem_invite(&on_channel(&row, late, 8))
        .await
        .unwrap();
    assert!(joined(&r), "its group's write lends: {r:?}");
    store.remove_member(group, maker).await.unwrap();
    let who = agent_in(&store, "last").await;
    refused_on_channel(&store, &row, space, (who, 9), 3).await;
}

async fn a_maker_without_messages_write_lends_nothing(store: DynStore) {
    let maker = maker_in(&store).await;
    let (ch, space) = bare_channel(&store, maker).await;
    grant_on(
        &store,
        Holder::Principal(maker),
        GrantPlace::Channel(ch),
        Level::Write,
    )
    .await;
    let row = link(ch, maker, 5, i64::MAX);
    store.create_invite(&row, 10).await.unwrap();
    store
        .set_scopes(maker, ScopeSet::default(), Actor::Operator, 4, &no_events)
        .await
        .unwrap();
    let who = agent_in(&store, "late").await;
    refused_on_channel(&store, &row, space, (who, 5), 5).await;
}

async fn a_task_link_needs_the_task_apps_installation_and_a_maker_in_the_room(store: DynStore) {
    let task_app = app_in(&store).await;
    let (a, b) = (agent_in(&store, "a").await, agent_in(&store, "b").await);
    let (task, room) = active_room(&store, task_app, a, b).await;
    // Another app that takes part in the room makes the link: its right
    // is the room's membership; the room's task is still the task app's.
    let member_app = app_in(&store).await;
    store
        .add_participants(room.id, &[member_app], &[], 3)
        .await
        .unwrap();
    let row = link(room.id, member_app, 5, i64::MAX);
    store.create_invite(&row, 10).await.unwrap();

    // The task app suspended: the task takes no new participant, whoever
    // made the link (its maker's installation is active).
    suspend(&store, task_app).await;
    let c = agent_in(&store, "c").await;
    let r = store
        .redeem_invite(&into_task(row.id, room.id, task.id, c, 10, 5))
        .await
        .unwrap();
    assert_eq!(r, Redeemed::NotValid);
    assert_eq!(uses_left(&store, row.id).await, 5, "no use spent");
    assert!(store.events_after(c, 0, 10).await.unwrap().is_empty());
    let t = store.task(task.id).await.unwrap().unwrap().task;
    assert!(!t.participants.iter().any(|p| p.agent_id == c));

    // Resumed, the same link lets c in.
    let i = store.installation(task_app).await.unwrap().unwrap();
    store
        .transition(i.id, Transition::Resume, Actor::Operator, 6, &no_events)
        .await
        .unwrap();
    let r = store
        .redeem_invite(&into_task(row.id, room.id, task.id, c, 10, 7))
        .await
        .unwrap();
    assert!(joined(&r), "{r:?}");

    // An app neither the task's nor in the room lends nothing.
    let stranger = app_in(&store).await;
    let theirs = link(room.id, stranger, 5, i64::MAX);
    store.create_invite(&theirs, 10).await.unwrap();
    let d = agent_in(&store, "d").await;
    let r = store
        .redeem_invite(&into_task(theirs.id, room.id, task.id, d, 10, 8))
        .await
        .unwrap();
    assert_eq!(r, Redeemed::NotValid);
    assert_eq!(uses_left(&store, theirs.id).await, 5);
}

async fn the_joined_event_tells_the_room_as_the_join_committed(store: DynStore) {
    let app = app_in(&store).await;
    let (a, b) = (agent_in(&store, "a").await, agent_in(&store, "b").await);
    let (task, room) = active_room(&store, app, a, b).await;
    let row = link(room.id, app, 5, i64::MAX);
    store.create_invite(&row, 10).await.unwrap();
    // The caller read the room with a and b; d joins before the
    // redemption commits.
    let read = store.conversation(room.id).await.unwrap().unwrap();
    assert_eq!(read.participants.len(), 2);
    let d = agent_in(&store, "d").await;
    store.add_participants(room.id, &[d], &[], 5).await.unwrap();
    let c = agent_in(&store, "c").await;
    let Redeemed::Joined(done) = store
        .redeem_invite(&into_task(row.id, room.id, task.id, c, 10, 6))
        .await
        .unwrap()
    else {
        panic!("joined")
    };
    let now = store.conversation(room.id).await.unwrap().unwrap();
    assert_eq!(done.room, now, "the answer is the room as committed");
    for who in [a, b, c, d] {
        assert!(now.participants.contains(&who));
    }
    let told = store.events_after(c, 0, 10).await.unwrap();
    assert_eq!(told.len(), 1);
    let payload = told[0].payload.to_value();
    let participants = &payload["conversation"]["participants"];
    assert_eq!(
        participants,
        &serde_json::json!(now.participants),
        "the event tells who is in the room with c: {payload}"
    );
}

contract!(
    a_makers_revoked_grant_lends_nothing,
    a_maker_without_messages_write_lends_nothing,
    a_task_link_needs_the_task_apps_installation_and_a_maker_in_the_room,
    the_joined_event_tells_the_room_as_the_join_committed
);
