//! The console behind a load balancer (ADR 0036): its sessions are in the
//! shared database, so a login made through one node works on another,
//! and a logout on either ends it on both, live streams included. Each
//! node's view names the node by its node id.

use reqwest::header::COOKIE;
use serde_json::{json, Value};

use super::harness::{ClusterHarness, Settings};
use crate::console::stream::Events;
use crate::console::{action, login, logout, Login};
use crate::support::TestHub;

async fn authenticated(hub: &TestHub, login: &Login) -> Value {
    let r = hub
        .http
        .get(format!("{}/console/api/session", hub.base))
        .header(COOKIE, login.cookie_header())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    r.json::<Value>().await.unwrap()["authenticated"].clone()
}

/// The stream's events until `ended`, whose reason it returns.
async fn ended(events: &mut Events) -> Value {
    loop {
        let (name, data) = events.next().await.expect("the ended event");
        if name == "ended" {
            return data["reason"].clone();
        }
    }
}

#[tokio::test]
async fn a_console_session_made_on_one_node_works_on_another_and_a_logout_ends_it_on_both() {
    let settings = Settings {
        env: vec![(
            "SWITCHBOARD_CONSOLE__POLL_INTERVAL_MS".to_string(),
            "100".to_string(),
        )],
        ..Settings::default()
    };
    let cluster = ClusterHarness::start_with(2, settings).await;
    let (one, two) = (cluster.node(1), cluster.node(2));

    let (agent, _key) = one.register_agent("console-cluster").await;
    let revoke = format!("/agents/{agent}/keys/revoke");
    let l = login(one).await;
    assert_eq!(
        authenticated(two, &l).await,
        json!(true),
        "node 2 knows node 1's login"
    );
    // An action on node 2 is admitted with the session's CSRF token, and
    // refused without it, as on the node that made it.
    let (status, body) = action(two, &l, &revoke, None).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (403, &json!("csrf_refused")),
        "{body}"
    );
    let (status, body) = action(two, &l, &revoke, Some(&l.csrf)).await;
    assert_eq!((status, &body["revoked"]), (200, &json!(1)), "{body}");

    // Each node's view names itself by its node id.
    let mut on_one = Events::open(one, &l).await;
    let mut on_two = Events::open(two, &l).await;
    for (events, node) in [(&mut on_one, 1), (&mut on_two, 2)] {
        let (name, snapshot) = events.next().await.unwrap();
        assert_eq!(name, "snapshot");
        assert_eq!(
            snapshot["hub"]["node"],
            json!(ClusterHarness::node_id(node))
        );
    }

    // A logout through node 2 ends the session on node 1 too: its stream
    // ends, and the cookie is no longer a session there.
    let out = logout(two, &l).await;
    assert_eq!(out.status().as_u16(), 204);
    assert_eq!(ended(&mut on_one).await, json!("logged_out"));
    assert_eq!(ended(&mut on_two).await, json!("logged_out"));
    assert_eq!(authenticated(one, &l).await, json!(false));
    let (status, _) = action(one, &l, &revoke, Some(&l.csrf)).await;
    assert_eq!(status, 401, "logged out on node 1 as well");

    // The other way round: made on node 2, ended through node 1.
    let l = login(two).await;
    assert_eq!(authenticated(one, &l).await, json!(true));
    let out = logout(one, &l).await;
    assert_eq!(out.status().as_u16(), 204);
    assert_eq!(authenticated(two, &l).await, json!(false));
}

/// `console.max_sessions` holds over the cluster: logins made at once
/// through both nodes leave exactly the limit live, not one per node.
#[tokio::test]
async fn concurrent_logins_on_two_nodes_keep_console_max_sessions() {
    const MAX: usize = 3;
    const LOGINS: usize = 12;
    let settings = Settings {
        env: vec![(
            "SWITCHBOARD_CONSOLE__MAX_SESSIONS".to_string(),
            MAX.to_string(),
        )],
        ..Settings::default()
    };
    let cluster = ClusterHarness::start_with(2, settings).await;
    let logins =
        futures_util::future::join_all((0..LOGINS).map(|i| login(cluster.node(1 + i % 2)))).await;
    let mut live = 0;
    for (i, l) in logins.iter().enumerate() {
        // Asked of the other node than the one that made it.
        if authenticated(cluster.node(2 - i % 2), l).await == json!(true) {
            live += 1;
        }
    }
    assert_eq!(live, MAX, "sessions live over both nodes");
}
