//! Direct and group conversations between agents, and message history.

use serde_json::json;
use switchboard::client::AgentClient;
use switchboard::domain::message::Part;
use switchboard::protocol::conversations::*;
use uuid::Uuid;

use crate::support::agents::{agent, direct, expect_sequence, send, text};
use crate::support::TestHub;

fn tag(err: &switchboard::client::ClientError) -> String {
    err.rpc()
        .and_then(|e| e.tag.clone())
        .unwrap_or_else(|| format!("{err}"))
}

#[tokio::test]
async fn direct_conversations_are_unique_per_pair_and_deliver_to_the_other_agent() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let a = agent(&hub, "a").await;
    let b = agent(&hub, "b").await;
    let ca = AgentClient::connect(&hub.base, &a.key).await.unwrap();
    let cb = AgentClient::connect(&hub.base, &b.key).await.unwrap();
    let mut rx = cb.connection.notifications().unwrap();
    let id = direct(&ca, b.id).await;
    let created = expect_sequence(&mut rx, 0, 1).await;
    assert_eq!(created[0]["type"], json!("agent/conversation/created"));
    assert_eq!(created[0]["payload"]["conversation"]["id"], json!(id));
    // Either side asking again gets the same conversation.
    let again = cb
        .call::<AgentConversationCreate>(ConversationCreateParams {
            kind: NewConversationKind::Direct,
            participants: vec![a.id],
            name: None,
        })
        .await
        .unwrap();
    assert_eq!(again.conversation.id, id);
    assert!(!again.created);

    let sent = send(&ca, id, "hello").await;
    assert_eq!(sent.delivery.state, DeliveryState::Forwarded);
    assert_eq!(sent.delivery.recipients, Some(1));
    assert_eq!(sent.message.seq, 1);
    let got = expect_sequence(&mut rx, 1, 1).await;
    assert_eq!(
        got[0]["payload"]["message"]["parts"],
        json!([{"type": "text", "text": "hello"}])
    );
    assert_eq!(got[0]["payload"]["message"]["senderId"], json!(a.id));
    assert_eq!(got[0]["audience"], json!(b.id));
}

#[tokio::test]
async fn groups_fan_out_to_everyone_but_the_sender() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let a = agent(&hub, "a").await;
    let mut others = Vec::new();
    for i in 0..4 {
        others.push(agent(&hub, &format!("g{i}")).await);
    }
    let ca = AgentClient::connect(&hub.base, &a.key).await.unwrap();
    let group = ca
        .call::<AgentConversationCreate>(ConversationCreateParams {
            kind: NewConversationKind::Group,
            participants: others.iter().map(|o| o.id).collect(),
            name: Some("pack".into()),
        })
        .await
        .unwrap();
    assert_eq!(group.conversation.participants.len(), 5);
    let sent = send(&ca, group.conversation.id, "howl").await;
    assert_eq!(sent.delivery.recipients, Some(4));
    for o in &others {
        let c = AgentClient::connect(&hub.base, &o.key).await.unwrap();
        let mut rx = c.connection.notifications().unwrap();
        let events = expect_sequence(&mut rx, 0, 2).await;
        assert_eq!(
            events[1]["payload"]["message"]["parts"][0]["text"],
            json!("howl")
        );
    }
    // The sender's own log holds nothing: it is not a recipient.
    let (status, body) = {
        let r = hub
            .http
            .get(format!("{}/api/v1/events", hub.base))
            .bearer_auth(&a.key)
            .send()
            .await
            .unwrap();
        (
            r.status().as_u16(),
            r.json::<serde_json::Value>().await.unwrap(),
        )
    };
    assert_eq!(status, 200);
    assert_eq!(body["events"], json!([]));
}

