//! Issue 13's migration test: a database written by the schema before the
//! event index (migrations 0001 to 0007, filled row by row the way that
//! code wrote it) is opened by a real hub, which applies migration 0008;
//! every cursor taken before resumes after it with no gap and no duplicate,
//! over the WebSocket and over REST; the history, the recipient counts and
//! the retention edge (a pruned or emptied stream still asks for a resync)
//! are unchanged; and new events go on at each stream's last seq + 1, in
//! new streams too.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Value};
use uuid::Uuid;

use crate::support::agents::text;
use crate::support::event_reader::{rest_events, EventReader};
use crate::support::hub::Options;
use crate::support::legacy_db::LegacyDb;
use crate::support::{pg, RawSocket, TestHub};

mod from_0008;
mod from_0009;
mod schema_0007;
mod schema_0008;

use schema_0007::{write_before, Before, Principal, ACKED_SEQ, PRUNED_THROUGH, SENDERS};

/// The last migration before the event index.
const SCHEMA_BEFORE: u32 = 7;
const NOT_FOUND: i64 = -32004;
const RESYNC_REQUIRED: i64 = -32013;

/// REST catch-up serves the same envelopes from the same cursors (the
/// default one is the acknowledged seq), and a stream pruned past the
/// cursor answers 410 with its positions unchanged.
async fn check_rest(hub: &TestHub, before: &Before) {
    let [creator, acker, pruned] = &before.members[..] else {
        unreachable!()
    };
    let outsider = &before.outsider;
    for (who, query, after) in [
        (creator, "after=0&limit=100", 0),
        (acker, "after=0&limit=100", 0),
        (acker, "limit=100", ACKED_SEQ),
        (pruned, "after=2&limit=100", PRUNED_THROUGH),
        (outsider, "after=1", 1),
    ] {
        let stream = before.stream(who);
        let (status, body) = rest_events(hub, &who.key, query).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["events"], json!(stream.after(after)), "REST {query}");
        assert_eq!(body["latestSeq"], json!(stream.last_seq));
        assert_eq!(body["hasMore"], json!(false));
        assert_eq!(body["syncEpoch"], json!(before.sync_epoch));
    }
    for who in [pruned, outsider] {
        let stream = before.stream(who);
        let (status, body) = rest_events(hub, &who.key, "after=0").await;
        assert_eq!(status, 410, "{body}");
        assert_eq!(body["error"]["code"], json!("resync_required"), "{body}");
        for (member, value) in [
            ("oldestSeq", stream.oldest_seq()),
            ("latestSeq", stream.last_seq),
            ("ackedSeq", stream.acked_seq),
        ] {
            assert_eq!(body["error"][member], json!(value), "{member}: {body}");
        }
    }
}

/// Resumes `who` after `after` (a plain connect starts after its
/// acknowledged seq) and checks it gets exactly the stored envelopes after
/// its cursor, and the connect answer's positions as before.
async fn resume(
    hub: &TestHub,
    before: &Before,
    who: &Principal,
    after: Option<u64>,
) -> EventReader {
    let stream = before.stream(who);
    let resume = after.map(|a| (a, before.sync_epoch.as_str()));
    let (mut reader, answer) = EventReader::connect(hub, &who.key, resume).await;
    let start = after.unwrap_or(stream.acked_seq);
    assert_eq!(
        answer["result"]["events"],
        json!({
            "syncEpoch": before.sync_epoch,
            "startAfter": start,
            "latestSeq": stream.last_seq,
            "ackedSeq": stream.acked_seq,
        }),
        "{answer}"
    );
    let expected = stream.after(start);
    let got = reader.until(expected.len()).await;
    assert_eq!(got, &expected[..], "events after seq {start}");
    reader
}

/// Resuming from behind a pruned stream's oldest seq (some of it pruned,
/// or all) is refused with the resync error and the stream's positions, as
/// before the migration.
async fn check_resync(hub: &TestHub, before: &Before) {
    for who in [&before.members[2], &before.outsider] {
        let stream = before.stream(who);
        let (_, answer) = EventReader::connect(hub, &who.key, Some((0, &before.sync_epoch))).await;
        assert_eq!(answer["error"]["code"], json!(RESYNC_REQUIRED), "{answer}");
        assert_eq!(
            answer["error"]["data"],
            json!({
                "syncEpoch": before.sync_epoch,
                "oldestSeq": stream.oldest_seq(),
                "latestSeq": stream.last_seq,
                "ackedSeq": stream.acked_seq,
            }),
            "{answer}"
        );
    }
}

