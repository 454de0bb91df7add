//! Control across nodes (ADR 0034 §4): a change made through node 1 closes
//! the sockets it affects on node 3 within `cluster.control_latency_ms`,
//! by `sb.control`, and by the database sweep when NATS is down.

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

/// The check: a key revoked through node 1 closes its socket on
/// node 3 within the bound, over NATS and, with NATS stopped, by the sweep.
#[tokio::test]
async fn a_key_revoked_through_node_1_closes_its_socket_on_node_3_within_the_bound() {
    let settings = Settings::default();
    let bound = Duration::from_millis(settings.control_latency_ms);
    let mut cluster = ClusterHarness::start_with(3, settings).await;
    let ws3 = cluster.node(3).ws_url();
    let (_, fast_key) = cluster.node(1).register_agent("fast").await;
    let (_, swept_key) = cluster.node(1).register_agent("swept").await;
    let mut fast = RawSocket::connect_agent(&ws3, &fast_key).await;
    let mut swept = RawSocket::connect_agent(&ws3, &swept_key).await;

    let at = Instant::now();
    revoke_own_keys(cluster.node(1), &fast_key).await;
    closed_within(&mut fast, at, bound, (4003, "key revoked")).await;
    let controls = cluster
        .node(3)
        .metric(
            "switchboard_cluster_messages_total",
            "direction=\"received\",kind=\"control\"",
        )
        .await;
    assert!(controls > 0.0, "node 3 took no control message");

    cluster.stop_nats().await;
    let at = Instant::now();
    revoke_own_keys(cluster.node(1), &swept_key).await;
    closed_within(&mut swept, at, bound, (4003, "key revoked")).await;
}

/// An app suspended through node 1: its socket on node 3 closes 4012
/// within the bound, and its reconnect there is refused.
#[tokio::test]
async fn an_app_suspended_through_node_1_is_closed_on_node_3_within_the_bound() {
    let settings = Settings::default();
    let bound = Duration::from_millis(settings.control_latency_ms);
    let cluster = ClusterHarness::start_with(3, settings).await;
    let (app_id, app_key) = cluster.node(1).register_app(&werewolf_manifest()).await;
    let ws3 = cluster.node(3).ws_url();
    let mut app = RawSocket::connect_app(&ws3, &app_key).await;
    let at = Instant::now();
    let (status, body) = operator(
        cluster.node(1),
        Method::POST,
        &app_id,
        "installation/suspend",
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    closed_within(&mut app, at, bound, (4012, "app_suspended")).await;
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
        "a suspended app connected on node 3: {r}"
    );
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
