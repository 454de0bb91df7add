//! A redemption's safeguards in the store, on both backends (issue 18's
//! review, ADR 0031 2026-12-02): `put_grant`'s checks on a channel join
//! (the maker's installation active, the redeemer an active principal, a
//! redeemer app's grant audited), the task's participant limit and state
//! read inside the joining transaction, one redeemer racing itself spending
//! one use, many redeemers never spending past `max_uses`, the live-link
//! cap of `invite_create` and the pruning of dead links.

use switchboard::domain::authz::ChannelState;
use switchboard::domain::installation::{Actor, LifecycleAction, Transition};
use switchboard::domain::task::TaskState;
use switchboard::store::{DynStore, Effects, Redeemed, StoreError, INVITES_AT_MAX};
use uuid::Uuid;

use super::store_invites::{
    channel, into_task, level, link, maker_in, on_channel, refused_on_channel,
};
use crate::store_contract::{agent_in, app_in, contract, postgres, sqlite};
use crate::store_installations::{actions_of, no_events};
use crate::store_reads::active_room;

fn joined(r: &Redeemed) -> bool {
    matches!(r, Redeemed::Joined(_))
}

pub(super) async fn suspend(store: &DynStore, app: Uuid) {
    let i = store.installation(app).await.unwrap().unwrap();
    store
        .transition(i.id, Transition::Suspend, Actor::Operator, 5, &no_events)
        .await
        .unwrap();
}

async fn a_channel_join_has_the_grants_safeguards(store: DynStore) {
    let maker = maker_in(&store).await;
    let (ch, space) = channel(&store, maker).await;
    let row = link(ch, maker, 5, i64::MAX);
    store.create_invite(&row, 10).await.unwrap();

    // A redeemer app: its grant is audited as a put_grant's is.
    let other = app_in(&store).await;
    let before = actions_of(&store, other).await;
    assert!(joined(
        &store
            .redeem_invite(&on_channel(&row, other, 3))
            .await
            .unwrap()
    ));
    let after = actions_of(&store, other).await;
    assert_eq!(after.len(), before.len() + 1, "{after:?}");
    assert_eq!(after.last(), Some(&LifecycleAction::GrantManage));

    // No principal of that id: nothing written, no use spent.
    let ghost = Uuid::now_v7();
    let r = store
        .redeem_invite(&on_channel(&row, ghost, 3))
        .await
        .unwrap();
    assert_eq!(r, Redeemed::NotValid);
    assert_eq!(store.invite(row.id).await.unwrap().unwrap().uses_left, 4);

    // A redeemer app without an active installation... its own is held.
    let parked = app_in(&store).await;
    let i = store.installation(parked).await.unwrap().unwrap();
    store
        .uninstall(i.id, Actor::Operator, 6, &|_| Vec::new())
        .await
        .unwrap();
    let r = store
        .redeem_invite(&on_channel(&row, parked, 7))
        .await
        .unwrap();
    assert_eq!(r, Redeemed::NotValid);
    assert_eq!(level(&store, ch, space, parked).await, None);

    // The maker suspended lends nothing: the installation is held.
    suspend(&store, maker).await;
    let agent = agent_in(&store, "late").await;
    let r = store
        .redeem_invite(&on_channel(&row, agent, 8))
        .await
        .unwrap();
    assert_eq!(r, Redeemed::NotValid);
    assert_eq!(level(&store, ch, space, agent).await, None);
    assert_eq!(store.invite(row.id).await.unwrap().unwrap().uses_left, 4);
}

