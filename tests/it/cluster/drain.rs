//! SIGTERM in a cluster (issue 19 part 5, ADR 0034's 2026-12-02 drain): a
//! node stopped mid-stream closes its sockets with 1001 and its receivers
//! resume on the other nodes with no gap and no duplicate; a hook call it
//! serves when the signal comes is answered; calls routed after the signal
//! go to the app's socket on a live node or fail closed at once; and the
//! node starts again with the same node id.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{json, Value};
use switchboard::client::AgentClient;
use switchboard::protocol::conversations::{
    AgentConversationCreate, ConversationCreateParams, NewConversationKind,
};
use tokio::sync::oneshot;
use uuid::Uuid;

use super::harness::ClusterHarness;
use super::hook_nodes::eventually;
use super::hooks::{answer_one, failure, setup};
use crate::support::agents::{agent, send, Agent};
use crate::support::event_reader::EventReader;
use crate::support::{RawEvent, RawSocket};

/// Messages in the stream.
const STREAM: usize = 2_000;

/// How the drain's log says the node forgot its presence rows.
const FORGOT: &str = "forgot this node's presence";

fn messages(events: &[Value]) -> usize {
    events
        .iter()
        .filter(|e| e["type"] == json!("agent/message/received"))
        .count()
}

/// What one receiver got over all its sockets, in arrival order, and each
/// close the hub sent it.
struct Received {
    events: Vec<Value>,
    closes: Vec<Option<(u16, String)>>,
}

/// Where one receiver reads: its key and sync epoch, and the gateway it
/// reconnects to when its node closes the socket.
struct Resume {
    key: String,
    epoch: String,
    fallback: String,
}

/// Reads the stream until `want` messages arrived, resuming on the
/// fallback gateway after the last seq seen whenever the hub closes the
/// socket; `quarter` is told once a quarter of them arrived.
async fn receive(
    mut reader: EventReader,
    resume: Resume,
    want: usize,
    mut quarter: Option<oneshot::Sender<()>>,
) -> Received {
    let mut seen: Vec<Value> = Vec::new();
    let mut closes = Vec::new();
    loop {
        let total = messages(&seen) + messages(&reader.events);
        if total >= want {
            break;
        }
        if total >= want / 4 {
            if let Some(q) = quarter.take() {
                let _ = q.send(());
            }
        }
        let n = reader.events.len() + 1;
        if let Some(close) = reader.until_or_closed(n).await {
            closes.push(close);
            seen.append(&mut reader.events);
            let last = seen.last().expect("an event before the close")["seq"]
                .as_u64()
                .unwrap();
            reader = EventReader::connect_url(
                &resume.fallback,
                &resume.key,
                Some((last, &resume.epoch)),
            )
            .await
            .0;
        }
    }
    seen.append(&mut reader.events);
    Received {
        events: seen,
        closes,
    }
}

/// No gap, no duplicate, every acknowledged message once.
fn check_received(member: usize, got: &Received, sent: &HashSet<Uuid>) {
    let seqs: Vec<u64> = got
        .events
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    let expected: Vec<u64> = (seqs[0]..seqs[0] + seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "member {member}: no gap, no duplicate");
    let ids: HashSet<&str> = got
        .events
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids.len(),
        got.events.len(),
        "member {member}: each event once"
    );
    let received: Vec<Uuid> = got
        .events
        .iter()
        .filter(|e| e["type"] == json!("agent/message/received"))
        .map(|e| serde_json::from_value(e["payload"]["message"]["id"].clone()).unwrap())
        .collect();
    assert_eq!(
        received.len(),
        STREAM,
        "member {member}: every message once"
    );
    assert_eq!(
        &received.into_iter().collect::<HashSet<_>>(),
        sent,
        "member {member}: the messages acknowledged"
    );
}

/// Six members, two connected to each node, each socket past the group's
/// creation: (the member, its node, its reader and connect answer).
async fn members_on_every_node(nodes: &ClusterHarness) -> Vec<(Agent, usize, EventReader, Value)> {
    let mut members = Vec::new();
    for i in 0..6 {
        let node = 1 + i % 3;
        let m = agent(nodes.node(node), &format!("member-{i}")).await;
        let (reader, hello) = EventReader::connect(nodes.node(node), &m.key, None).await;
        members.push((m, node, reader, hello));
    }
    members
}

