//! The durable event log, continued: nothing acknowledged is lost when a
//! hub is killed or terminated mid-send, on SQLite and PostgreSQL.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::json;
use switchboard::client::AgentClient;
use switchboard::protocol::conversations::{AgentMessageSend, MessageSendParams};
use uuid::Uuid;

use crate::events::{pair, rest_all};
use crate::support::agents::{text, Agent};
use crate::support::hub::Options;
use crate::support::{pg, TestHub};

/// Sends until the hub dies; returns the ids of the sends it acknowledged.
async fn send_until_killed(
    hub: &TestHub,
    a: &Agent,
    conversation: Uuid,
) -> (
    tokio::task::JoinHandle<Vec<Uuid>>,
    tokio::sync::oneshot::Receiver<()>,
) {
    let client = AgentClient::connect(&hub.base, &a.key).await.unwrap();
    let (enough_tx, enough_rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let mut acked = Vec::new();
        let mut enough = Some(enough_tx);
        for i in 0.. {
            match client
                .call::<AgentMessageSend>(MessageSendParams {
                    conversation_id: conversation,
                    parts: text(&format!("crash-{i}")),
                    client_msg_id: None,
                    reply_to: None,
                    thread_id: None,
                    components: None,
                    card_use: None,
                })
                .await
            {
                Ok(r) => acked.push(r.message.id),
                Err(_) => break,
            }
            if acked.len() == 100 {
                if let Some(tx) = enough.take() {
                    let _ = tx.send(());
                }
            }
        }
        acked
    });
    (task, enough_rx)
}

async fn crash_and_restart(signal: i32, options: impl Fn() -> Options) {
    let dir = tempfile::tempdir().unwrap();
    let with_dir = || {
        let mut o = options();
        o.dir = Some(dir.path().to_path_buf());
        o
    };
    let mut hub = TestHub::start_with(with_dir()).await;
    let (a, b, sender, conversation) = pair(&hub).await;
    drop(sender);
    let (task, enough) = send_until_killed(&hub, &a, conversation).await;
    enough.await.unwrap();
    hub.signal(signal);
    let acked = task.await.unwrap();
    hub.wait_exit(Duration::from_secs(60)).await;
    assert!(acked.len() >= 100);

    let hub = TestHub::start_with(with_dir()).await;
    let events = rest_all(&hub, &b.key, 1000).await;
    let delivered: HashSet<Uuid> = events
        .iter()
        .filter(|e| e["type"] == json!("agent/message/received"))
        .map(|e| {
            e["payload"]["message"]["id"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    for id in &acked {
        assert!(
            delivered.contains(id),
            "acknowledged message {id} is missing after the restart"
        );
    }
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "the log has no gaps"
    );
}

#[tokio::test]
async fn nothing_acknowledged_is_lost_when_sqlite_hub_is_killed() {
    crash_and_restart(libc::SIGKILL, TestHub::fast_options).await;
}

#[tokio::test]
async fn nothing_acknowledged_is_lost_when_sqlite_hub_is_terminated() {
    crash_and_restart(libc::SIGTERM, TestHub::fast_options).await;
}

#[tokio::test]
async fn nothing_acknowledged_is_lost_when_postgres_hub_is_killed() {
    let url = pg::fresh_database().await;
    crash_and_restart(libc::SIGKILL, move || Options {
        database_url: Some(url.clone()),
        ..TestHub::fast_options()
    })
    .await;
}

#[tokio::test]
async fn nothing_acknowledged_is_lost_when_postgres_hub_is_terminated() {
    let url = pg::fresh_database().await;
    crash_and_restart(libc::SIGTERM, move || Options {
        database_url: Some(url.clone()),
        ..TestHub::fast_options()
    })
    .await;
}