#[tokio::test]
async fn bad_conversation_requests_are_refused_clearly() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let a = agent(&hub, "a").await;
    let b = agent(&hub, "b").await;
    let c = agent(&hub, "c").await;
    let ca = AgentClient::connect(&hub.base, &a.key).await.unwrap();
    let create = |kind, participants: Vec<Uuid>, name: Option<&str>| ConversationCreateParams {
        kind,
        participants,
        name: name.map(str::to_string),
    };
    for (params, expected) in [
        (
            create(NewConversationKind::Direct, vec![], None),
            "InvalidParamsError",
        ),
        (
            create(NewConversationKind::Direct, vec![b.id, c.id], None),
            "InvalidParamsError",
        ),
        (
            create(NewConversationKind::Direct, vec![a.id], None),
            "InvalidParamsError",
        ),
        (
            create(NewConversationKind::Group, vec![b.id, b.id], None),
            "InvalidParamsError",
        ),
        (
            create(NewConversationKind::Direct, vec![b.id], Some("named")),
            "InvalidParamsError",
        ),
        (
            create(NewConversationKind::Group, vec![Uuid::new_v4()], None),
            "NotFoundError",
        ),
    ] {
        let err = ca
            .call::<AgentConversationCreate>(params)
            .await
            .unwrap_err();
        assert_eq!(tag(&err), expected);
    }

    // b and c talk; a is outside: their conversation answers like a missing one.
    let cb = AgentClient::connect(&hub.base, &b.key).await.unwrap();
    let private = direct(&cb, c.id).await;
    let missing = Uuid::now_v7();
    for id in [private, missing] {
        let err = ca
            .call::<AgentConversationGet>(ConversationGetParams {
                conversation_id: id,
            })
            .await
            .unwrap_err();
        assert_eq!(err.rpc().unwrap().message, "conversation not found");
        let err = ca
            .call::<AgentMessageSend>(MessageSendParams {
                conversation_id: id,
                parts: text("let me in"),
                client_msg_id: None,
                reply_to: None,
                thread_id: None,
                components: None,
                card_use: None,
            })
            .await
            .unwrap_err();
        assert_eq!(err.rpc().unwrap().message, "conversation not found");
    }

    let mine = direct(&ca, b.id).await;
    for (parts, fragment) in [
        (vec![], "parts must not be empty"),
        (
            vec![Part::Text {
                text: String::new(),
            }],
            "parts[0].text",
        ),
        (
            vec![Part::Data {
                data: json!({"a": null}),
                mime_type: None,
            }],
            "parts[0].data",
        ),
        (
            vec![Part::Text {
                text: "x".repeat(70_000),
            }],
            "messages.max_bytes",
        ),
    ] {
        let err = ca
            .call::<AgentMessageSend>(MessageSendParams {
                conversation_id: mine,
                parts,
                client_msg_id: None,
                reply_to: None,
                thread_id: None,
                components: None,
                card_use: None,
            })
            .await
            .unwrap_err();
        let e = err.rpc().unwrap();
        assert_eq!(e.tag.as_deref(), Some("InvalidParamsError"));
        assert!(
            e.message.contains(fragment),
            "{} lacks {fragment}",
            e.message
        );
    }
    let err = ca
        .call::<AgentMessageSend>(MessageSendParams {
            conversation_id: mine,
            parts: text("reply"),
            client_msg_id: None,
            reply_to: Some(Uuid::now_v7()),
            thread_id: None,
            components: None,
            card_use: None,
        })
        .await
        .unwrap_err();
    assert!(err.rpc().unwrap().message.contains("replyTo"));
}

#[tokio::test]
async fn history_pages_in_both_directions() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let a = agent(&hub, "a").await;
    let b = agent(&hub, "b").await;
    let ca = AgentClient::connect(&hub.base, &a.key).await.unwrap();
    let cb = AgentClient::connect(&hub.base, &b.key).await.unwrap();
    let id = direct(&ca, b.id).await;
    let first = send(&ca, id, "m1").await;
    for i in 2..=25 {
        send(&ca, id, &format!("m{i}")).await;
    }
    let reply = cb
        .call::<AgentMessageSend>(MessageSendParams {
            conversation_id: id,
            parts: text("re: m1"),
            client_msg_id: None,
            reply_to: Some(first.message.id),
            thread_id: None,
            components: None,
            card_use: None,
        })
        .await
        .unwrap();
    assert_eq!(reply.message.reply_to, Some(first.message.id));

    let list = |after, before, limit| MessageListParams {
        conversation_id: id,
        after,
        before,
        limit,
        thread_id: None,
    };
    let page = cb
        .call::<AgentMessageList>(list(None, None, Some(10)))
        .await
        .unwrap();
    assert_eq!(
        page.messages.iter().map(|m| m.seq).collect::<Vec<_>>(),
        (1..=10).collect::<Vec<_>>()
    );
    assert!(page.has_more);
    let page = cb
        .call::<AgentMessageList>(list(Some(20), None, Some(10)))
        .await
        .unwrap();
    assert_eq!(
        page.messages.iter().map(|m| m.seq).collect::<Vec<_>>(),
        (21..=26).collect::<Vec<_>>()
    );
    assert!(!page.has_more);
    let page = cb
        .call::<AgentMessageList>(list(None, Some(26), Some(10)))
        .await
        .unwrap();
    assert_eq!(
        page.messages.iter().map(|m| m.seq).collect::<Vec<_>>(),
        (16..=25).collect::<Vec<_>>()
    );
    assert!(page.has_more);
    let page = cb
        .call::<AgentMessageList>(list(None, Some(4), Some(10)))
        .await
        .unwrap();
    assert_eq!(
        page.messages.iter().map(|m| m.seq).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert!(!page.has_more);
    let err = cb
        .call::<AgentMessageList>(list(Some(1), Some(4), None))
        .await
        .unwrap_err();
    assert_eq!(tag(&err), "InvalidParamsError");
    let err = cb
        .call::<AgentMessageList>(list(None, None, Some(0)))
        .await
        .unwrap_err();
    assert_eq!(tag(&err), "InvalidParamsError");

    let listed = ca
        .call::<AgentConversationList>(ConversationListParams::default())
        .await
        .unwrap();
    assert_eq!(listed.conversations.len(), 1);
    assert_eq!(listed.conversations[0].last_message_seq, 26);
}

