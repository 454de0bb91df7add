//! The event index (ADR 0018) through the store contract, on both
//! backends: a fan-out is one event shared by its copies, replays equal
//! live delivery, retention releases a payload only with its last copy, and
//! a forward to everyone writes no recipient rows yet answers history and
//! `is_recipient` as before.

use std::collections::HashSet;

use switchboard::domain::event::StoredEvent;
use switchboard::domain::message::{Origin, Part};
use switchboard::store::{DynStore, Fanout, InsertedMessage, MessagePage, NewMessage};
use uuid::Uuid;

use crate::store_contract::{agent_in, app_in, contract, group_of, postgres, send_to, sqlite};
use crate::store_reads::{active_room, finishing, pending};

contract!(
    copies_of_a_fan_out_share_one_event,
    replayed_events_are_the_live_events,
    shared_payloads_survive_until_their_last_copy_is_pruned,
    late_joiners_see_only_what_came_after_them,
    a_verdict_naming_a_participant_added_while_pending_lists_it,
);

fn message_id(e: &StoredEvent) -> Uuid {
    e.payload.to_value()["message"]["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

async fn copies_of_a_fan_out_share_one_event(store: DynStore) {
    let a = agent_in(&store, "a").await;
    let members: Vec<Uuid> = [a].into_iter().chain(agents(&store, 5).await).collect();
    let group = group_of(&store, &members).await;
    let first = send_to(&store, group, a, &members[1..]).await;
    let second = send_to(&store, group, a, &members[1..]).await;
    assert_eq!(first.len(), 5);
    let ids: HashSet<Uuid> = first.iter().map(|e| e.id).collect();
    assert_eq!(ids.len(), 1, "one event id for every copy of one fan-out");
    assert_ne!(first[0].id, second[0].id, "each fan-out is its own event");
    let audiences: HashSet<Uuid> = first.iter().map(|e| e.audience).collect();
    assert_eq!(audiences.len(), 5, "unique per audience");
}

async fn agents(store: &DynStore, n: usize) -> Vec<Uuid> {
    let mut out = Vec::new();
    for i in 0..n {
        out.push(agent_in(store, &format!("m{i}")).await);
    }
    out
}

async fn replayed_events_are_the_live_events(store: DynStore) {
    let (a, b, c) = (
        agent_in(&store, "a").await,
        agent_in(&store, "b").await,
        agent_in(&store, "c").await,
    );
    let group = group_of(&store, &[a, b, c]).await;
    let mut live = Vec::new();
    for _ in 0..3 {
        live.extend(send_to(&store, group, a, &[b, c]).await);
    }
    for audience in [b, c] {
        let mine: Vec<&StoredEvent> = live.iter().filter(|e| e.audience == audience).collect();
        let replayed = store.events_after(audience, 0, 100).await.unwrap();
        assert_eq!(replayed.len(), 3);
        for (r, l) in replayed.iter().zip(mine) {
            assert_eq!(r, l, "id, seq, type, time and payload");
            let as_sent = serde_json::to_value(l.envelope_ref()).unwrap();
            let as_replayed = serde_json::to_value(r.envelope_ref()).unwrap();
            assert_eq!(as_replayed, as_sent, "the same envelope");
        }
    }
}

async fn shared_payloads_survive_until_their_last_copy_is_pruned(store: DynStore) {
    let (a, b, c) = (
        agent_in(&store, "a").await,
        agent_in(&store, "b").await,
        agent_in(&store, "c").await,
    );
    let group = group_of(&store, &[a, b, c]).await;
    let mut shared = Vec::new();
    for _ in 0..4 {
        shared.push(send_to(&store, group, a, &[b, c]).await[0].clone());
    }
    for _ in 0..4 {
        send_to(&store, group, a, &[b]).await;
    }
    // b keeps its newest 4 (the ones only it received); c keeps all 4.
    assert_eq!(store.prune_events(0, 4).await.unwrap(), 4);
    let b_left = store.events_after(b, 0, 100).await.unwrap();
    assert_eq!(
        b_left.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [5, 6, 7, 8]
    );
    let c_left = store.events_after(c, 0, 100).await.unwrap();
    assert_eq!(c_left.len(), 4, "c's copies outlive b's");
    for (e, first) in c_left.iter().zip(&shared) {
        assert_eq!(message_id(e), message_id(first));
        assert_eq!(e.payload, first.payload);
    }
    // Then c's go too, and the stream positions stand.
    assert_eq!(store.prune_events(i64::MAX, 1_000_000).await.unwrap(), 8);
    for (who, last) in [(b, 8), (c, 4)] {
        let pos = store.stream_position(who).await.unwrap();
        assert_eq!((pos.last_seq, pos.oldest_seq), (last, last + 1));
    }
    let next = send_to(&store, group, a, &[b, c]).await;
    assert_eq!(
        next.iter()
            .map(|e| (e.audience, e.seq))
            .collect::<HashSet<_>>(),
        HashSet::from([(b, 9), (c, 5)]),
        "seqs go on after retention emptied the logs"
    );
}

async fn late_joiners_see_only_what_came_after_them(store: DynStore) {
    let (a, b, c) = (
        agent_in(&store, "a").await,
        agent_in(&store, "b").await,
        agent_in(&store, "c").await,
    );
    let group = group_of(&store, &[a, b]).await;
    let before = message_id(&send_to(&store, group, a, &[b]).await[0]);
    store.add_participants(group, &[c], &[], 20).await.unwrap();
    let after = message_id(&send_to(&store, group, a, &[b, c]).await[0]);
    let by_b = message_id(&send(&store, group, b, &[a, c]).await[0]);

    let seen = |viewer| seen_by(&store, group, viewer);
    assert_eq!(seen(c).await, [after, by_b], "nothing from before c joined");
    assert_eq!(seen(b).await, [before, after, by_b]);
    assert_eq!(seen(a).await, [before, after, by_b]);
    assert!(
        seen(Uuid::new_v4()).await.is_empty(),
        "a stranger sees nothing"
    );

    assert!(!store.is_recipient(before, c).await.unwrap());
    assert!(store.is_recipient(after, c).await.unwrap());
    assert!(store.is_recipient(before, b).await.unwrap());
    assert!(
        !store.is_recipient(after, a).await.unwrap(),
        "not the sender"
    );
    assert!(store.is_recipient(by_b, a).await.unwrap());
    assert!(!store.is_recipient(by_b, b).await.unwrap());
}

/// A participant added while a gated message waits for its verdict joined
/// after the message: a forward naming it lists its recipients, so the
/// event it gets and the history agree.
async fn a_verdict_naming_a_participant_added_while_pending_lists_it(store: DynStore) {
    use switchboard::store::{MessageDecided, MessageOutcome};
    let app = app_in(&store).await;
    let (a, b, c, d) = (
        agent_in(&store, "a").await,
        agent_in(&store, "b").await,
        agent_in(&store, "c").await,
        agent_in(&store, "d").await,
    );
    let (_, room) = active_room(&store, app, a, b).await;
    let (first, first_job) = pending(&store, room.id, a).await;
    let (second, second_job) = pending(&store, room.id, a).await;
    store
        .add_participants(room.id, &[c, d], &[], 20)
        .await
        .unwrap();
    // As many recipients as participants but the sender, one of them late.
    let decide = |m, job, recipients: Vec<Uuid>| {
        let store = store.clone();
        async move {
            let forward = MessageOutcome::Forward { recipients };
            store
                .decide_message(m, &forward, &finishing(job), 30)
                .await
                .unwrap()
        }
    };
    let applied = decide(first, first_job, vec![b, c, d]).await;
    assert!(matches!(applied, MessageDecided::Applied(_)));
    for who in [b, c, d] {
        assert!(store.is_recipient(first, who).await.unwrap(), "named");
        assert!(seen_by(&store, room.id, who).await.contains(&first));
    }
    // Exactly the participants from before the message: no rows needed,
    // and the late ones do not see it.
    decide(second, second_job, vec![b]).await;
    assert!(store.is_recipient(second, b).await.unwrap());
    assert!(!store.is_recipient(second, c).await.unwrap());
    assert!(!seen_by(&store, room.id, d).await.contains(&second));
}

/// The ids of the messages of `conversation` that `viewer` sent or received.
async fn seen_by(store: &DynStore, conversation: Uuid, viewer: Uuid) -> Vec<Uuid> {
    let page = MessagePage {
        viewer,
        after: None,
        before: None,
        limit: 10,
        place: switchboard::store::PagePlace::Seen,
    };
    let messages = store.messages(conversation, page).await.unwrap();
    messages.iter().map(|m| m.id).collect()
}

/// A forward from `sender` to `recipients`, sent as an agent.
async fn send(
    store: &DynStore,
    conversation: Uuid,
    sender: Uuid,
    recipients: &[Uuid],
) -> Vec<StoredEvent> {
    let m = NewMessage {
        id: Uuid::now_v7(),
        conversation_id: conversation,
        sender_id: sender,
        origin: Origin::Agent,
        parts: vec![Part::Text {
            text: "from b".into(),
        }],
        reply_to: None,
        thread_id: None,
        in_channel: false,
        client_msg_id: None,
        request_hash: None,
        created_at: 30,
        fanout: Fanout::Forward {
            recipients: recipients.to_vec(),
            event_type: "agent/message/received",
            people: switchboard::store::PersonCopies::NONE,
            apps: switchboard::store::AppCopies::NONE,
        },
        jobs: Vec::new(),
        card: None,
        reply_to_interaction: None,
    };
    match store.insert_message(&m).await.unwrap() {
        InsertedMessage::Inserted { events, .. } => events,
        InsertedMessage::Duplicate { .. } => panic!("new message"),
    }
}

/// On SQLite the file is at hand: a payload row goes with its last index
/// row, so a fully pruned log leaves no payload behind.
#[tokio::test]
async fn pruning_every_copy_deletes_the_payload_rows() {
    use sqlx::Connection;
    let (store, dir) = sqlite().await;
    let (a, b, c) = (
        agent_in(&store, "a").await,
        agent_in(&store, "b").await,
        agent_in(&store, "c").await,
    );
    let group = group_of(&store, &[a, b, c]).await;
    for _ in 0..3 {
        send_to(&store, group, a, &[b, c]).await;
    }
    let path = dir
        .path()
        .join("nested")
        .join("data")
        .join("switchboard.db");
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    assert_eq!(payloads(&mut conn).await, (3, 6), "one row per fan-out");
    let recipients: (i64,) = sqlx::query_as("SELECT COUNT(*) FROM message_recipients")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(recipients.0, 0, "forwards to everyone list nobody");
    store.prune_events(0, 1).await.unwrap();
    assert_eq!(payloads(&mut conn).await, (1, 2), "only the newest is left");
    store.prune_events(i64::MAX, 1_000_000).await.unwrap();
    assert_eq!(payloads(&mut conn).await, (0, 0));
}

/// How many payload rows there are and how many references they count.
async fn payloads(conn: &mut sqlx::SqliteConnection) -> (i64, i64) {
    sqlx::query_as("SELECT COUNT(*), COALESCE(SUM(refs), 0) FROM event_payloads")
        .fetch_one(conn)
        .await
        .unwrap()
}
