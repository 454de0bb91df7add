//! The durable event log: replay, live delivery, resume, REST catch-up,
//! retention, crash safety and idempotency, against real hubs.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchboard::client::AgentClient;
use switchboard::protocol::conversations::{
    AgentMessageSend, AgentTypingSend, MessageSendParams, TypingSendParams,
};
use switchboard::protocol::events::{AckParams, AgentEventAck, Resume};
use uuid::Uuid;

use crate::support::agents::{
    agent, direct, expect_sequence, next_of, send, send_many, text, Agent,
};
use crate::support::event_reader::rest_events;
use crate::support::TestHub;

/// Reads every event through REST pages of `page`.
pub(crate) async fn rest_all(hub: &TestHub, key: &str, page: u32) -> Vec<Value> {
    let mut after = 0;
    let mut out = Vec::new();
    loop {
        let (status, body) = rest_events(hub, key, &format!("after={after}&limit={page}")).await;
        assert_eq!(status, 200, "{body}");
        let events = body["events"].as_array().unwrap().clone();
        if events.is_empty() {
            return out;
        }
        after = body["nextAfter"].as_u64().unwrap();
        out.extend(events);
    }
}

pub(crate) async fn pair(hub: &TestHub) -> (Agent, Agent, AgentClient, Uuid) {
    let a = agent(hub, "sender").await;
    let b = agent(hub, "receiver").await;
    let client = AgentClient::connect(&hub.base, &a.key).await.unwrap();
    let conversation = direct(&client, b.id).await;
    (a, b, client, conversation)
}

#[tokio::test]
async fn ten_thousand_events_while_disconnected_arrive_by_resume_and_by_rest() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let (_, b, sender, conversation) = pair(&hub).await;
    let n = 10_000u64;
    send_many(&sender, conversation, 0, n as usize, 32).await;

    let epoch = {
        let probe = AgentClient::connect_resuming(&hub.base, &b.key, None)
            .await
            .unwrap();
        probe.session.events.sync_epoch.clone()
    };
    let started = Instant::now();
    let receiver = AgentClient::connect_resuming(
        &hub.base,
        &b.key,
        Some(Resume {
            after: 0,
            sync_epoch: epoch,
        }),
    )
    .await
    .unwrap();
    let mut rx = receiver.connection.notifications().unwrap();
    // The first event is the conversation being opened, then every message.
    let events = expect_sequence(&mut rx, 0, n + 1).await;
    eprintln!("resume of {} events took {:?}", n + 1, started.elapsed());
    assert_eq!(events[0]["type"], json!("agent/conversation/created"));
    let bodies: HashSet<String> = events[1..]
        .iter()
        .map(|e| {
            e["payload"]["message"]["parts"][0]["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(bodies.len(), n as usize, "every message once");
    let message_seqs: Vec<u64> = events[1..]
        .iter()
        .map(|e| e["payload"]["message"]["seq"].as_u64().unwrap())
        .collect();
    assert!(
        message_seqs.windows(2).all(|w| w[0] < w[1]),
        "messages in conversation order"
    );

    let via_rest = rest_all(&hub, &b.key, 1000).await;
    assert_eq!(via_rest.len(), events.len());
    for (a, b) in via_rest.iter().zip(&events) {
        assert_eq!(a, b, "REST catch-up carries the same envelopes");
    }
}

#[tokio::test]
async fn dropping_the_socket_at_random_points_loses_and_doubles_nothing() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let (_, b, sender, conversation) = pair(&hub).await;
    let total = 600u64 + 1; // messages plus the conversation event
    let sending = tokio::spawn(async move {
        send_many(&sender, conversation, 0, 600, 4).await;
        sender
    });
    let mut received: Vec<Value> = Vec::new();
    let mut seed: u64 = 0x5eed;
    let mut epoch: Option<String> = None;
    while (received.len() as u64) < total {
        let after = received.last().map_or(0, |e| e["seq"].as_u64().unwrap());
        let resume = epoch.clone().map(|sync_epoch| Resume { after, sync_epoch });
        let client = AgentClient::connect_resuming(&hub.base, &b.key, resume)
            .await
            .unwrap();
        epoch = Some(client.session.events.sync_epoch.clone());
        assert_eq!(client.session.events.start_after, after);
        let mut rx = client.connection.notifications().unwrap();
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let take = 1 + (seed >> 33) % 120;
        let want = take.min(total - received.len() as u64);
        received.extend(expect_sequence(&mut rx, after, want).await);
        drop(client); // at a random point of the stream
    }
    sending.await.unwrap();
    let seqs: Vec<u64> = received
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=total).collect::<Vec<_>>());
    let ids: HashSet<&str> = received.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), total as usize);
}

