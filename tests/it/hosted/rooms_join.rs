//! The `rooms` feature served whole (ADR 0031 §6) through the real runner
//! and broker: an app joins a channel by a link another app made
//! (`rooms_join`), lists its rooms (its task's room and the channel, by
//! id), reads who is in the channel with the profiles apps set, sends into
//! it and reads it back, paged; a room it cannot read answers like none.

use serde_json::{json, Value};
use switchboard::client::AgentClient;
use switchboard::protocol::tasks::{AgentTaskRequest, TaskRequestParams};
use uuid::Uuid;

use super::card_with;
use super::invites::app_with_rooms;
use super::rooms::line;
use super::runs::{ended, install_over_rest, start};
use crate::support::agents::agent;
use crate::support::hub::ADMIN_TOKEN;
use crate::support::world::{self, channel, grant, on_channel, person, principal, space};
use crate::support::{RawSocket, TestHub};

const MAKER: &str = r#"
from sb import out, text
room, _ = open("rooms.txt").read().split()
out(made=text("invite_create", {"room": room, "max_uses": 1}))
out(second=text("invite_create", {"room": room, "max_uses": 2}))
"#;

const ROOMER: &str = r#"
from sb import call, out, text
link, second, backroom = open("rooms.txt").read().split()
page = text("wait_for_message", {"timeout": 30})
while not any(e["type"] == "app/task/activated" for e in page["events"]):
    page = text("wait_for_message", {"timeout": 30, "after_id": page["nextAfter"]})
out(before=text("rooms_list"))
text("set_profile", {"name": "Roomer"})
joined = text("rooms_join", {"link": link})
out(joined=joined)
room = joined["room"]["id"]
out(again=call("rooms_join", {"link": link}))
out(accepted=text("invite_accept", {"link": second}))
out(after=text("rooms_list"))
out(first=text("rooms_list", {"limit": 1}))
out(members=text("rooms_members", {"room": room}))
out(sent=text("rooms_send", {"room": room, "text": "hello lobby"}))
out(read=text("rooms_read", {"room": room}))
out(page=text("rooms_read", {"room": room, "limit": 1}))
out(missing=call("rooms_read", {"room": "0190a0a0-0000-7000-8000-000000000000"}))
out(hidden=call("rooms_read", {"room": backroom}))
out(hidden_members=call("rooms_members", {"room": backroom}))
out(missing_members=call("rooms_members", {"room": "0190a0a0-0000-7000-8000-000000000000"}))
"#;