/// Every part error names the exact member, both in the message and in
/// `data.field`.
#[tokio::test]
async fn part_errors_name_the_exact_path() {
    let hub = TestHub::start().await;
    let a = agent(&hub, "a").await;
    let b = agent(&hub, "b").await;
    let ca = AgentClient::connect(&hub.base, &a.key).await.unwrap();
    let conversation = direct(&ca, b.id).await;
    let mut s = crate::support::RawSocket::connect_agent(&hub.ws_url(), &a.key).await;
    let ok = json!({"type": "text", "text": "fine"});
    for (i, (parts, field)) in [
        (
            json!([{"type": "text", "text": "a", "extra": 1}]),
            "parts[0].extra",
        ),
        (json!([ok, {"type": "text", "text": 5}]), "parts[1].text"),
        (json!([{"type": "text"}]), "parts[0].text"),
        (
            json!([{"type": "text", "text": "a", "data": {}}]),
            "parts[0].data",
        ),
        (
            json!([{"type": "data", "data": 1, "text": "a"}]),
            "parts[0].text",
        ),
        (json!([ok, {"type": "image", "url": "x"}]), "parts[1].type"),
        (json!([{"text": "a"}]), "parts[0].type"),
        (json!([ok, "text"]), "parts[1]"),
        (json!([ok, {"type": "text", "text": ""}]), "parts[1].text"),
        (
            json!([{"type": "data", "data": {"a": null}}]),
            "parts[0].data",
        ),
        (
            json!([{"type": "data", "data": 1, "mimeType": ""}]),
            "parts[0].mimeType",
        ),
        (json!([]), "parts"),
    ]
    .into_iter()
    .enumerate()
    {
        let f = s
            .call(
                json!(i),
                "agent/message/send",
                json!({"conversationId": conversation, "parts": parts}),
            )
            .await;
        let e = &f["error"];
        assert_eq!(e["_tag"], json!("InvalidParamsError"), "{parts}: {f}");
        assert_eq!(e["data"]["field"], json!(field), "{parts}: {f}");
        let message = e["message"].as_str().unwrap();
        let named = message
            .strip_prefix("Invalid params: ")
            .and_then(|m| m.strip_prefix(field))
            .unwrap_or_else(|| panic!("{parts}: {message} does not start with {field}"));
        assert!(
            named.starts_with(' ') || named.starts_with(':'),
            "{parts}: {message} names more than {field}"
        );
    }
}

/// `data` nested `depth` containers deep: `{"d": {"d": … 1}}`.
fn nested(depth: usize) -> serde_json::Value {
    (0..depth).fold(json!(1), |inner, _| json!({ "d": inner }))
}

/// The deepest data part the hub accepts still fits, inside its envelope,
/// within the parser limit of every way out: live and replayed event frames,
/// the message list, the REST catch-up page. One level more is refused at
/// send, naming the part.
#[tokio::test]
async fn the_deepest_accepted_data_part_reaches_sdk_clients_on_every_way_out() {
    the_deepest_accepted_data_part_reaches_sdk_clients_on(crate::support::hub::Options::default())
        .await;
}