#[tokio::test]
async fn live_delivery_reaches_every_socket_of_the_audience() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let (_, b, sender, conversation) = pair(&hub).await;
    let first = AgentClient::connect(&hub.base, &b.key).await.unwrap();
    let second = AgentClient::connect(&hub.base, &b.key).await.unwrap();
    let mut rx1 = first.connection.notifications().unwrap();
    let mut rx2 = second.connection.notifications().unwrap();
    // Both start after the acked seq (0): the conversation event comes first.
    expect_sequence(&mut rx1, 0, 1).await;
    expect_sequence(&mut rx2, 0, 1).await;
    send_many(&sender, conversation, 0, 50, 8).await;
    expect_sequence(&mut rx1, 1, 50).await;
    expect_sequence(&mut rx2, 1, 50).await;
}

#[tokio::test]
async fn acknowledged_events_are_not_delivered_again() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let (_, b, sender, conversation) = pair(&hub).await;
    send_many(&sender, conversation, 0, 9, 1).await;
    let client = AgentClient::connect(&hub.base, &b.key).await.unwrap();
    let mut rx = client.connection.notifications().unwrap();
    expect_sequence(&mut rx, 0, 10).await;
    let acked = client
        .call::<AgentEventAck>(AckParams { seq: 7 })
        .await
        .unwrap();
    assert_eq!(acked.acked_seq, 7);
    let lower = client
        .call::<AgentEventAck>(AckParams { seq: 3 })
        .await
        .unwrap();
    assert_eq!(lower.acked_seq, 7, "an ack never moves back");
    let err = client
        .call::<AgentEventAck>(AckParams { seq: 99 })
        .await
        .unwrap_err();
    assert_eq!(
        err.rpc().unwrap().tag.as_deref(),
        Some("InvalidParamsError")
    );
    drop(client);
    let again = AgentClient::connect(&hub.base, &b.key).await.unwrap();
    assert_eq!(again.session.events.start_after, 7);
    assert_eq!(again.session.events.acked_seq, 7);
    let mut rx = again.connection.notifications().unwrap();
    expect_sequence(&mut rx, 7, 3).await;
}

#[tokio::test]
async fn stale_cursors_and_foreign_epochs_get_an_explicit_resync() {
    let hub = TestHub::start_with(
        TestHub::fast_options()
            .env("SWITCHBOARD_EVENTS__RETENTION_MAX_PER_AUDIENCE", 5)
            .env("SWITCHBOARD_EVENTS__PRUNE_INTERVAL_MS", 50),
    )
    .await;
    let (_, b, sender, conversation) = pair(&hub).await;
    send_many(&sender, conversation, 0, 20, 1).await;
    // Wait for the pruner: the REST cursor 0 turns into a resync answer.
    let deadline = Instant::now() + Duration::from_secs(30);
    let gone = loop {
        let (status, body) = rest_events(&hub, &b.key, "after=0").await;
        // A prune may run between two sends; wait for the one after the last.
        if status == 410 && body["error"]["oldestSeq"] == json!(17) {
            break body;
        }
        assert!(Instant::now() < deadline, "events were never pruned");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(gone["error"]["code"], json!("resync_required"));
    assert_eq!(gone["error"]["oldestSeq"], json!(17));
    assert_eq!(gone["error"]["latestSeq"], json!(21));
    let epoch = gone["error"]["syncEpoch"].as_str().unwrap().to_string();

    let err = AgentClient::connect_resuming(
        &hub.base,
        &b.key,
        Some(Resume {
            after: 0,
            sync_epoch: epoch.clone(),
        }),
    )
    .await
    .err()
    .unwrap();
    let e = err.rpc().unwrap();
    assert_eq!(e.tag.as_deref(), Some("ResyncRequiredError"));
    assert_eq!(e.data.as_ref().unwrap()["oldestSeq"], json!(17));
    // Without resume the acked cursor (0) is stale too: explicit, not a gap.
    let err = AgentClient::connect(&hub.base, &b.key).await.err().unwrap();
    assert_eq!(
        err.rpc().unwrap().tag.as_deref(),
        Some("ResyncRequiredError")
    );

    let err = AgentClient::connect_resuming(
        &hub.base,
        &b.key,
        Some(Resume {
            after: 16,
            sync_epoch: "another-epoch".into(),
        }),
    )
    .await
    .err()
    .unwrap();
    assert_eq!(
        err.rpc().unwrap().tag.as_deref(),
        Some("ResyncRequiredError")
    );
    let (status, _) = rest_events(&hub, &b.key, "after=16&syncEpoch=another-epoch").await;
    assert_eq!(status, 410);

    // Accepting the gap explicitly works.
    let client = AgentClient::connect_resuming(
        &hub.base,
        &b.key,
        Some(Resume {
            after: 16,
            sync_epoch: epoch,
        }),
    )
    .await
    .unwrap();
    let mut rx = client.connection.notifications().unwrap();
    expect_sequence(&mut rx, 16, 5).await;
}

#[tokio::test]
async fn rest_catch_up_validates_input_and_long_polls() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let (_, b, sender, conversation) = pair(&hub).await;
    for (query, code) in [
        ("after=-1", "invalid_cursor"),
        ("after=abc", "invalid_cursor"),
        ("after=99", "invalid_cursor"),
        ("limit=0", "invalid_limit"),
        ("limit=100000", "invalid_limit"),
        ("wait=999", "invalid_query"),
        ("colour=red", "invalid_query"),
    ] {
        let (status, body) = rest_events(&hub, &b.key, query).await;
        assert_eq!(
            (status, body["error"]["code"].as_str().unwrap()),
            (400, code),
            "{query}"
        );
    }
    let r = hub
        .http
        .get(format!("{}/api/v1/events", hub.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let r = hub
        .http
        .get(format!("{}/api/v1/events", hub.base))
        .bearer_auth("sbk_agent_nope")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);

    // Catch up to the end, then long-poll: it returns once a message arrives.
    let (_, body) = rest_events(&hub, &b.key, "after=0").await;
    let after = body["nextAfter"].as_u64().unwrap();
    assert_eq!(after, 1);
    let base = hub.base.clone();
    let key = b.key.clone();
    let http = hub.http.clone();
    let started = Instant::now();
    let poll = tokio::spawn(async move {
        http.get(format!("{base}/api/v1/events?after={after}&wait=30"))
            .bearer_auth(key)
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    });
    // The poll is registered once the request reached the hub; sending after
    // it or before it both end with the event in the answer.
    send(&sender, conversation, "wake up").await;
    let body = poll.await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "returned before the wait ran out"
    );
    assert_eq!(
        body["events"][0]["payload"]["message"]["parts"][0]["text"],
        json!("wake up")
    );
    assert_eq!(body["nextAfter"], json!(2));
}