fn ids(v: &Value) -> Vec<String> {
    v["rooms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn an_app_joins_a_channel_by_link_and_uses_every_room_method() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let s = space(&hub, "games").await;
    let lobby = channel(&hub, ADMIN_TOKEN, s, "lobby").await;
    // A channel that exists, which the app may not see.
    let backroom = channel(&hub, ADMIN_TOKEN, s, "backroom").await;
    let (maker, _) = app_with_rooms(
        &hub,
        "maker",
        &["invite_create"],
        MAKER,
        &format!("{lobby} -"),
    )
    .await;
    grant(
        &hub,
        ADMIN_TOKEN,
        principal(maker),
        on_channel(lobby),
        "write",
    )
    .await;
    let run = start(&hub, "maker").await;
    let made = ended(&hub, run["runId"].as_str().unwrap()).await;
    let made_log = made["log"].as_str().unwrap();
    let link_of = |k| line(made_log, k)["link"].as_str().unwrap().to_string();
    let rooms_txt = format!("{} {} {backroom}", link_of("made"), link_of("second"));

    // Sam writes in the lobby before the app comes.
    let sam = person(&hub, "sam").await;
    grant(
        &hub,
        ADMIN_TOKEN,
        principal(sam.id),
        on_channel(lobby),
        "write",
    )
    .await;
    let mut sam_s = RawSocket::connect(&hub.ws_url()).await;
    sam_s
        .call(
            json!("c"),
            "person/network/connect",
            json!({"personKey": sam.key}),
        )
        .await;
    let said = sam_s
        .call(
            json!("m"),
            "person/message/send",
            json!({"conversationId": lobby, "parts": world::text("from sam")}),
        )
        .await;
    assert!(said.get("result").is_some(), "{said}");

    let prims = ["rooms", "wait_for_message", "set_profile", "invite_accept"];
    let roomer = card_with(
        "roomer",
        &prims,
        ROOMER,
        &[("rooms.txt", &rooms_txt)],
        json!({}),
        None,
    );
    install_over_rest(&hub, &roomer).await;
    let run = start(&hub, "roomer").await;
    let app: Uuid = run["appId"].as_str().unwrap().parse().unwrap();
    let alice = agent(&hub, "alice").await;
    let a = AgentClient::connect(&hub.base, &alice.key).await.unwrap();
    let task = a
        .call::<AgentTaskRequest>(TaskRequestParams {
            app_id: app,
            invited_agent_ids: vec![],
            initial_conversation: None,
        })
        .await
        .unwrap();
    let end = ended(&hub, run["runId"].as_str().unwrap()).await;
    assert_eq!(end["exitCode"], 0, "{end}");
    let log = end["log"].as_str().unwrap();

    let before = line(log, "before");
    assert_eq!(before["rooms"].as_array().unwrap().len(), 1, "{before}");
    assert_eq!(before["rooms"][0]["kind"], "task");
    let task_room = before["rooms"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(before["rooms"][0]["taskId"], json!(task.task.id));

    let joined = line(log, "joined");
    assert_eq!(joined["joined"], true, "{joined}");
    assert_eq!(joined["room"]["id"], json!(lobby));
    assert_eq!(joined["room"]["kind"], "channel");
    assert_eq!(joined["room"]["members"], 1, "a channel's members: the app");
    // `invite_accept` itself, on a link to a room the app writes already.
    let accepted = line(log, "accepted");
    assert_eq!(accepted["joined"], false, "{accepted}");
    assert_eq!(accepted["room"]["id"], json!(lobby));
    assert_eq!(accepted["room"]["members"], 1, "as rooms_list counts it");
    assert_eq!(
        line(log, "again")["error"],
        "error",
        "the one-use link is spent"
    );

    let mut expected = vec![task_room, lobby.to_string()];
    expected.sort();
    let after = line(log, "after");
    assert_eq!(ids(&after), expected, "both rooms, by id");
    let first = line(log, "first");
    assert_eq!(ids(&first), expected[..1]);
    assert_eq!(first["nextAfter"], json!(expected[0]));

    let members = line(log, "members");
    let mut who: Vec<String> = members["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_string())
        .collect();
    who.sort();
    assert_eq!(
        who,
        [app.to_string()],
        "a channel's other readers ({maker}, {}) are not the app's to list",
        sam.id
    );
    assert_eq!(
        members["profiles"],
        json!({app.to_string(): {"name": "Roomer"}}),
        "the profiles apps set, nobody else's"
    );

    let sent = line(log, "sent");
    let read = line(log, "read");
    let texts: Vec<&str> = read["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["parts"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["from sam", "hello lobby"]);
    assert_eq!(read["messages"][1]["id"], sent["messageId"]);
    let page = line(log, "page");
    assert_eq!(page["messages"].as_array().unwrap().len(), 1);
    assert_eq!(page["nextAfter"], read["messages"][0]["seq"]);
    // Each tool's hidden answer against the same tool's missing one.
    for (k, m) in [("hidden", "missing"), ("hidden_members", "missing_members")] {
        let (hidden, missing) = (line(log, k), line(log, m));
        assert_eq!(missing["error"], "error", "{m}");
        assert_eq!(
            (&hidden["error"], &hidden["message"]),
            (&missing["error"], &missing["message"]),
            "{k}: an existing room the app may not see answers as a missing one"
        );
    }
}