#[tokio::test]
async fn the_deepest_accepted_data_part_reaches_sdk_clients_on_every_way_out_on_postgres() {
    the_deepest_accepted_data_part_reaches_sdk_clients_on(crate::support::hub::Options {
        database_url: Some(crate::support::pg::fresh_database().await),
        ..Default::default()
    })
    .await;
}

async fn the_deepest_accepted_data_part_reaches_sdk_clients_on(
    options: crate::support::hub::Options,
) {
    use switchboard::domain::message::{envelope_depth, nesting, JSON_MAX_NESTING, MAX_DATA_DEPTH};
    const DEEPEST: usize = 120;
    assert_eq!(MAX_DATA_DEPTH, DEEPEST);
    let hub = TestHub::start_with(options).await;
    let a = agent(&hub, "a").await;
    let b = agent(&hub, "b").await;
    let ca = AgentClient::connect(&hub.base, &a.key).await.unwrap();
    let cb = AgentClient::connect(&hub.base, &b.key).await.unwrap();
    let mut live = cb.connection.notifications().unwrap();
    let conversation = direct(&ca, b.id).await;
    let send = |data: serde_json::Value| {
        ca.call::<AgentMessageSend>(MessageSendParams {
            conversation_id: conversation,
            parts: vec![Part::Data {
                data,
                mime_type: None,
            }],
            client_msg_id: None,
            reply_to: None,
            thread_id: None,
            components: None,
            card_use: None,
        })
    };

    let err = send(nested(DEEPEST + 1)).await.unwrap_err();
    let e = err.rpc().unwrap();
    assert_eq!(e.tag.as_deref(), Some("InvalidParamsError"));
    assert_eq!(
        e.data.as_deref().unwrap()["field"],
        json!("parts[0].data"),
        "{e:?}"
    );
    assert!(
        e.message
            .starts_with("Invalid params: parts[0].data is nested")
            && e.message.contains("messages.max_data_depth"),
        "{}",
        e.message
    );

    let sent = send(nested(DEEPEST)).await.unwrap();
    let deepest = Part::Data {
        data: nested(DEEPEST),
        mime_type: None,
    };
    assert_eq!(sent.message.parts, vec![deepest.clone()]);
    let parts_of = |envelope: &serde_json::Value| -> Vec<Part> {
        serde_json::from_value(envelope["payload"]["message"]["parts"].clone()).unwrap()
    };
    let received = crate::support::agents::next_of(&mut live, "agent/message/received").await;
    assert_eq!(parts_of(&received), vec![deepest.clone()], "live");
    // The notification's params are the envelope; the frame adds one level.
    assert_eq!(
        nesting(&received) + 1,
        DEEPEST + envelope_depth::EVENT_FRAME,
        "the event frame's envelope depth is what the budget assumes"
    );
    let seq = received["seq"].as_u64().unwrap();
    drop(cb);

    let replaying = AgentClient::connect_resuming(
        &hub.base,
        &b.key,
        Some(switchboard::protocol::events::Resume {
            after: seq - 1,
            sync_epoch: received_epoch(&hub, &b.key).await,
        }),
    )
    .await
    .unwrap();
    let mut replay = replaying.connection.notifications().unwrap();
    let replayed = crate::support::agents::next_of(&mut replay, "agent/message/received").await;
    assert_eq!(parts_of(&replayed), vec![deepest.clone()], "replay");

    let history = replaying
        .call::<AgentMessageList>(MessageListParams {
            conversation_id: conversation,
            after: None,
            before: None,
            limit: None,
            thread_id: None,
        })
        .await
        .unwrap();
    assert_eq!(history.messages[0].parts, vec![deepest.clone()], "history");

    // The REST page, read with the same parser (and limit) as the SDK.
    let text = hub
        .http
        .get(format!("{}/api/v1/events?after={}", hub.base, seq - 1))
        .bearer_auth(&b.key)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let page: serde_json::Value = serde_json::from_str(&text).expect("the page parses");
    assert_eq!(
        nesting(&page),
        JSON_MAX_NESTING,
        "the catch-up page is the deepest way out, exactly at the parsers' limit"
    );
    assert_eq!(parts_of(&page["events"][0]), vec![deepest], "catch-up");
}

async fn received_epoch(hub: &TestHub, key: &str) -> String {
    let page: serde_json::Value = hub
        .http
        .get(format!("{}/api/v1/events?limit=1&after=0", hub.base))
        .bearer_auth(key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    page["syncEpoch"].as_str().unwrap().to_string()
}