async fn a_task_join_checks_its_limit_and_state_in_the_transaction(store: DynStore) {
    let app = app_in(&store).await;
    let (a, b, c, d) = (
        agent_in(&store, "a").await,
        agent_in(&store, "b").await,
        agent_in(&store, "c").await,
        agent_in(&store, "d").await,
    );
    let (task, room) = active_room(&store, app, a, b).await;
    let row = link(room.id, app, 5, i64::MAX);
    store.create_invite(&row, 10).await.unwrap();
    // The task has a and b: a limit of 2 leaves no room.
    let full = store
        .redeem_invite(&into_task(row.id, room.id, task.id, c, 2, 10))
        .await
        .unwrap();
    assert_eq!(full, Redeemed::Full);
    assert_eq!(store.invite(row.id).await.unwrap().unwrap().uses_left, 5);
    assert!(store.events_after(c, 0, 10).await.unwrap().is_empty());
    let in_c = store
        .redeem_invite(&into_task(row.id, room.id, task.id, c, 3, 10))
        .await
        .unwrap();
    assert!(joined(&in_c));
    // An app is no agent: a task takes agents only.
    let an_app = app_in(&store).await;
    let r = store
        .redeem_invite(&into_task(row.id, room.id, task.id, an_app, 10, 10))
        .await
        .unwrap();
    assert_eq!(r, Redeemed::NotValid);
    // Closed after the handler looked: the transaction sees it.
    store
        .transition_task(
            task.id,
            TaskState::Active,
            TaskState::Closed,
            None,
            &Effects::default(),
            20,
        )
        .await
        .unwrap();
    let late = store
        .redeem_invite(&into_task(row.id, room.id, task.id, d, 10, 10))
        .await
        .unwrap();
    assert_eq!(late, Redeemed::NotValid);
    assert_eq!(store.invite(row.id).await.unwrap().unwrap().uses_left, 4);
}

async fn one_redeemer_racing_itself_spends_one_use(store: DynStore) {
    let app = maker_in(&store).await;
    let (ch, _) = channel(&store, app).await;
    let (a, b) = (agent_in(&store, "a").await, agent_in(&store, "b").await);
    let (task, room) = active_room(&store, app, a, b).await;
    for round in 0..5 {
        let row = link(ch, app, 3, i64::MAX);
        store.create_invite(&row, 100).await.unwrap();
        let x = agent_in(&store, &format!("x{round}")).await;
        let runs: Vec<_> = (0..3)
            .map(|_| {
                let (s, r) = (store.clone(), on_channel(&row, x, 5));
                tokio::spawn(async move { s.redeem_invite(&r).await.unwrap() })
            })
            .collect();
        let mut won = 0;
        for r in runs {
            let r = r.await.unwrap();
            assert!(joined(&r) || r == Redeemed::Member, "{r:?}");
            won += usize::from(joined(&r));
        }
        assert_eq!(won, 1, "round {round}");
        assert_eq!(store.invite(row.id).await.unwrap().unwrap().uses_left, 2);

        let row = link(room.id, app, 3, i64::MAX);
        store.create_invite(&row, 100).await.unwrap();
        let y = agent_in(&store, &format!("y{round}")).await;
        let runs: Vec<_> = (0..3)
            .map(|_| {
                let s = store.clone();
                let r = into_task(row.id, room.id, task.id, y, 100, 10);
                tokio::spawn(async move { s.redeem_invite(&r).await.unwrap() })
            })
            .collect();
        let mut won = 0;
        for r in runs {
            let r = r.await.unwrap();
            assert!(joined(&r) || r == Redeemed::Member, "{r:?}");
            won += usize::from(joined(&r));
        }
        assert_eq!(won, 1, "round {round}: one join, one event");
        assert_eq!(store.events_after(y, 0, 10).await.unwrap().len(), 1);
        assert_eq!(store.invite(row.id).await.unwrap().unwrap().uses_left, 2);
    }
}

async fn many_redeemers_never_spend_past_max_uses(store: DynStore) {
    let app = maker_in(&store).await;
    let (ch, space) = channel(&store, app).await;
    let row = link(ch, app, 2, i64::MAX);
    store.create_invite(&row, 10).await.unwrap();
    let mut who = Vec::new();
    for i in 0..6 {
        who.push(agent_in(&store, &format!("r{i}")).await);
    }
    let runs: Vec<_> = who
        .iter()
        .map(|w| {
            let (s, r) = (store.clone(), on_channel(&row, *w, 5));
            tokio::spawn(async move { s.redeem_invite(&r).await.unwrap() })
        })
        .collect();
    let mut won = 0;
    for r in runs {
        won += usize::from(joined(&r.await.unwrap()));
    }
    assert_eq!(won, 2);
    let mut writers = 0;
    for w in &who {
        writers += usize::from(level(&store, ch, space, *w).await.is_some());
    }
    assert_eq!(writers, 2, "the losers write nothing");
    assert_eq!(store.invite(row.id).await.unwrap().unwrap().uses_left, 0);
}

