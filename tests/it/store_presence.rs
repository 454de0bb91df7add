//! The presence store of cluster mode (ADR 0035), on both backends: the
//! newest socket of an app on a live node is its callback target; a
//! closed socket, a lapsed lease, a forgotten or pruned node are not.

use switchboard::store::{CallbackPresence, DynStore};
use uuid::Uuid;

use crate::store_contract::{contract, postgres, sqlite};

contract!(
    the_newest_socket_on_a_live_node_takes_callbacks,
    a_lapsed_lease_hides_its_nodes_sockets,
    forgotten_and_pruned_nodes_lose_their_sockets,
);

const NOW: i64 = 1_700_000_000_000;

fn at(node: &str, connection_id: Uuid) -> Option<CallbackPresence> {
    Some(CallbackPresence {
        node_id: node.into(),
        connection_id,
    })
}

async fn the_newest_socket_on_a_live_node_takes_callbacks(store: DynStore) {
    let app = Uuid::new_v4();
    let other_app = Uuid::new_v4();
    store.renew_node("n1", NOW + 5_000).await.unwrap();
    store.renew_node("n2", NOW + 5_000).await.unwrap();
    assert_eq!(store.callback_presence(app, NOW).await.unwrap(), None);

    let (old, new, other) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    store.add_presence(old, app, "n2", NOW).await.unwrap();
    // An earlier clock on the newer connect does not matter: the
    // database's order does.
    store
        .add_presence(new, app, "n1", NOW - 60_000)
        .await
        .unwrap();
    store
        .add_presence(other, other_app, "n2", NOW)
        .await
        .unwrap();
    assert_eq!(
        store.callback_presence(app, NOW).await.unwrap(),
        at("n1", new)
    );
    assert_eq!(
        store.callback_presence(other_app, NOW).await.unwrap(),
        at("n2", other)
    );

    store.remove_presence(new).await.unwrap();
    assert_eq!(
        store.callback_presence(app, NOW).await.unwrap(),
        at("n2", old),
        "the next newest takes over"
    );
    store.remove_presence(old).await.unwrap();
    store.remove_presence(old).await.unwrap();
    assert_eq!(store.callback_presence(app, NOW).await.unwrap(), None);
}

async fn a_lapsed_lease_hides_its_nodes_sockets(store: DynStore) {
    let app = Uuid::new_v4();
    let (on_dead, on_live) = (Uuid::new_v4(), Uuid::new_v4());
    store.renew_node("live", NOW + 5_000).await.unwrap();
    store.renew_node("dead", NOW + 1_000).await.unwrap();
    store.add_presence(on_live, app, "live", NOW).await.unwrap();
    store.add_presence(on_dead, app, "dead", NOW).await.unwrap();
    assert_eq!(
        store.callback_presence(app, NOW).await.unwrap(),
        at("dead", on_dead)
    );
    assert_eq!(
        store.callback_presence(app, NOW + 1_000).await.unwrap(),
        at("live", on_live),
        "a lease ends at its expiry"
    );
    store.renew_node("dead", NOW + 9_000).await.unwrap();
    assert_eq!(
        store.callback_presence(app, NOW + 1_000).await.unwrap(),
        at("dead", on_dead),
        "a renewal extends it"
    );
    assert_eq!(
        store.callback_presence(app, NOW + 9_000).await.unwrap(),
        None,
        "no live node holds the app"
    );
    let unleased = Uuid::new_v4();
    store
        .add_presence(unleased, app, "never-renewed", NOW)
        .await
        .unwrap();
    assert_eq!(
        store.callback_presence(app, NOW).await.unwrap(),
        at("dead", on_dead),
        "a node without a lease row holds nothing"
    );
}

async fn forgotten_and_pruned_nodes_lose_their_sockets(store: DynStore) {
    let app = Uuid::new_v4();
    let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    store.renew_node("keep", NOW + 5_000).await.unwrap();
    store.renew_node("restarted", NOW + 5_000).await.unwrap();
    store.renew_node("lapsed", NOW - 10_000).await.unwrap();
    store.add_presence(a, app, "keep", NOW).await.unwrap();
    store.add_presence(b, app, "restarted", NOW).await.unwrap();
    store.add_presence(c, app, "lapsed", NOW).await.unwrap();

    assert_eq!(store.forget_node("restarted").await.unwrap(), 1);
    assert_eq!(store.forget_node("restarted").await.unwrap(), 0);
    assert_eq!(store.prune_nodes(NOW - 5_000).await.unwrap(), 1);
    assert_eq!(store.prune_nodes(NOW - 5_000).await.unwrap(), 0);
    assert_eq!(
        store.callback_presence(app, NOW).await.unwrap(),
        at("keep", a)
    );
    // The forgotten node renewing again holds none of its old sockets.
    store.renew_node("restarted", NOW + 5_000).await.unwrap();
    store.renew_node("lapsed", NOW + 5_000).await.unwrap();
    store.remove_presence(a).await.unwrap();
    assert_eq!(store.callback_presence(app, NOW).await.unwrap(), None);
}