/// A socket for calls, connected after the end of its stream.
async fn caller(hub: &TestHub, before: &Before, who: &Principal) -> RawSocket {
    let last = before.streams.get(&who.id).map_or(0, |s| s.last_seq);
    let (reader, answer) =
        EventReader::connect(hub, &who.key, Some((last, &before.sync_epoch))).await;
    assert!(answer.get("result").is_some(), "{answer}");
    reader.socket
}

/// Every member still sees every old message in the history, and the
/// `sent` after the migration; the outsider is told the conversation does
/// not exist, exactly as for a missing one.
async fn check_history(hub: &TestHub, before: &Before, sent: &[Value]) {
    let all: Vec<Value> = before
        .messages
        .iter()
        .map(|m| serde_json::to_value(&m.message).unwrap())
        .chain(sent.iter().cloned())
        .collect();
    for who in &before.members {
        let mut s = caller(hub, before, who).await;
        let list = json!({"conversationId": before.conversation, "limit": 100});
        let r = s.call(json!("h"), "agent/message/list", list).await;
        assert_eq!(r["result"]["messages"], json!(all), "{r}");
        assert_eq!(r["result"]["hasMore"], json!(false));
    }
    let mut s = caller(hub, before, &before.outsider).await;
    let hidden = s
        .call(
            json!("h"),
            "agent/message/list",
            json!({"conversationId": before.conversation}),
        )
        .await;
    let missing = s
        .call(
            json!("h"),
            "agent/message/list",
            json!({"conversationId": Uuid::now_v7()}),
        )
        .await;
    assert_eq!(hidden["error"]["code"], json!(NOT_FOUND), "{hidden}");
    assert_eq!(hidden["error"]["message"], missing["error"]["message"]);
}

/// A retry of each old send (same `clientMsgId`, same content) answers the
/// stored message with its recipient count, and writes no event.
async fn check_recipient_counts(hub: &TestHub, before: &Before) {
    for (i, old) in before.messages.iter().enumerate() {
        let sender = &before.members[SENDERS[i]];
        let mut s = caller(hub, before, sender).await;
        let mut params = json!({
            "conversationId": before.conversation,
            "parts": old.message.parts,
            "clientMsgId": old.client_msg_id,
        });
        if let Some(r) = old.message.reply_to {
            params["replyTo"] = json!(r);
        }
        let r = s.call(json!("s"), "agent/message/send", params).await;
        assert_eq!(r["result"]["message"], json!(old.message), "{r}");
        assert_eq!(
            r["result"]["delivery"],
            json!({"state": "forwarded", "recipients": old.recipients}),
            "{r}"
        );
    }
}

/// The resumed sockets, by principal, and how many events each stream
/// got since the migration.
struct Resumed {
    readers: HashMap<Uuid, EventReader>,
    new_events: HashMap<Uuid, u64>,
}

impl Resumed {
    /// A new message in `conversation` from `sender` arrives at every other
    /// participant right after its old events, at the old last seq + 1 plus
    /// what came since: no gap, nothing repeated. Returns the message.
    async fn check_send(
        &mut self,
        hub: &TestHub,
        before: &Before,
        conversation: Uuid,
        sender: &Principal,
        recipients: &[&Principal],
    ) -> Value {
        let mut s = caller(hub, before, sender).await;
        let params =
            json!({"conversationId": conversation, "parts": text("after the event index")});
        let r = s.call(json!("n"), "agent/message/send", params).await;
        let message = r["result"]["message"].clone();
        assert!(message.is_object(), "{r}");
        for who in recipients {
            let reader = self.readers.get_mut(&who.id).unwrap();
            let count = reader.events.len();
            let event = reader.until(count + 1).await[count].clone();
            let new = self.new_events.entry(who.id).or_default();
            *new += 1;
            let seq = before.stream(who).last_seq + *new;
            assert_eq!(event["seq"], json!(seq), "{event}");
            assert_eq!(event["type"], json!("agent/message/received"));
            assert_eq!(event["payload"]["message"], message);
            let ids: HashSet<&Value> = reader.events.iter().map(|e| &e["id"]).collect();
            assert_eq!(ids.len(), reader.events.len(), "an event id twice: {event}");
        }
        message
    }
}

