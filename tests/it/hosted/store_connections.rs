//! The app's connections through its channels (ADR 0031 §6, §9) on both
//! backends: a principal shares a room with an app when a grant reaches
//! both on one channel (directly, through a group, or on its space); a
//! reader of a channel the app does not read, a disabled reader and a
//! stranger do not; the app is never its own connection.

use switchboard::domain::authz::level::{GrantPlace, Holder};
use switchboard::domain::authz::Level;
use switchboard::domain::PrincipalKind;
use switchboard::store::DynStore;
use uuid::Uuid;

use crate::store_contract::{app_in, contract, postgres, sqlite};
use crate::store_places::{channel, grant, group, someone, space};

async fn put(store: &DynStore, subject: Holder, place: GrantPlace, level: Level) {
    store
        .put_grant(&grant(subject, place, level))
        .await
        .unwrap();
}

async fn channel_readers_are_the_apps_connections(store: DynStore) {
    let app = app_in(&store).await;
    let alex = someone(&store, PrincipalKind::Person, "Alex").await;
    let sam = someone(&store, PrincipalKind::Person, "Sam").await;
    let pat = someone(&store, PrincipalKind::Person, "Pat").await;
    let dee = someone(&store, PrincipalKind::Person, "Dee").await;
    let gone = someone(&store, PrincipalKind::Person, "Gone").await;
    let bot = someone(&store, PrincipalKind::Agent, "bot").await;
    let games = space(&store, "games").await;
    let lobby = channel(&store, games, "lobby", alex).await.id;
    let den = channel(&store, games, "den", alex).await.id;
    let elsewhere = space(&store, "elsewhere").await;
    let far = channel(&store, elsewhere, "far", alex).await.id;
    // The app reads the lobby by its own grant and the den through a group.
    put(
        &store,
        Holder::Principal(app),
        GrantPlace::Channel(lobby),
        Level::Write,
    )
    .await;
    let players = group(&store, "players").await;
    store.add_member(players, app, 1).await.unwrap();
    put(
        &store,
        Holder::Group(players),
        GrantPlace::Channel(den),
        Level::Read,
    )
    .await;
    // Sam reads the lobby; Pat the whole space; the bot the den, by group.
    put(
        &store,
        Holder::Principal(sam),
        GrantPlace::Channel(lobby),
        Level::Read,
    )
    .await;
    put(
        &store,
        Holder::Principal(pat),
        GrantPlace::Space(games),
        Level::Read,
    )
    .await;
    let bots = group(&store, "bots").await;
    store.add_member(bots, bot, 1).await.unwrap();
    put(
        &store,
        Holder::Group(bots),
        GrantPlace::Channel(den),
        Level::Write,
    )
    .await;
    // Dee reads only a channel the app does not; Gone is disabled.
    put(
        &store,
        Holder::Principal(dee),
        GrantPlace::Channel(far),
        Level::Admin,
    )
    .await;
    put(
        &store,
        Holder::Principal(gone),
        GrantPlace::Channel(lobby),
        Level::Read,
    )
    .await;
    store.disable_person(gone, 5).await.unwrap();

    let mut expected = vec![sam, pat, bot];
    expected.sort();
    assert_eq!(
        store.app_connections(app, None, 10).await.unwrap(),
        expected,
        "each co-reader once, by id"
    );
    assert_eq!(
        store
            .app_connections(app, Some(expected[0]), 1)
            .await
            .unwrap(),
        vec![expected[1]]
    );
    for (who, shares) in [
        (sam, true),
        (pat, true),
        (bot, true),
        (dee, false),
        (gone, false),
        (alex, false),
        (app, false),
        (Uuid::now_v7(), false),
    ] {
        assert_eq!(store.shares_room(app, who).await.unwrap(), shares, "{who}");
    }
    // Another app reading nothing has no connection through these grants.
    let other = app_in(&store).await;
    assert!(store
        .app_connections(other, None, 10)
        .await
        .unwrap()
        .is_empty());
    assert!(!store.shares_room(other, sam).await.unwrap());
}

contract!(channel_readers_are_the_apps_connections);
