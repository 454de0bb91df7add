//! The store contract, continued: many sends at once, on both backends.

use switchboard::store::{DynStore, StoreError};
use uuid::Uuid;

use crate::store_contract::{agent_in, contract, group_of, postgres, sqlite};

contract!(concurrent_sends_keep_order_and_fail_alone);

/// Many sends at once (grouped into one transaction on SQLite): each message
/// gets its own seq, every recipient sees the messages in seq order, and a
/// duplicate `clientMsgId` or a missing conversation fails only its own send.
async fn concurrent_sends_keep_order_and_fail_alone(store: DynStore) {
    use switchboard::domain::message::{Origin, Part};
    use switchboard::store::{Fanout, InsertedMessage, NewMessage};
    let a = agent_in(&store, "a").await;
    let b = agent_in(&store, "b").await;
    let c = agent_in(&store, "c").await;
    let group = group_of(&store, &[a, b, c]).await;
    let message = |conversation: Uuid, client: Option<&str>| NewMessage {
        id: Uuid::now_v7(),
        conversation_id: conversation,
        sender_id: a,
        origin: Origin::Agent,
        parts: vec![Part::Text { text: "hi".into() }],
        reply_to: None,
        thread_id: None,
        in_channel: false,
        client_msg_id: client.map(str::to_string),
        request_hash: None,
        created_at: 10,
        fanout: Fanout::Forward {
            recipients: vec![b, c],
            event_type: "agent/message/received",
            people: switchboard::store::PersonCopies::NONE,
            apps: switchboard::store::AppCopies::NONE,
        },
        jobs: Vec::new(),
        card: None,
        reply_to_interaction: None,
    };
    let mut sends = Vec::new();
    for i in 0..60 {
        let m = match i {
            17 | 18 => message(group, Some("same-client-id")),
            31 => message(Uuid::now_v7(), None),
            _ => message(group, Some(&format!("c{i}"))),
        };
        let store = store.clone();
        sends.push(tokio::spawn(
            async move { (i, store.insert_message(&m).await) },
        ));
    }
    let mut seqs = Vec::new();
    let mut duplicates = 0;
    for s in sends {
        match s.await.unwrap() {
            (31, result) => assert!(
                matches!(result, Err(StoreError::NotFound)),
                "the missing conversation fails alone: {result:?}"
            ),
            (
                _,
                Ok(InsertedMessage::Inserted {
                    message, events, ..
                }),
            ) => {
                assert_eq!(events.len(), 2);
                assert!(events
                    .iter()
                    .all(|e| e.payload.to_value()["message"]["seq"] == message.seq));
                seqs.push(message.seq);
            }
            (i, Ok(InsertedMessage::Duplicate { .. })) => {
                assert!(i == 17 || i == 18);
                duplicates += 1;
            }
            (i, Err(e)) => panic!("send {i} failed: {e}"),
        }
    }
    assert_eq!(
        duplicates, 1,
        "one of the two same-id sends is the duplicate"
    );
    seqs.sort();
    assert_eq!(
        seqs,
        (1..=58).collect::<Vec<u64>>(),
        "distinct, gap-free message seqs"
    );
    for audience in [b, c] {
        let events = store.events_after(audience, 0, 1000).await.unwrap();
        assert_eq!(
            events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            (1..=58).collect::<Vec<u64>>()
        );
        let order: Vec<u64> = events
            .iter()
            .map(|e| e.payload.to_value()["message"]["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(
            order,
            (1..=58).collect::<Vec<u64>>(),
            "events follow message order"
        );
    }

    // A burst with no faults, over two conversations, a third of it pending
    // with a job: one combined write on either backend, as a whole.
    use switchboard::store::{JobKind, NewJob, Verdict};
    let other = group_of(&store, &[a, b, c]).await;
    let mut sends = Vec::new();
    for i in 0..30 {
        let mut m = message(if i % 2 == 0 { group } else { other }, None);
        if i % 3 == 0 {
            m.fanout = Fanout::Pending;
            m.jobs = vec![NewJob::new(JobKind::MessageAuthorize, m.id, 7)];
        }
        let store = store.clone();
        sends.push(tokio::spawn(async move {
            let r = store.insert_message(&m).await.unwrap();
            (m, r)
        }));
    }
    let mut by_conversation: std::collections::HashMap<Uuid, Vec<u64>> = Default::default();
    for s in sends {
        let (m, r) = s.await.unwrap();
        let InsertedMessage::Inserted {
            message,
            verdict,
            events,
        } = r
        else {
            panic!("new message");
        };
        by_conversation
            .entry(m.conversation_id)
            .or_default()
            .push(message.seq);
        let (_, stored_verdict) = store.message(m.id).await.unwrap().unwrap();
        assert_eq!(stored_verdict, verdict);
        match m.jobs.first() {
            Some(job) => {
                assert_eq!(verdict, Verdict::Pending);
                assert!(events.is_empty());
                assert!(store.claim_job(job.id, 0, 1).await.unwrap().is_some());
            }
            None => assert_eq!(events.len(), 2),
        }
    }
    let mut seqs = by_conversation.remove(&group).unwrap();
    seqs.sort();
    assert_eq!(seqs, (59..=73).collect::<Vec<u64>>());
    let mut seqs = by_conversation.remove(&other).unwrap();
    seqs.sort();
    assert_eq!(seqs, (1..=15).collect::<Vec<u64>>());
}