/// A principal first seen after the migration gets a stream of its own
/// (the surrogate keys go on after the migrated ones) from seq 1.
async fn check_new_stream(hub: &TestHub, before: &Before) {
    let creator = &before.members[0];
    let (id, key) = hub.register_agent("newcomer").await;
    let (mut reader, answer) = EventReader::connect(hub, &key, None).await;
    assert_eq!(
        answer["result"]["events"]["latestSeq"],
        json!(0),
        "{answer}"
    );
    let mut s = caller(hub, before, creator).await;
    let create = json!({"kind": "direct", "participants": [id]});
    let r = s
        .call(json!("d"), "agent/conversation/create", create)
        .await;
    let direct = &r["result"]["conversation"]["id"];
    assert!(direct.is_string(), "{r}");
    let params = json!({"conversationId": direct, "parts": text("first after the migration")});
    let sent = s.call(json!("n"), "agent/message/send", params).await;
    let events = reader.until(2).await;
    assert_eq!(events[0]["seq"], json!(1), "{}", events[0]);
    assert_eq!(events[0]["type"], json!("agent/conversation/created"));
    assert_eq!(events[1]["seq"], json!(2), "{}", events[1]);
    assert_eq!(events[1]["payload"]["message"], sent["result"]["message"]);
}

/// Starts a hub on the old database (it applies 0008) and checks every
/// reader resumes across the migration.
async fn resumes_across_the_migration(before: Before, options: Options) {
    let hub = TestHub::start_with(options).await;
    // First, before any send draws a surrogate key (PostgreSQL's upsert
    // draws one for every row it proposes).
    check_new_stream(&hub, &before).await;
    check_rest(&hub, &before).await;
    check_resync(&hub, &before).await;
    let [creator, acker, pruned] = &before.members[..] else {
        unreachable!()
    };
    let outsider = &before.outsider;
    let mut resumed = Resumed {
        readers: HashMap::new(),
        new_events: HashMap::new(),
    };
    for (who, after) in [
        (creator, Some(1)),
        (acker, None),
        (pruned, Some(PRUNED_THROUGH)),
        (outsider, Some(1)),
    ] {
        let reader = resume(&hub, &before, who, after).await;
        resumed.readers.insert(who.id, reader);
    }
    check_history(&hub, &before, &[]).await;
    check_recipient_counts(&hub, &before).await;
    let group = before.conversation;
    let sent = [
        resumed
            .check_send(&hub, &before, group, creator, &[acker, pruned])
            .await,
        resumed
            .check_send(&hub, &before, group, acker, &[creator, pruned])
            .await,
    ];
    resumed
        .check_send(&hub, &before, before.direct, creator, &[outsider])
        .await;
    check_history(&hub, &before, &sent).await;
}

#[tokio::test]
async fn a_sqlite_database_of_schema_0007_resumes_across_the_event_index_migration() {
    let dir = tempfile::tempdir().unwrap();
    let db = LegacyDb::sqlite(&dir.path().join("switchboard.db"), SCHEMA_BEFORE).await;
    let before = write_before(&db).await;
    db.close().await;
    let options = Options {
        dir: Some(dir.path().to_path_buf()),
        ..TestHub::fast_options()
    };
    resumes_across_the_migration(before, options).await;
}

#[tokio::test]
async fn a_postgres_database_of_schema_0007_resumes_across_the_event_index_migration() {
    let url = pg::fresh_database().await;
    let db = LegacyDb::postgres(&url, SCHEMA_BEFORE).await;
    let before = write_before(&db).await;
    db.close().await;
    let options = Options {
        database_url: Some(url),
        ..TestHub::fast_options()
    };
    resumes_across_the_migration(before, options).await;
}