#[tokio::test]
async fn ephemeral_events_are_live_only() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let (_, b, sender, conversation) = pair(&hub).await;
    let receiver = AgentClient::connect(&hub.base, &b.key).await.unwrap();
    let mut rx = receiver.connection.notifications().unwrap();
    expect_sequence(&mut rx, 0, 1).await;
    sender
        .call::<AgentTypingSend>(TypingSendParams {
            conversation_id: conversation,
        })
        .await
        .unwrap();
    let typing = next_of(&mut rx, "agent/typing/received").await;
    assert_eq!(typing["ephemeral"], json!(true));
    assert!(typing.get("seq").is_none());
    assert_eq!(typing["payload"]["conversationId"], json!(conversation));
    send(&sender, conversation, "after typing").await;
    let e = next_of(&mut rx, "agent/message/received").await;
    assert_eq!(e["seq"], json!(2), "the typing event took no seq");

    let all = rest_all(&hub, &b.key, 100).await;
    assert!(all
        .iter()
        .all(|e| e["type"] != json!("agent/typing/received")));
    assert_eq!(all.len(), 2);
}

#[tokio::test]
async fn a_retried_send_with_the_same_client_id_writes_once() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let (_, b, sender, conversation) = pair(&hub).await;
    let params = MessageSendParams {
        conversation_id: conversation,
        parts: text("exactly once"),
        client_msg_id: Some("c-1".into()),
        reply_to: None,
        thread_id: None,
        components: None,
        card_use: None,
    };
    let first = sender
        .call::<AgentMessageSend>(params.clone())
        .await
        .unwrap();
    let retry = sender
        .call::<AgentMessageSend>(params.clone())
        .await
        .unwrap();
    assert!(!first.duplicate);
    assert!(retry.duplicate);
    assert_eq!(first.message, retry.message);
    let mut changed = params.clone();
    changed.parts = text("something else");
    let err = sender.call::<AgentMessageSend>(changed).await.unwrap_err();
    assert_eq!(err.rpc().unwrap().tag.as_deref(), Some("ConflictError"));
    let events = rest_all(&hub, &b.key, 100).await;
    assert_eq!(events.len(), 2, "the conversation event and one message");
}

