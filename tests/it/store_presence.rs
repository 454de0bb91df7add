//! The presence store of cluster mode (ADR 0034, 0035), on both backends:
//! the newest socket of an app on a live node is its callback target; a
//! closed socket, a lapsed lease, a forgotten or pruned node are not.
//! Leases run on the database's clock: a lease given for a negative time
//! has lapsed already, one given for a minute is live, whatever the
//! test machine's clock says. A node id is held by one instance at a time.

use switchboard::store::{CallbackPresence, DynStore, Renewal};
use uuid::Uuid;

use crate::store_contract::{contract, postgres, sqlite};

contract!(
    the_newest_socket_on_a_live_node_takes_callbacks,
    a_lapsed_lease_hides_its_nodes_sockets,
    a_node_id_is_held_by_one_live_instance,
    a_renewal_takes_a_lapsed_or_deleted_lease_again,
    forgotten_and_pruned_nodes_lose_their_sockets,
);

/// A lease that outlives any test.
const LIVE: i64 = 60_000;
/// A lease that lapsed ten seconds ago, by the database's clock.
const LAPSED: i64 = -10_000;
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
    assert!(store.claim_node("n1", "i1", LIVE).await.unwrap());
    assert!(store.claim_node("n2", "i2", LIVE).await.unwrap());
    assert_eq!(store.callback_presence(app).await.unwrap(), None);

    let (old, new, other) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    store.add_presence(old, app, "n2", NOW).await.unwrap();
    // The wall clock a node reports does not order sockets: the database does.
    store
        .add_presence(new, app, "n1", NOW - 60_000)
        .await
        .unwrap();
    store.add_presence(new, app, "n1", NOW).await.unwrap();
    store
        .add_presence(other, other_app, "n2", NOW)
        .await
        .unwrap();
    assert_eq!(store.callback_presence(app).await.unwrap(), at("n1", new));
    assert_eq!(
        store.callback_presence(other_app).await.unwrap(),
        at("n2", other)
    );
    store.remove_presence(new).await.unwrap();
    assert_eq!(store.callback_presence(app).await.unwrap(), at("n2", old));
    store.remove_presence(old).await.unwrap();
    assert_eq!(store.callback_presence(app).await.unwrap(), None);
}

async fn a_lapsed_lease_hides_its_nodes_sockets(store: DynStore) {
    let app = Uuid::new_v4();
    let (on_dead, on_live) = (Uuid::new_v4(), Uuid::new_v4());
    assert!(store.claim_node("live", "a", LIVE).await.unwrap());
    assert!(store.claim_node("dead", "b", LIVE).await.unwrap());
    store.add_presence(on_live, app, "live", NOW).await.unwrap();
    store.add_presence(on_dead, app, "dead", NOW).await.unwrap();
    assert_eq!(
        store.callback_presence(app).await.unwrap(),
        at("dead", on_dead)
    );
    // Renewed to a lease already over on the database's clock.
    assert!(store.claim_node("dead", "b", LAPSED).await.unwrap());
    assert_eq!(
        store.callback_presence(app).await.unwrap(),
        at("live", on_live),
        "a lease ends at its expiry"
    );
    assert_eq!(
        store.renew_node("dead", "b", LIVE).await.unwrap(),
        Renewal::Reclaimed
    );
    assert_eq!(
        store.callback_presence(app).await.unwrap(),
        at("dead", on_dead),
        "a renewal extends it"
    );
    let unleased = Uuid::new_v4();
    store
        .add_presence(unleased, app, "never-renewed", NOW)
        .await
        .unwrap();
    assert_eq!(
        store.callback_presence(app).await.unwrap(),
        at("dead", on_dead),
        "a node without a lease row holds nothing"
    );
}

