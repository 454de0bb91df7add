//! The store's rights version (ADR 0020 §3): every write that changes
//! rights bumps it in its own transaction, so a hub's sweep learns of
//! changes another process made; a write that fails bumps nothing.

use switchboard::domain::authz::level::{GrantPlace, Holder};
use switchboard::domain::authz::{ChannelState, Level};
use switchboard::domain::PrincipalKind;
use switchboard::store::DynStore;

use crate::store_contract::{contract, postgres, sqlite};
use crate::store_places::{channel, grant, group, someone, space};

contract!(each_rights_write_bumps_the_version);

/// The version, checked to have moved past `seen`.
async fn bumped(store: &DynStore, seen: i64, what: &str) -> i64 {
    let now = store.rights_version().await.unwrap();
    assert!(now > seen, "{what}: version {now} after {seen}");
    now
}

/// Checks the version is still `seen`.
async fn unchanged(store: &DynStore, seen: i64, what: &str) {
    let now = store.rights_version().await.unwrap();
    assert_eq!(now, seen, "{what}: a failed write bumped the version");
}

async fn each_rights_write_bumps_the_version(store: DynStore) {
    let v = store.rights_version().await.unwrap();
    assert_eq!(v, 0, "a fresh store has no rights version yet");
    let robin = someone(&store, PrincipalKind::Person, "Robin").await;
    let s = space(&store, "research").await;
    let notes = channel(&store, s, "notes", robin).await;
    channel(&store, s, "drafts", robin).await;
    let g = group(&store, "researchers").await;
    unchanged(&store, v, "creating places grants nothing").await;

    store.add_member(g, robin, 1).await.unwrap();
    let v = bumped(&store, v, "add_member").await;
    store.remove_member(g, robin).await.unwrap();
    let v = bumped(&store, v, "remove_member").await;
    let given = grant(
        Holder::Principal(robin),
        GrantPlace::Channel(notes.id),
        Level::Write,
    );
    let stored = store.put_grant(&given).await.unwrap();
    let v = bumped(&store, v, "put_grant").await;
    let lower = grant(
        Holder::Principal(robin),
        GrantPlace::Channel(notes.id),
        Level::Read,
    );
    store.put_grant(&lower).await.unwrap();
    let v = bumped(&store, v, "put_grant replacing a level").await;
    store.delete_grant(stored.id, None, 1).await.unwrap();
    let v = bumped(&store, v, "delete_grant").await;
    store
        .set_channel(notes.id, None, Some(ChannelState::ReadOnly))
        .await
        .unwrap();
    let v = bumped(&store, v, "set_channel state").await;
    store
        .set_channel(notes.id, Some("lab"), None)
        .await
        .unwrap();
    let v = bumped(&store, v, "set_channel name").await;

    assert!(store.delete_grant(stored.id, None, 1).await.is_err());
    unchanged(&store, v, "delete_grant of a missing grant").await;
    assert!(store
        .set_channel(notes.id, Some("drafts"), None)
        .await
        .is_err());
    unchanged(&store, v, "set_channel to a taken name").await;
}
