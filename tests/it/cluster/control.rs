//! Control across nodes (ADR 0034 §4): a change made through node 1 closes
//! the sockets it affects on node 3 within `cluster.control_latency_ms`,
//! by `sb.control` (proved with a sweep far slower than the tests' wait),
//! and by the database sweep when NATS is down.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

use super::harness::{ClusterHarness, Settings};
use crate::installations::operator;
use crate::support::hub::ADMIN_TOKEN;
use crate::support::world::{channel, expect, grant, on_channel, person, principal, space};
use crate::support::{werewolf_manifest, RawSocket, TestHub};

/// Revokes the caller's keys through `hub`.
async fn revoke_own_keys(hub: &TestHub, key: &str) {
    let r = hub
        .http
        .post(format!("{}/api/v1/keys/revoke", hub.base))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
}

/// Waits for `socket`'s close and checks it came within `bound` of `since`.
async fn closed_within(
    socket: &mut RawSocket,
    since: Instant,
    bound: Duration,
    expected: (u16, &str),
) {
    let close = tokio::time::timeout(bound + Duration::from_secs(10), socket.closed())
        .await
        .expect("the socket was not closed");
    let took = since.elapsed();
    assert_eq!(close, Some((expected.0, expected.1.to_string())));
    assert!(
        took <= bound,
        "closed {took:?} after the change (bound {bound:?})"
    );
}

/// Timings under which only `sb.control` can close a socket in time: the
/// database sweep runs every 30 s (the config check wants it at most half
/// the latency, so the latency is 60 s), and the tests wait
/// [`CONTROL_BOUND`], far below a sweep.
fn control_only() -> Settings {
    Settings {
        control_latency_ms: 60_000,
        revocation_check_interval_ms: 30_000,
        ..Settings::default()
    }
}

/// What the control subject must meet under [`control_only`].
const CONTROL_BOUND: Duration = Duration::from_secs(3);

/// Checks node 3 took its close from a control message, not the sweep.
async fn took_a_control(cluster: &ClusterHarness) {
    let controls = cluster
        .node(3)
        .metric(
            "switchboard_cluster_messages_total",
            "direction=\"received\",kind=\"control\"",
        )
        .await;
    assert!(controls > 0.0, "node 3 took no control message");
}

/// The check: a key revoked through node 1 closes its socket on
/// node 3 within the bound, by the control subject alone (the sweep is
/// 30 s away).
#[tokio::test]
async fn a_key_revoked_through_node_1_closes_its_socket_on_node_3_by_the_control_subject() {
    let cluster = ClusterHarness::start_with(3, control_only()).await;
    let ws3 = cluster.node(3).ws_url();
    let (_, key) = cluster.node(1).register_agent("fast").await;
    let mut socket = RawSocket::connect_agent(&ws3, &key).await;
    let at = Instant::now();
    revoke_own_keys(cluster.node(1), &key).await;
    closed_within(&mut socket, at, CONTROL_BOUND, (4003, "key revoked")).await;
    took_a_control(&cluster).await;
}