#[tokio::test]
async fn a_sigtermed_nodes_receivers_resume_on_the_other_nodes_with_no_gap_and_no_duplicate() {
    let mut nodes = ClusterHarness::start(3).await;
    let sender = agent(nodes.node(1), "sender").await;
    let mut members = members_on_every_node(&nodes).await;
    let s = AgentClient::connect(&nodes.node(1).base, &sender.key)
        .await
        .unwrap();
    let group = s
        .call::<AgentConversationCreate>(ConversationCreateParams {
            kind: NewConversationKind::Group,
            participants: members.iter().map(|m| m.0.id).collect(),
            name: Some("drain".into()),
        })
        .await
        .unwrap()
        .conversation
        .id;
    for (_, _, reader, _) in &mut members {
        let n = reader.events.len() + 1;
        reader.until(n).await;
    }

    // Node 3's members resume on node 1 and node 2.
    let mut receivers = Vec::new();
    let mut quarters = Vec::new();
    for (i, (m, node, reader, hello)) in members.into_iter().enumerate() {
        let fallback = if node == 3 { 1 + i % 2 } else { node };
        let resume = Resume {
            key: m.key,
            epoch: hello["result"]["events"]["syncEpoch"]
                .as_str()
                .unwrap()
                .to_string(),
            fallback: nodes.node(fallback).ws_url(),
        };
        let quarter = (node == 3).then(|| {
            let (tx, rx) = oneshot::channel();
            quarters.push(rx);
            tx
        });
        receivers.push((node, tokio::spawn(receive(reader, resume, STREAM, quarter))));
    }
    let sending = tokio::spawn(async move {
        futures_util::stream::iter(0..STREAM)
            .map(|i| {
                let s = &s;
                async move { send(s, group, &format!("m{i}")).await.message.id }
            })
            .buffered(16)
            .collect::<Vec<Uuid>>()
            .await
    });

    // A quarter in on both of its sockets, node 3 drains mid-stream.
    for q in quarters {
        q.await
            .expect("a member on node 3 read a quarter of the stream");
    }
    let status = nodes.stop(3).await;
    assert!(
        status.success(),
        "node 3 drained and exited cleanly: {status:?}"
    );

    let sent: HashSet<Uuid> = sending.await.unwrap().into_iter().collect();
    assert_eq!(sent.len(), STREAM, "every send acknowledged");
    for (member, (node, task)) in receivers.into_iter().enumerate() {
        let got = task.await.unwrap();
        if node == 3 {
            let codes: Vec<Option<u16>> =
                got.closes.iter().map(|c| c.as_ref().map(|c| c.0)).collect();
            assert_eq!(
                codes,
                vec![Some(1001)],
                "member {member}: the going-away close, once"
            );
        } else {
            assert!(
                got.closes.is_empty(),
                "member {member} on node {node} was closed: {:?}",
                got.closes
            );
        }
        check_received(member, &got, &sent);
    }

    nodes.start_again(3).await;
}

#[tokio::test]
async fn a_sigtermed_node_answers_the_hook_call_it_serves_and_later_calls_go_to_a_live_node() {
    let deadline_ms = 3_000;
    let mut nodes = ClusterHarness::start(3).await;
    // The gates run on node 2; the app's one socket is on node 3.
    let s = setup(&nodes, deadline_ms).await;
    let mut app = RawSocket::connect_app(&nodes.node(3).ws_url(), &s.app_key).await;
    let accept = json!({"result": {"verdict": {"decision": "Accept"}}});

    let (served, ()) = tokio::join!(s.request(), async {
        let call = app.recv_request().await;
        nodes.terminate(3);
        eventually("node 3 to forget its presence at the drain", || async {
            nodes.node(3).log().contains(FORGOT)
        })
        .await;
        // Routed now, a call finds no live socket (node 3's row is gone,
        // though its socket is still open for the call it serves): it
        // fails closed at once, and never reaches node 3.
        let started = Instant::now();
        assert_eq!(failure(s.request().await).1, json!("app_unavailable"));
        assert!(
            started.elapsed() < Duration::from_millis(deadline_ms),
            "refused without waiting out the deadline"
        );
        app.send_json(&json!({"jsonrpc": "2.0", "id": call["id"], "result": accept["result"]}))
            .await;
    });
    assert!(
        served.is_ok(),
        "the call node 3 served during its drain was answered: {served:?}"
    );

    // Its socket closes with 1001, with no other call on it.
    let close = loop {
        match app.next_event().await {
            RawEvent::Text(frame) => assert!(
                frame.get("method").is_none() || frame.get("id").is_none(),
                "a call reached the draining node's socket: {frame}"
            ),
            RawEvent::Close(close) => break close,
            RawEvent::Ended => break None,
        }
    };
    assert_eq!(close.map(|c| c.0), Some(1001), "the going-away close");
    let status = nodes.wait_stopped(3).await;
    assert!(
        status.success(),
        "node 3 drained and exited cleanly: {status:?}"
    );

    // The app reconnects to node 1, and the next gate reaches it there.
    let mut app = RawSocket::connect_app(&nodes.node(1).ws_url(), &s.app_key).await;
    let (result, ()) = tokio::join!(s.request(), answer_one(&mut app, &accept));
    assert!(result.is_ok(), "answered on node 1: {result:?}");

    // Node 3 takes its node id again at once.
    nodes.start_again(3).await;
}
