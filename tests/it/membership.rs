//! The hub's conversation membership cache (ADR 0019), end to end: a
//! participant the app adds can send and receive at once, a non-participant
//! is refused like a missing conversation, with the cache on, off (0) and so
//! small that every conversation evicts the other.

use serde_json::{json, Value};
use switchboard::client::{AgentClient, AppClient, ClientError};
use switchboard::protocol::conversations::*;
use switchboard::protocol::tasks::*;
use uuid::Uuid;

use crate::support::agents::{agent, next_of, send, text};
use crate::support::hub::Options;
use crate::support::TestHub;

fn options(cache_entries: usize) -> Options {
    TestHub::fast_options().env(
        "SWITCHBOARD_MESSAGES__MEMBERSHIP_CACHE_ENTRIES",
        cache_entries,
    )
}

fn manifest() -> Value {
    json!({
        "name": "Host",
        "description": "Adds agents to a conversation",
        "limits": { "maxParticipants": 4 },
        "hooks": {
            "task_create": {"kind": "accept"},
            "message_authorize": {"kind": "forwardAllExceptSender"},
            "dispatch_authorize": {"kind": "grant"}
        }
    })
}

#[tokio::test]
async fn an_added_participant_sends_and_receives_at_once_with_the_cache() {
    an_added_participant_sends_and_receives_at_once(options(10_000)).await;
}

#[tokio::test]
async fn an_added_participant_sends_and_receives_at_once_without_the_cache() {
    an_added_participant_sends_and_receives_at_once(options(0)).await;
}

#[tokio::test]
async fn an_added_participant_sends_and_receives_at_once_with_one_entry() {
    an_added_participant_sends_and_receives_at_once(options(1)).await;
}

fn tag(err: &ClientError) -> String {
    err.rpc()
        .and_then(|e| e.tag.clone())
        .unwrap_or_else(|| format!("{err}"))
}

/// `c` may not write to, read or type in the conversation: each answer is
/// the missing-conversation one.
async fn refused(c: &AgentClient, conversation: Uuid) {
    let errs = [
        c.call::<AgentMessageSend>(MessageSendParams {
            conversation_id: conversation,
            parts: text("let me in"),
            client_msg_id: None,
            reply_to: None,
            thread_id: None,
            components: None,
            card_use: None,
        })
        .await
        .map(|_| ())
        .unwrap_err(),
        c.call::<AgentMessageList>(history(conversation))
            .await
            .map(|_| ())
            .unwrap_err(),
        c.call::<AgentTypingSend>(TypingSendParams {
            conversation_id: conversation,
        })
        .await
        .map(|_| ())
        .unwrap_err(),
    ];
    for err in errs {
        assert_eq!(tag(&err), "NotFoundError", "{err}");
        assert_eq!(err.rpc().unwrap().message, "conversation not found");
    }
}

async fn an_added_participant_sends_and_receives_at_once(options: Options) {
    let hub = TestHub::start_with(options).await;
    let (app_id, app_key) = hub.register_app(&manifest()).await;
    let (a, b, c) = (
        agent(&hub, "a").await,
        agent(&hub, "b").await,
        agent(&hub, "c").await,
    );
    let ca = AgentClient::connect(&hub.base, &a.key).await.unwrap();
    let cb = AgentClient::connect(&hub.base, &b.key).await.unwrap();
    let cc = AgentClient::connect(&hub.base, &c.key).await.unwrap();
    let (mut rx_a, mut rx_b, mut rx_c) = (
        ca.connection.notifications().unwrap(),
        cb.connection.notifications().unwrap(),
        cc.connection.notifications().unwrap(),
    );
    let task = ca
        .call::<AgentTaskRequest>(TaskRequestParams {
            app_id: app_id.parse().unwrap(),
            invited_agent_ids: vec![b.id, c.id],
            initial_conversation: None,
        })
        .await
        .unwrap()
        .task;
    let app = AppClient::builder(&hub.base, &app_key)
        .connect()
        .await
        .unwrap();
    let conversation = app
        .call::<AppConversationCreate>(AppConversationCreateParams {
            task_id: task.id,
            name: "Pair".into(),
            participants: vec![a.id, b.id],
        })
        .await
        .unwrap()
        .conversation
        .id;
    // A group outside the task, which c is never part of.
    let group = ca
        .call::<AgentConversationCreate>(ConversationCreateParams {
            kind: NewConversationKind::Group,
            participants: vec![b.id],
            name: None,
        })
        .await
        .unwrap()
        .conversation
        .id;

    // Sends fill the cache (where there is one); c is refused in both.
    send(&ca, conversation, "before").await;
    assert_eq!(text_of(&next_of(&mut rx_b, RECEIVED).await), "before");
    let to_group = send(&ca, group, "group only").await;
    assert_eq!(to_group.delivery.recipients, Some(1));
    assert_eq!(text_of(&next_of(&mut rx_b, RECEIVED).await), "group only");
    refused(&cc, conversation).await;
    refused(&cc, group).await;

    // Once the add has answered, c writes and reads like any participant.
    app.call::<AppConversationAdd>(AppConversationAddParams {
        conversation_id: conversation,
        participants: vec![c.id],
    })
    .await
    .unwrap();
    let sent = send(&cc, conversation, "c is here").await;
    assert_eq!(sent.delivery.recipients, Some(2));
    assert_eq!(text_of(&next_of(&mut rx_a, RECEIVED).await), "c is here");
    assert_eq!(text_of(&next_of(&mut rx_b, RECEIVED).await), "c is here");
    send(&ca, conversation, "welcome").await;
    assert_eq!(text_of(&next_of(&mut rx_c, RECEIVED).await), "welcome");
    let history = cc
        .call::<AgentMessageList>(history(conversation))
        .await
        .unwrap();
    assert_eq!(
        history.messages.len(),
        2,
        "c sees what it sent and received"
    );
    // The group is still closed to c.
    refused(&cc, group).await;
}

/// An entry that missed its invalidation (here: another writer adds a
/// participant straight into the database, as another node would) heals on
/// the first refused call instead of refusing a member until it is evicted.
#[tokio::test]
async fn a_stale_entry_is_checked_against_the_store_before_refusing() {
    let hub = TestHub::start_with(options(10_000)).await;
    let (a, b, c) = (
        agent(&hub, "a").await,
        agent(&hub, "b").await,
        agent(&hub, "c").await,
    );
    let ca = AgentClient::connect(&hub.base, &a.key).await.unwrap();
    let cc = AgentClient::connect(&hub.base, &c.key).await.unwrap();
    let group = ca
        .call::<AgentConversationCreate>(ConversationCreateParams {
            kind: NewConversationKind::Group,
            participants: vec![b.id],
            name: None,
        })
        .await
        .unwrap()
        .conversation
        .id;
    send(&ca, group, "fills the cache").await;
    refused(&cc, group).await;

    let mut config = switchboard::config::Config::default();
    config.server.data_dir = hub.dir.path().join("data");
    let store = switchboard::store::open(&config).await.unwrap();
    store
        .add_participants(group, &[c.id], &[], switchboard::domain::now_millis())
        .await
        .unwrap();
    let sent = send(&cc, group, "let in by the store").await;
    assert_eq!(sent.delivery.recipients, Some(2));
}

fn history(conversation: Uuid) -> MessageListParams {
    MessageListParams {
        conversation_id: conversation,
        after: None,
        before: None,
        limit: None,
        thread_id: None,
    }
}

const RECEIVED: &str = "agent/message/received";

fn text_of(event: &Value) -> &str {
    event["payload"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {event}"))
}