async fn live_links_are_capped_and_dead_ones_pruned(store: DynStore) {
    let app = maker_in(&store).await;
    let (ch, _) = channel(&store, app).await;
    let spent = link(ch, app, 1, i64::MAX);
    let expired = link(ch, app, 1, 50);
    let live = link(ch, app, 1, i64::MAX);
    for l in [&spent, &expired, &live] {
        store.create_invite(l, 3).await.unwrap();
    }
    let past = store.create_invite(&link(ch, app, 1, i64::MAX), 3).await;
    assert!(
        matches!(&past, Err(StoreError::Conflict(m)) if m == INVITES_AT_MAX),
        "{past:?}"
    );
    let x = agent_in(&store, "x").await;
    assert!(joined(
        &store
            .redeem_invite(&on_channel(&spent, x, 5))
            .await
            .unwrap()
    ));
    // Links made at 100: the expired one and the used-up one are not live.
    let mut later = link(ch, app, 1, i64::MAX);
    later.created_at = 100;
    store.create_invite(&later, 3).await.unwrap();
    assert_eq!(store.prune_invites(100).await.unwrap(), 2);
    for (l, kept) in [(&spent, false), (&expired, false), (&live, true)] {
        assert_eq!(store.invite(l.id).await.unwrap().is_some(), kept);
    }
    assert!(store.invite(later.id).await.unwrap().is_some());
}

async fn a_maker_racing_its_own_link_answers_without_error(store: DynStore) {
    let maker = maker_in(&store).await;
    for round in 0..5 {
        let (ch, space) = channel(&store, maker).await;
        let row = link(ch, maker, 3, i64::MAX);
        store.create_invite(&row, 10).await.unwrap();
        // Each holds the maker's row, which is also the redeemer's: on
        // PostgreSQL a shared lock then an exclusive one would deadlock.
        let runs: Vec<_> = (0..3)
            .map(|_| {
                let (s, r) = (store.clone(), on_channel(&row, maker, 5));
                tokio::spawn(async move { s.redeem_invite(&r).await })
            })
            .collect();
        let mut won = 0;
        for r in runs {
            let r = r.await.unwrap();
            let r = r.unwrap_or_else(|e| panic!("round {round}: {e:?}"));
            assert!(joined(&r) || r == Redeemed::Member, "{r:?}");
            won += usize::from(joined(&r));
        }
        assert_eq!(won, 1, "round {round}");
        assert!(level(&store, ch, space, maker).await.is_some());
    }
    // Suspended, the maker lends nothing, to itself either.
    let (ch, _) = channel(&store, maker).await;
    let row = link(ch, maker, 3, i64::MAX);
    store.create_invite(&row, 10).await.unwrap();
    suspend(&store, maker).await;
    let r = store
        .redeem_invite(&on_channel(&row, maker, 8))
        .await
        .unwrap();
    assert_eq!(r, Redeemed::NotValid);
    assert_eq!(store.invite(row.id).await.unwrap().unwrap().uses_left, 3);
}

async fn a_channel_archived_after_the_link_takes_no_one(store: DynStore) {
    let maker = maker_in(&store).await;
    let (ch, space) = channel(&store, maker).await;
    let row = link(ch, maker, 3, i64::MAX);
    store.create_invite(&row, 10).await.unwrap();
    // Archived after the handler's recheck: the transaction reads it.
    store
        .set_channel(ch, None, Some(ChannelState::Archived))
        .await
        .unwrap();
    let agent = agent_in(&store, "late").await;
    refused_on_channel(&store, &row, space, (agent, 8), 3).await;
    // Read-only after the handler's recheck: the maker, an app, is below
    // the admin a read-only channel takes writes from, and the
    // transaction reads the state under the channel's row (third pass).
    store
        .set_channel(ch, None, Some(ChannelState::ReadOnly))
        .await
        .unwrap();
    refused_on_channel(&store, &row, space, (agent, 9), 3).await;
    // Open again, the link lends again.
    store
        .set_channel(ch, None, Some(ChannelState::Open))
        .await
        .unwrap();
    let r = store
        .redeem_invite(&on_channel(&row, agent, 10))
        .await
        .unwrap();
    assert!(joined(&r), "{r:?}");
}

contract!(
    a_channel_join_has_the_grants_safeguards,
    a_task_join_checks_its_limit_and_state_in_the_transaction,
    one_redeemer_racing_itself_spends_one_use,
    many_redeemers_never_spend_past_max_uses,
    live_links_are_capped_and_dead_ones_pruned,
    a_maker_racing_its_own_link_answers_without_error,
    a_channel_archived_after_the_link_takes_no_one
);
