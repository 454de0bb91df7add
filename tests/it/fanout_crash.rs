//! Issue 13's crash guard: the hub is SIGKILLed during a fan-out to 100
//! members; after a restart on the same store every receiver, resuming from
//! the last seq it saw, gets every acknowledged message exactly once by event
//! id, and no event (acknowledged or not) twice. The event layout change the
//! issue plans must keep this test green on both backends.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use switchboard::client::AgentClient;
use switchboard::protocol::conversations::{
    AgentConversationCreate, AgentMessageSend, ConversationCreateParams, MessageSendParams,
    NewConversationKind,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::support::agents::{agent, text, Agent};
use crate::support::hub::Options;
use crate::support::{pg, RawEvent, RawSocket, TestHub};

const MEMBERS: usize = 100;
/// Acknowledged sends before the kill.
const ACKS_BEFORE_KILL: usize = 40;
/// Send loops at once, so sends are in flight when the hub dies.
const SENDERS: usize = 4;
/// Every tenth receiver leaves after this many messages, so its resume
/// replays stored events from before and across the crash, not only what
/// live delivery had nearly finished.
const EARLY_LEAVER_MESSAGES: usize = 10;

/// What one receiver saw over both sessions.
#[derive(Default)]
struct Seen {
    sync_epoch: String,
    /// (seq, event id, message id of a message event), in arrival order.
    events: Vec<(u64, String, Option<String>)>,
}

impl Seen {
    fn messages(&self) -> usize {
        self.events.iter().filter(|e| e.2.is_some()).count()
    }

    fn last_seq(&self) -> u64 {
        self.events.last().map_or(0, |e| e.0)
    }

    /// Keeps a stored-event notification; anything else is ignored.
    fn take(&mut self, frame: &Value) {
        let (Some(seq), None) = (frame["params"]["seq"].as_u64(), frame.get("id")) else {
            return;
        };
        let p = &frame["params"];
        let message = (p["type"] == json!("agent/message/received"))
            .then(|| p["payload"]["message"]["id"].as_str().unwrap().to_string());
        self.events
            .push((seq, p["id"].as_str().unwrap().to_string(), message));
    }
}

/// Connects (resuming after `seen`'s last seq when it has an epoch), keeping
/// events that arrive before the answer; returns the socket and `latestSeq`.
async fn connect(hub: &TestHub, key: &str, seen: &mut Seen) -> (RawSocket, u64) {
    let mut s = RawSocket::connect(&hub.ws_url()).await;
    let mut params = json!({"agentKey": key});
    if !seen.sync_epoch.is_empty() {
        params["resume"] = json!({"after": seen.last_seq(), "syncEpoch": seen.sync_epoch});
    }
    s.send_json(
        &json!({"jsonrpc": "2.0", "id": "c", "method": "agent/network/connect", "params": params}),
    )
    .await;
    loop {
        let frame = s.recv().await;
        if frame["id"] == json!("c") {
            let events = &frame["result"]["events"];
            assert!(events.is_object(), "connect failed: {frame}");
            seen.sync_epoch = events["syncEpoch"].as_str().unwrap().to_string();
            return (s, events["latestSeq"].as_u64().unwrap());
        }
        seen.take(&frame);
    }
}

/// Reads events until the socket ends (the hub was killed), or, with
/// `leave_after`, until that many messages came.
fn read_until_killed(
    mut s: RawSocket,
    mut seen: Seen,
    leave_after: Option<usize>,
) -> JoinHandle<Seen> {
    tokio::spawn(async move {
        while leave_after.is_none_or(|n| seen.messages() < n) {
            match s.next_event().await {
                RawEvent::Text(frame) => seen.take(&frame),
                RawEvent::Close(_) | RawEvent::Ended => break,
            }
        }
        seen
    })
}

/// Sends from `SENDERS` loops until the hub dies; every acknowledged
/// message id goes to `acked` as its answer arrives.
fn send_until_killed(
    client: Arc<AgentClient>,
    conversation: Uuid,
    acked: mpsc::UnboundedSender<Uuid>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let loops = (0..SENDERS).map(|l| {
            let (client, acked) = (client.clone(), acked.clone());
            async move {
                for i in 0.. {
                    let sent = client
                        .call::<AgentMessageSend>(MessageSendParams {
                            conversation_id: conversation,
                            parts: text(&format!("fan-{l}-{i}")),
                            client_msg_id: None,
                            reply_to: None,
                            thread_id: None,
                            components: None,
                            card_use: None,
                        })
                        .await;
                    match sent {
                        Ok(r) => {
                            let _ = acked.send(r.message.id);
                        }
                        Err(_) => return,
                    }
                }
            }
        });
        futures_util::future::join_all(loops).await;
    })
}

