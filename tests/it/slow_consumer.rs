//! Slow consumers end to end (issue 22 part 5): a socket that stops
//! reading is closed with 4008 once its outbound queue
//! (`gateway.outbound_queue_capacity`, small here) is full; the hub's other
//! sockets keep their latency meanwhile; and the consumer, resuming after
//! the last event it read, gets every message that was sent to it.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::support::event_reader::EventReader;
use crate::support::raw::DEADLINE;
use crate::support::{RawSocket, TestHub};

/// Frames a socket may have queued: small, so the slow one is found early.
const QUEUE: u32 = 16;
/// The most messages the sender sends waiting for the close.
const MAX_SENDS: usize = 2_000;
/// Each message's text: big, so the kernel's socket buffers fill soon.
const TEXT_BYTES: usize = 32 * 1024;

async fn direct(s: &mut RawSocket, other: &str) -> String {
    let r = s
        .call(
            json!("create"),
            "agent/conversation/create",
            json!({"kind": "direct", "participants": [other]}),
        )
        .await;
    r["result"]["conversation"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string()
}

/// Sends one message and returns its id.
async fn send(s: &mut RawSocket, conversation: &str, i: usize, text: &str) -> String {
    let params = json!({"conversationId": conversation,
        "parts": [{"type": "text", "text": format!("{i} {text}")}]});
    let r = s
        .call(json!(format!("send-{i}")), "agent/message/send", params)
        .await;
    r["result"]["message"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("send {i}: {r}"))
        .to_string()
}

/// One round trip on the probe socket: a send to its peer, answered.
async fn round_trip(probe: &mut RawSocket, conversation: &str, i: usize) -> Duration {
    let started = Instant::now();
    let params =
        json!({"conversationId": conversation, "parts": [{"type": "text", "text": "ping"}]});
    let r = probe
        .call(json!(format!("probe-{i}")), "agent/message/send", params)
        .await;
    assert!(r.get("result").is_some(), "the probe's send failed: {r}");
    started.elapsed()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// The message ids of `events` (stored events of any other type skipped).
fn message_ids(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| e["payload"]["message"]["id"].as_str().map(str::to_string))
        .collect()
}

/// Everything the stalled socket still delivers once read: the stored
/// events that reached it, and its close code.
async fn drain(ws: crate::support::raw::Ws) -> (Vec<Value>, Option<u16>) {
    let mut ws = ws;
    let mut events = Vec::new();
    loop {
        let next = tokio::time::timeout(DEADLINE, ws.next())
            .await
            .expect("the stalled socket neither closed nor ended");
        match next {
            Some(Ok(Message::Text(t))) => {
                let frame: Value = serde_json::from_str(t.as_str()).expect("JSON");
                if frame.get("id").is_none() && frame["params"].get("seq").is_some() {
                    events.push(frame["params"].clone());
                }
            }
            Some(Ok(Message::Close(f))) => return (events, f.map(|f| f.code.into())),
            Some(Ok(_)) => continue,
            Some(Err(_)) | None => return (events, None),
        }
    }
}

/// The sockets of the scenario: the sender and the consumer it writes
/// to, and a probe writing to a peer that reads everything.
struct Scene {
    hub: TestHub,
    sender: RawSocket,
    to_slow: String,
    slow_key: String,
    epoch: String,
    probe: RawSocket,
    to_peer: String,
}

/// The scene, and the consumer's socket, connected and read up to now.
async fn scene(database_url: Option<String>) -> (Scene, EventReader) {
    let hub = TestHub::start_with(crate::support::hub::Options {
        database_url,
        ..TestHub::fast_options().env("SWITCHBOARD_GATEWAY__OUTBOUND_QUEUE_CAPACITY", QUEUE)
    })
    .await;
    let (_, sender_key) = hub.register_agent("sender").await;
    let (slow_id, slow_key) = hub.register_agent("slow").await;
    let (_, probe_key) = hub.register_agent("probe").await;
    let (peer_id, peer_key) = hub.register_agent("probe-peer").await;
    let url = hub.ws_url();
    let mut sender = RawSocket::connect_agent(&url, &sender_key).await;
    let mut probe = RawSocket::connect_agent(&url, &probe_key).await;
    let mut peer = RawSocket::connect_agent(&url, &peer_key).await;
    tokio::spawn(async move {
        while let crate::support::RawEvent::Text(_) = peer.next_event().await {}
    });
    let (slow, connected) = EventReader::connect(&hub, &slow_key, None).await;
    let epoch = connected["result"]["events"]["syncEpoch"]
        .as_str()
        .expect("sync epoch")
        .to_string();
    let to_slow = direct(&mut sender, &slow_id).await;
    let to_peer = direct(&mut probe, &peer_id).await;
    let scene = Scene {
        hub,
        sender,
        to_slow,
        slow_key,
        epoch,
        probe,
        to_peer,
    };
    (scene, slow)
}

/// What happened while the consumer did not read.
struct BackedUp {
    sent: Vec<String>,
    during: Vec<Duration>,
}

/// Sends to the stalled consumer, probing between sends, until the hub
/// closes it as slow; then five more, which resuming must bring too.
async fn back_up(scene: &mut Scene) -> BackedUp {
    let text = "s".repeat(TEXT_BYTES);
    let mut sent = Vec::new();
    let mut during = Vec::new();
    let hub = &scene.hub;
    let slow_closes = || hub.metric("switchboard_disconnects_total", "reason=\"slow_consumer\"");
    while slow_closes().await == 0.0 {
        let n = sent.len();
        assert!(n < MAX_SENDS, "never closed as slow after {n} sends");
        sent.push(send(&mut scene.sender, &scene.to_slow, n, &text).await);
        if sent.len() % 4 == 0 {
            during.push(round_trip(&mut scene.probe, &scene.to_peer, 1_000 + n).await);
        }
    }
    for _ in 0..5 {
        let n = sent.len();
        sent.push(send(&mut scene.sender, &scene.to_slow, n, &text).await);
    }
    BackedUp { sent, during }
}

/// The last seq of the run from 1 without a gap: where to resume.
fn contiguous_cursor(events: &[Value]) -> u64 {
    let mut cursor = 0;
    for seq in events.iter().filter_map(|e| e["seq"].as_u64()) {
        if seq == cursor + 1 {
            cursor = seq;
        }
    }
    cursor
}

/// Message ids, each at most once (a duplicate on one socket fails).
fn once_each(events: &[Value], socket: &str) -> BTreeSet<String> {
    let ids = message_ids(events);
    let unique: BTreeSet<String> = ids.iter().cloned().collect();
    assert_eq!(
        unique.len(),
        ids.len(),
        "a duplicate on the {socket} socket"
    );
    unique
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_socket_is_closed_with_4008_others_keep_their_latency_and_it_resumes_on_sqlite() {
    stall_and_resume(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_socket_is_closed_with_4008_others_keep_their_latency_and_it_resumes_on_postgres()
{
    stall_and_resume(Some(crate::support::pg::fresh_database().await)).await;
}

/// Stalls the consumer, measures the probe, drains the stalled socket,
/// resumes and compares.
async fn stall_and_resume(database_url: Option<String>) {
    let backend = if database_url.is_some() {
        "postgres"
    } else {
        "sqlite"
    };
    let (mut scene, slow) = scene(database_url).await;
    let mut before = Vec::new();
    for i in 0..30 {
        before.push(round_trip(&mut scene.probe, &scene.to_peer, i).await);
    }

    // The consumer stops reading: the test holds its socket without a read.
    let stalled = slow.socket.into_inner();
    let BackedUp { sent, during } = back_up(&mut scene).await;

    // Closed with 4008, after the frames that had reached its buffers.
    let (delivered, code) = drain(stalled).await;
    assert_eq!(code, Some(4008), "after {} sends", sent.len());

    // Latency: bounded relative to before, and never a timeout (each call
    // answered within the socket's deadline).
    assert!(
        during.len() >= 3,
        "only {} probes while backed up",
        during.len()
    );
    let (b, d) = (median(before), median(during.clone()));
    eprintln!(
        "slow consumer ({backend}): closed after {} sends of {TEXT_BYTES} bytes ({} frames reached it); \
         probe median round trip {b:?} before, {d:?} while backed up ({} probes)",
        sent.len() - 5,
        delivered.len(),
        during.len()
    );
    assert!(
        d <= b * 10 + Duration::from_millis(50),
        "the probe's median round trip went from {b:?} to {d:?} while a socket was backed up ({during:?})"
    );

    // Resume after the last event read without a gap: everything sent comes.
    let cursor = contiguous_cursor(&delivered);
    let resume = Some((cursor, scene.epoch.as_str()));
    let (mut resumed, answer) = EventReader::connect(&scene.hub, &scene.slow_key, resume).await;
    let latest = answer["result"]["events"]["latestSeq"]
        .as_u64()
        .unwrap_or_else(|| panic!("{answer}"));
    resumed.until((latest - cursor) as usize).await;
    let got: BTreeSet<String> = once_each(&delivered, "stalled")
        .into_iter()
        .chain(once_each(&resumed.events, "resumed"))
        .collect();
    let want: BTreeSet<String> = sent.iter().cloned().collect();
    let lost: Vec<&String> = want.difference(&got).collect();
    assert!(
        lost.is_empty(),
        "{} of {} messages lost: {lost:?}",
        lost.len(),
        want.len()
    );
    assert_eq!(got, want, "a message nobody sent arrived");
}