async fn a_node_id_is_held_by_one_live_instance(store: DynStore) {
    assert!(store.claim_node("n1", "first", LIVE).await.unwrap());
    assert!(
        !store.claim_node("n1", "second", LIVE).await.unwrap(),
        "a second process with a live node's id is refused"
    );
    assert_eq!(
        store.renew_node("n1", "second", LIVE).await.unwrap(),
        Renewal::Lost
    );
    assert_eq!(
        store.renew_node("n1", "first", LIVE).await.unwrap(),
        Renewal::Renewed
    );
    assert!(
        store.claim_node("n1", "first", LIVE).await.unwrap(),
        "the holder claims again"
    );
    // The holder crashed: its lease lapses, and a new process takes the id.
    assert!(store.claim_node("n1", "first", LAPSED).await.unwrap());
    assert!(store.claim_node("n1", "second", LIVE).await.unwrap());
    assert_eq!(
        store.renew_node("n1", "first", LIVE).await.unwrap(),
        Renewal::Lost,
        "the old process, back from a pause, has lost it"
    );
    assert_eq!(
        store.forget_node("n1", "first").await.unwrap(),
        0,
        "nor may it forget the new holder"
    );
    assert!(!store.claim_node("n1", "third", LIVE).await.unwrap());
}

async fn a_renewal_takes_a_lapsed_or_deleted_lease_again(store: DynStore) {
    let app = Uuid::new_v4();
    let socket = Uuid::new_v4();
    assert!(store.claim_node("paused", "i", LIVE).await.unwrap());
    store
        .add_presence(socket, app, "paused", NOW)
        .await
        .unwrap();
    assert!(store.claim_node("paused", "i", LAPSED).await.unwrap());
    // Another node prunes the lapsed lease, and its socket with it.
    assert_eq!(store.prune_nodes(5_000).await.unwrap(), 1);
    assert_eq!(store.callback_presence(app).await.unwrap(), None);
    assert_eq!(
        store.renew_node("paused", "i", LIVE).await.unwrap(),
        Renewal::Reclaimed,
        "the paused node comes back"
    );
    // It records its open sockets again (twice is as once).
    store
        .add_presence(socket, app, "paused", NOW)
        .await
        .unwrap();
    store
        .add_presence(socket, app, "paused", NOW)
        .await
        .unwrap();
    assert_eq!(
        store.callback_presence(app).await.unwrap(),
        at("paused", socket)
    );
    assert_eq!(
        store.renew_node("paused", "i", LIVE).await.unwrap(),
        Renewal::Renewed
    );
}

async fn forgotten_and_pruned_nodes_lose_their_sockets(store: DynStore) {
    let app = Uuid::new_v4();
    let (a, b, c, d) = (
        Uuid::new_v4(),
        Uuid::new_v4(),
        Uuid::new_v4(),
        Uuid::new_v4(),
    );
    assert!(store.claim_node("keep", "k", LIVE).await.unwrap());
    assert!(store.claim_node("stopped", "s", LIVE).await.unwrap());
    assert!(store.claim_node("lapsed", "l", LAPSED).await.unwrap());
    assert!(store.claim_node("just-lapsed", "j", -1).await.unwrap());
    store.add_presence(a, app, "keep", NOW).await.unwrap();
    store.add_presence(b, app, "stopped", NOW).await.unwrap();
    store.add_presence(c, app, "lapsed", NOW).await.unwrap();
    store.add_presence(d, app, "nowhere", NOW).await.unwrap();

    assert_eq!(store.forget_node("stopped", "other").await.unwrap(), 0);
    assert_eq!(store.forget_node("stopped", "s").await.unwrap(), 1);
    assert_eq!(store.forget_node("stopped", "s").await.unwrap(), 0);
    assert_eq!(
        store.prune_nodes(5_000).await.unwrap(),
        1,
        "lapsed more than the grace ago: only `lapsed`"
    );
    assert_eq!(store.prune_nodes(5_000).await.unwrap(), 0);
    assert_eq!(store.callback_presence(app).await.unwrap(), at("keep", a));
    // A node claiming a forgotten or pruned id holds none of its old sockets.
    assert!(store.claim_node("stopped", "s2", LIVE).await.unwrap());
    assert!(store.claim_node("lapsed", "l2", LIVE).await.unwrap());
    assert!(store.claim_node("nowhere", "n", LIVE).await.unwrap());
    store.remove_presence(a).await.unwrap();
    assert_eq!(
        store.callback_presence(app).await.unwrap(),
        None,
        "sockets under no node were pruned too"
    );
    assert_eq!(store.forget_sockets("keep").await.unwrap(), 0);
}