/// The group of the sender and `MEMBERS` receivers, every receiver
/// connected and reading before the group exists.
async fn group_with_readers(
    hub: &TestHub,
) -> (Arc<AgentClient>, Uuid, Vec<Agent>, Vec<JoinHandle<Seen>>) {
    let sender = agent(hub, "sender").await;
    let mut members = Vec::with_capacity(MEMBERS);
    let mut readers = Vec::with_capacity(MEMBERS);
    for i in 0..MEMBERS {
        let member = agent(hub, &format!("member-{i}")).await;
        let mut seen = Seen::default();
        let (socket, _) = connect(hub, &member.key, &mut seen).await;
        let leave_after = (i % 10 == 0).then_some(EARLY_LEAVER_MESSAGES);
        readers.push(read_until_killed(socket, seen, leave_after));
        members.push(member);
    }
    let client = Arc::new(AgentClient::connect(&hub.base, &sender.key).await.unwrap());
    let group = client
        .call::<AgentConversationCreate>(ConversationCreateParams {
            kind: NewConversationKind::Group,
            participants: members.iter().map(|m| m.id).collect(),
            name: Some("fan-out".into()),
        })
        .await
        .unwrap()
        .conversation
        .id;
    (client, group, members, readers)
}

/// Resumes after the last seq seen and reads up to the log's end.
async fn resume_to_end(hub: &TestHub, member: &Agent, mut seen: Seen) -> Seen {
    let before = seen.last_seq();
    let (mut s, latest) = connect(hub, &member.key, &mut seen).await;
    assert!(
        latest >= before,
        "the log ends at {latest} after the restart, but seq {before} was delivered before it"
    );
    while seen.last_seq() < latest {
        let frame = s.recv().await;
        seen.take(&frame);
    }
    seen
}

/// Each acknowledged message exactly once, each event id once, and the seqs
/// of both sessions together are 1..=end with no gap and no repeat.
fn check_exactly_once(member: usize, seen: &Seen, acked: &HashSet<Uuid>) {
    let seqs: Vec<u64> = seen.events.iter().map(|e| e.0).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "member {member}: seqs across the restart"
    );
    let mut ids = HashSet::new();
    let mut messages: HashMap<&str, usize> = HashMap::new();
    for (seq, id, message) in &seen.events {
        assert!(
            ids.insert(id.as_str()),
            "member {member}: event {id} twice (seq {seq})"
        );
        if let Some(m) = message {
            *messages.entry(m.as_str()).or_default() += 1;
        }
    }
    for (m, n) in &messages {
        assert_eq!(*n, 1, "member {member}: message {m} delivered {n} times");
    }
    for m in acked {
        assert!(
            messages.contains_key(m.to_string().as_str()),
            "member {member}: acknowledged message {m} never arrived"
        );
    }
}

async fn killed_mid_fanout(options: impl Fn() -> Options) {
    let mut hub = TestHub::start_with(options()).await;
    let (client, group, members, readers) = group_with_readers(&hub).await;
    let (acked_tx, mut acked_rx) = mpsc::unbounded_channel();
    let sending = send_until_killed(client, group, acked_tx);
    let mut acked = HashSet::new();
    while acked.len() < ACKS_BEFORE_KILL {
        let id = tokio::time::timeout(Duration::from_secs(30), acked_rx.recv())
            .await
            .expect("acknowledgements within the deadline")
            .expect("senders still running");
        acked.insert(id);
    }
    hub.signal(libc::SIGKILL);
    hub.wait_exit(Duration::from_secs(30)).await;
    tokio::time::timeout(Duration::from_secs(30), sending)
        .await
        .expect("senders stop once the hub is gone")
        .unwrap();
    while let Ok(id) = acked_rx.try_recv() {
        acked.insert(id);
    }
    let mut seen = Vec::with_capacity(MEMBERS);
    for r in readers {
        seen.push(
            tokio::time::timeout(Duration::from_secs(30), r)
                .await
                .expect("receivers see the socket end")
                .unwrap(),
        );
    }

    let hub = TestHub::start_with(options()).await;
    let resumed = seen
        .into_iter()
        .zip(&members)
        .map(|(s, m)| resume_to_end(&hub, m, s));
    let resumed = futures_util::future::join_all(resumed).await;
    for (i, s) in resumed.iter().enumerate() {
        check_exactly_once(i, s, &acked);
    }
}

#[tokio::test]
async fn every_acknowledged_fanout_arrives_once_after_sqlite_hub_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    killed_mid_fanout(move || Options {
        dir: Some(path.clone()),
        ..TestHub::fast_options()
    })
    .await;
}

#[tokio::test]
async fn every_acknowledged_fanout_arrives_once_after_postgres_hub_is_killed() {
    let url = pg::fresh_database().await;
    killed_mid_fanout(move || Options {
        database_url: Some(url.clone()),
        ..TestHub::fast_options()
    })
    .await;
}
