//! Live delivery in commit order: a fan-out of concurrent sends reaches
//! live sockets without gaps, so no receiver goes back to reading the log
//! (the group commit publishes its events in commit order; see
//! src/store/commit_feed.rs).

use switchboard::client::AgentClient;
use switchboard::protocol::conversations::{
    AgentConversationCreate, ConversationCreateParams, NewConversationKind,
};

use crate::support::agents::{agent, expect_sequence, send_many};
use crate::support::hub::Options;
use crate::support::{pg, TestHub};

const RECEIVERS: usize = 20;
const MESSAGES: usize = 300;

async fn concurrent_sends_reach_live_sockets_without_gaps(options: Options) {
    let hub = TestHub::start_with(options).await;
    let sender = agent(&hub, "sender").await;
    let mut receivers = Vec::new();
    for i in 0..RECEIVERS {
        receivers.push(agent(&hub, &format!("receiver-{i}")).await);
    }
    let mut clients = Vec::new();
    let mut streams = Vec::new();
    for r in &receivers {
        let client = AgentClient::connect(&hub.base, &r.key).await.unwrap();
        streams.push(client.connection.notifications().unwrap());
        clients.push(client);
    }
    let sending = AgentClient::connect(&hub.base, &sender.key).await.unwrap();
    let group = sending
        .call::<AgentConversationCreate>(ConversationCreateParams {
            kind: NewConversationKind::Group,
            participants: receivers.iter().map(|r| r.id).collect(),
            name: Some("order".into()),
        })
        .await
        .unwrap()
        .conversation
        .id;
    // Every receiver has its first event: its socket is live and caught up.
    for rx in &mut streams {
        expect_sequence(rx, 0, 1).await;
    }
    let gaps_before = hub.metric("switchboard_event_gaps_total", "").await;

    send_many(&sending, group, 0, MESSAGES, 16).await;
    for rx in &mut streams {
        expect_sequence(rx, 1, MESSAGES as u64).await;
    }
    let replays = hub
        .metric("switchboard_events_delivered_total", "path=\"replay\"")
        .await;
    assert_eq!(
        hub.metric("switchboard_event_gaps_total", "").await,
        gaps_before,
        "a live socket was offered an event out of order ({replays} events replayed)"
    );
}

#[tokio::test]
async fn concurrent_sends_reach_live_sockets_without_gaps_on_sqlite() {
    concurrent_sends_reach_live_sockets_without_gaps(TestHub::fast_options()).await;
}

#[tokio::test]
async fn concurrent_sends_reach_live_sockets_without_gaps_on_postgres() {
    let url = pg::fresh_database().await;
    concurrent_sends_reach_live_sockets_without_gaps(Options {
        database_url: Some(url),
        ..TestHub::fast_options()
    })
    .await;
}