#[tokio::test]
async fn a_retried_registration_with_the_same_idempotency_key_writes_once() {
    let hub = TestHub::start().await;
    let post = |key: &'static str, body: Value| {
        let http = hub.http.clone();
        let url = format!("{}/api/v1/agents/register", hub.base);
        async move {
            let r = http
                .post(url)
                .header("Idempotency-Key", key)
                .json(&body)
                .send()
                .await
                .unwrap();
            let replayed = r.headers().get("idempotent-replayed").is_some();
            (
                r.status().as_u16(),
                replayed,
                r.json::<Value>().await.unwrap(),
            )
        }
    };
    let (s1, replayed1, first) = post("reg-1", json!({"name": "once"})).await;
    assert_eq!((s1, replayed1), (201, false));
    let (s2, replayed2, second) = post("reg-1", json!({"name": "once"})).await;
    assert_eq!((s2, replayed2), (201, true));
    assert_eq!(second["agentId"], first["agentId"]);
    assert!(second.get("agentKey").is_none(), "keys are shown once");
    assert_eq!(second["keyWithheld"], json!(true));
    let (s3, _, third) = post("reg-1", json!({"name": "twice"})).await;
    assert_eq!(s3, 409);
    assert_eq!(third["error"]["code"], json!("idempotency_conflict"));
    // Concurrent retries still create one agent.
    let results =
        futures_util::future::join_all((0..8).map(|_| post("reg-2", json!({"name": "racer"}))))
            .await;
    let ids: HashSet<String> = results
        .iter()
        .map(|(_, _, b)| b["agentId"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 1);
    assert_eq!(
        results
            .iter()
            .filter(|(s, _, b)| *s == 201 && b.get("agentKey").is_some())
            .count(),
        1
    );
}

/// Every seq, cursor and limit that arrives as a u64 is refused above
/// i64::MAX at decoding, with an error naming the field: the store binds them
/// as signed 64-bit integers, where u64::MAX would wrap to -1.
#[tokio::test]
async fn cursors_beyond_i64_are_refused_naming_the_field() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let a = agent(&hub, "a").await;
    let b = agent(&hub, "b").await;
    let ca = AgentClient::connect(&hub.base, &a.key).await.unwrap();
    let conversation = direct(&ca, b.id).await;
    send_many(&ca, conversation, 0, 3, 1).await;
    let mut s = crate::support::RawSocket::connect_agent(&hub.ws_url(), &a.key).await;
    let too_big = json!(u64::MAX);
    let refused = |frame: &Value, field: &str| {
        let e = &frame["error"];
        assert_eq!(e["_tag"], json!("InvalidParamsError"), "{frame}");
        assert_eq!(e["data"]["field"], json!(field), "{frame}");
        let message = e["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("Invalid params: {field}"))
                && message.contains("9223372036854775807"),
            "{message}"
        );
    };
    for field in ["after", "before"] {
        let f = s
            .call(
                json!(field),
                "agent/message/list",
                json!({"conversationId": conversation, field: too_big}),
            )
            .await;
        refused(&f, field);
    }
    let f = s
        .call(json!("ack"), "agent/event/ack", json!({"seq": too_big}))
        .await;
    refused(&f, "seq");
    let mut fresh = crate::support::RawSocket::connect(&hub.ws_url()).await;
    let f = fresh
        .call(
            json!("resume"),
            "agent/network/connect",
            json!({"agentKey": a.key, "resume": {"after": too_big, "syncEpoch": "e"}}),
        )
        .await;
    refused(&f, "resume.after");

    // The largest stored value is still a cursor: after it nothing, before it all.
    let max = json!(i64::MAX);
    let f = s
        .call(
            json!("max-after"),
            "agent/message/list",
            json!({"conversationId": conversation, "after": max}),
        )
        .await;
    assert_eq!(f["result"]["messages"], json!([]), "{f}");
    let f = s
        .call(
            json!("max-before"),
            "agent/message/list",
            json!({"conversationId": conversation, "before": max}),
        )
        .await;
    assert_eq!(f["result"]["messages"].as_array().unwrap().len(), 3, "{f}");

    // Each parameter names its own range: a cursor the log's, `limit` and
    // `wait` their config keys'.
    for (query, code, range) in [
        (
            "after=18446744073709551615",
            "invalid_cursor",
            "from 0 to 9223372036854775807",
        ),
        (
            "limit=18446744073709551615",
            "invalid_limit",
            "(events.page_max)",
        ),
        (
            "wait=18446744073709551615",
            "invalid_query",
            "(events.max_wait_seconds)",
        ),
    ] {
        let (status, body) = rest_events(&hub, &a.key, query).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["error"]["code"], json!(code), "{query}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(range), "{query}: {message}");
    }
}
