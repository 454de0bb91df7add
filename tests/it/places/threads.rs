//! Threads (ADR 0020 §6 `places::threads`): a reply lists in its thread, not
//! the main one; an unknown or reply-rooted `threadId` is InvalidParams
//! naming it; outside channels there are no threads. Readers receive every
//! channel message, the sender, non-readers and apps none.

use serde_json::{json, Value};
use uuid::Uuid;

use super::{list_as, ok, send_as};
use crate::support::event_reader::rest_events;
use crate::support::world::{world, Member, World};
use crate::support::{RawSocket, TestHub};

fn id(frame: &Value) -> Uuid {
    ok(frame)["message"]["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

fn texts(frame: &Value) -> Vec<String> {
    ok(frame)["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["parts"][0]["text"].as_str().unwrap().to_string())
        .collect()
}

fn invalid_thread(frame: &Value, text: &str) {
    assert_eq!(
        frame["error"]["_tag"],
        json!("InvalidParamsError"),
        "{frame}"
    );
    assert_eq!(
        frame["error"]["message"],
        json!(format!("Invalid params: threadId: {text}"))
    );
    assert_eq!(frame["error"]["data"]["field"], json!("threadId"));
}

/// The next `*/message/received` on `s`, skipping other frames.
async fn received(s: &mut RawSocket, method: &str) -> Value {
    loop {
        let frame = s.recv().await;
        if frame["method"] == json!(method) {
            return frame["params"]["payload"]["message"].clone();
        }
    }
}

/// The ids among `ids` in `who`'s stored events (every event from the
/// start): what its sockets are sent, since live delivery is the log's.
async fn in_events(w: &World, who: &Member, ids: &[Uuid]) -> Vec<Uuid> {
    let (status, page) = rest_events(&w.hub, &who.key, "after=0&limit=1000").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["hasMore"], json!(false), "{page}");
    let sent: Vec<Value> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["payload"]["message"]["id"].clone())
        .collect();
    ids.iter()
        .copied()
        .filter(|id| sent.contains(&json!(id)))
        .collect()
}

/// Of `notes`'s root, reply and main message: a reader (helper) has all
/// three events, the sender (Alex) only the one Robin sent, a non-reader
/// (Sam, who reads Support, not Research) none, and an app (the bot, a
/// reader through its group that receives events) all three, as
/// `app/message/received` (ADR 0031, 2026-12-02).
async fn no_channel_events(w: &World, [root, reply, main]: [Uuid; 3]) {
    let all = [root, reply, main];
    assert_eq!(in_events(w, &w.helper, &all).await, all, "a reader");
    assert_eq!(in_events(w, &w.alex, &all).await, [reply], "the sender");
    assert_eq!(
        in_events(w, &w.sam, &all).await,
        Vec::<Uuid>::new(),
        "a non-reader"
    );
    assert_eq!(in_events(w, &w.bot, &all).await, all, "an app reader");
}

async fn check_threads(w: &World) {
    let (mut alex, mut robin) = (w.connect(&w.alex).await, w.connect(&w.robin).await);
    let mut helper = w.connect(&w.helper).await;
    let notes = w.notes;
    let root = id(&send_as(&mut alex, &w.alex, notes, "root", json!({})).await);
    let reply = send_as(
        &mut robin,
        &w.robin,
        notes,
        "reply",
        json!({ "threadId": root }),
    )
    .await;
    assert_eq!(ok(&reply)["message"]["threadId"], json!(root));
    let reply = id(&reply);
    let main = id(&send_as(&mut alex, &w.alex, notes, "main", json!({})).await);

    // Readers receive every message, people and agents alike, in order;
    // the thread's reply carries its root. (Read before their next call,
    // which would skip the events.)
    let first = received(&mut helper, "agent/message/received").await;
    assert_eq!(first["id"], json!(root));
    let second = received(&mut helper, "agent/message/received").await;
    assert_eq!(
        (&second["id"], &second["threadId"]),
        (&json!(reply), &json!(root))
    );
    let third = received(&mut helper, "agent/message/received").await;
    assert_eq!(third["id"], json!(main));
    let to_robin = received(&mut robin, "person/message/received").await;
    assert_eq!(to_robin["id"], json!(main));

    no_channel_events(w, [root, reply, main]).await;

    let page = list_as(&mut alex, &w.alex, json!({ "conversationId": notes })).await;
    assert_eq!(texts(&page), ["root", "main"]);
    let thread = json!({ "conversationId": notes, "threadId": root });
    assert_eq!(
        texts(&list_as(&mut helper, &w.helper, thread).await),
        ["reply"]
    );

    let unknown = json!({ "threadId": Uuid::new_v4() });
    invalid_thread(
        &send_as(&mut alex, &w.alex, notes, "x", unknown).await,
        "names no thread of this channel",
    );
    let under_reply = json!({ "threadId": reply });
    invalid_thread(
        &send_as(&mut alex, &w.alex, notes, "x", under_reply).await,
        "names no thread of this channel",
    );
    let listed = json!({ "conversationId": notes, "threadId": reply });
    invalid_thread(
        &list_as(&mut alex, &w.alex, listed).await,
        "names no thread of this channel",
    );
    // A root of another channel names no thread of this one.
    let general_root = id(&send_as(&mut alex, &w.alex, w.general, "elsewhere", json!({})).await);
    let other = json!({ "threadId": general_root });
    invalid_thread(
        &send_as(&mut alex, &w.alex, notes, "x", other).await,
        "names no thread of this channel",
    );

    // Outside channels there are no threads.
    let direct = alex
        .call(
            json!("d"),
            "person/conversation/create",
            json!({ "kind": "direct", "participants": [w.sam.id] }),
        )
        .await;
    let direct: Uuid = ok(&direct)["conversation"]["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let first = id(&send_as(&mut alex, &w.alex, direct, "hi", json!({})).await);
    let threaded = json!({ "threadId": first });
    invalid_thread(
        &send_as(&mut alex, &w.alex, direct, "x", threaded).await,
        "only channel messages have threads",
    );
}

#[tokio::test]
async fn replies_list_in_their_thread_and_bad_roots_are_named() {
    let w = world(TestHub::fast_options()).await;
    check_threads(&w).await;
}