/// A key rotated through node 1: the socket on the old key on node 3
/// closes within the bound, by the control subject alone.
#[tokio::test]
async fn a_key_rotated_through_node_1_closes_the_old_keys_socket_on_node_3() {
    let cluster = ClusterHarness::start_with(3, control_only()).await;
    let ws3 = cluster.node(3).ws_url();
    let (_, key) = cluster.node(1).register_agent("rotating").await;
    let mut socket = RawSocket::connect_agent(&ws3, &key).await;
    let one = cluster.node(1);
    let at = Instant::now();
    let r = one
        .http
        .post(format!("{}/api/v1/keys/rotate", one.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let fresh = r.json::<Value>().await.unwrap()["agentKey"]
        .as_str()
        .unwrap()
        .to_string();
    closed_within(&mut socket, at, CONTROL_BOUND, (4003, "key revoked")).await;
    took_a_control(&cluster).await;
    // The new key connects on node 3 (the helper asserts it).
    RawSocket::connect_agent(&ws3, &fresh).await;
}

/// With NATS stopped, the database sweep is the fallback: a key revoked
/// through node 1 still closes its socket on node 3 within the bound.
#[tokio::test]
async fn without_nats_the_sweep_closes_a_revoked_keys_socket_within_the_bound() {
    let settings = Settings::default();
    let bound = Duration::from_millis(settings.control_latency_ms);
    let mut cluster = ClusterHarness::start_with(3, settings).await;
    let ws3 = cluster.node(3).ws_url();
    let (_, key) = cluster.node(1).register_agent("swept").await;
    let mut swept = RawSocket::connect_agent(&ws3, &key).await;
    cluster.stop_nats().await;
    let at = Instant::now();
    revoke_own_keys(cluster.node(1), &key).await;
    closed_within(&mut swept, at, bound, (4003, "key revoked")).await;
}

/// An app's socket on node 3 and a change made to its installation
/// through node 1: the socket closes with `expected` within the bound, by
/// the control subject alone, and a reconnect on node 3 is refused.
async fn installation_change_closes_on_node_3(
    method: Method,
    rest: &str,
    body: Option<Value>,
    expected: (u16, &str),
) {
    let cluster = ClusterHarness::start_with(3, control_only()).await;
    let (app_id, app_key) = cluster.node(1).register_app(&werewolf_manifest()).await;
    let ws3 = cluster.node(3).ws_url();
    let mut app = RawSocket::connect_app(&ws3, &app_key).await;
    let at = Instant::now();
    let (status, answer) = operator(cluster.node(1), method, &app_id, rest, body.as_ref()).await;
    assert!(status == 200 || status == 204, "{rest}: {status} {answer}");
    closed_within(&mut app, at, CONTROL_BOUND, expected).await;
    took_a_control(&cluster).await;
    let mut again = RawSocket::connect(&ws3).await;
    let r = again
        .call(
            json!("c"),
            "app/network/connect",
            json!({"appKey": app_key}),
        )
        .await;
    assert!(
        r.get("error").is_some(),
        "{rest}: the app connected on node 3: {r}"
    );
}

/// An app suspended through node 1: its socket on node 3 closes 4012.
#[tokio::test]
async fn an_app_suspended_through_node_1_is_closed_on_node_3_within_the_bound() {
    installation_change_closes_on_node_3(
        Method::POST,
        "installation/suspend",
        None,
        (4012, "app_suspended"),
    )
    .await;
}

/// An app uninstalled through node 1: its socket on node 3 closes 4012.
#[tokio::test]
async fn an_app_uninstalled_through_node_1_is_closed_on_node_3_within_the_bound() {
    installation_change_closes_on_node_3(
        Method::DELETE,
        "installation",
        None,
        (4012, "app_uninstalled"),
    )
    .await;
}

/// `events:subscribe` removed through node 1: the app's socket on node 3,
/// which needs it, closes 4018.
#[tokio::test]
async fn a_scope_removed_through_node_1_closes_the_apps_socket_on_node_3() {
    installation_change_closes_on_node_3(
        Method::PUT,
        "installation/scopes",
        Some(json!({ "scopes": [] })),
        (4018, "scope_missing"),
    )
    .await;
}

/// `who`'s send into a channel over `socket`: the answer frame.
async fn send_into(socket: &mut RawSocket, channel: Uuid, text: &str) -> Value {
    let params = json!({ "conversationId": channel, "parts": [{ "type": "text", "text": text }] });
    socket
        .call(json!("send"), "person/message/send", params)
        .await
}

/// The check: a member removed through node 1 is refused on node
/// 3 at once (the next send after the removal's answer), and so is the
/// holder of a grant deleted through node 1; both sent there just before,
/// so any cached entry would be warm.
#[tokio::test]
async fn a_member_removed_through_node_1_is_refused_on_node_3_at_once() {
    let cluster = ClusterHarness::start(3).await;
    let (one, three) = (cluster.node(1), cluster.node(3));
    let support = space(one, "Support").await;
    let general = channel(one, ADMIN_TOKEN, support, "general").await;
    let gus = person(one, "Gus").await;
    let ria = person(one, "Ria").await;
    let v = expect(
        one,
        Method::POST,
        "/api/v1/groups",
        ADMIN_TOKEN,
        Some(json!({ "name": "writers" })),
        201,
    )
    .await;
    let group = v["group"]["groupId"].as_str().unwrap().to_string();
    let membership = format!("/api/v1/groups/{group}/members/{}", gus.id);
    expect(one, Method::PUT, &membership, ADMIN_TOKEN, None, 204).await;
    grant(
        one,
        ADMIN_TOKEN,
        json!({ "groupId": group }),
        on_channel(general),
        "write",
    )
    .await;
    let given = grant(
        one,
        ADMIN_TOKEN,
        principal(ria.id),
        on_channel(general),
        "write",
    )
    .await;

    let mut gus_on_3 = RawSocket::connect_person(&three.ws_url(), &gus.key).await;
    let mut ria_on_3 = RawSocket::connect_person(&three.ws_url(), &ria.key).await;
    for n in 0..2 {
        let frame = send_into(&mut gus_on_3, general, &format!("gus {n}")).await;
        assert!(frame.get("result").is_some(), "{frame}");
        let frame = send_into(&mut ria_on_3, general, &format!("ria {n}")).await;
        assert!(frame.get("result").is_some(), "{frame}");
    }

    expect(one, Method::DELETE, &membership, ADMIN_TOKEN, None, 204).await;
    let frame = send_into(&mut gus_on_3, general, "still here?").await;
    assert_eq!(frame["error"]["_tag"], json!("NotFoundError"), "{frame}");
    assert_eq!(frame["error"]["message"], json!("conversation not found"));

    let path = format!("/api/v1/grants/{}", given["grantId"].as_str().unwrap());
    expect(one, Method::DELETE, &path, ADMIN_TOKEN, None, 204).await;
    let frame = send_into(&mut ria_on_3, general, "still here?").await;
    assert_eq!(frame["error"]["_tag"], json!("NotFoundError"), "{frame}");
}
