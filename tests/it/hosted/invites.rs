//! Invite links (ADR 0031 §6) end to end: a hosted app makes links to a
//! channel it may write and to its task's room; people, agents and another
//! app redeem them (`*/invite/accept`, `invite_accept`). Every link that
//! lets nobody in answers the same error, whatever made it so: garbage, an
//! unknown id, a wrong secret, used up, or a maker that lost the room.

use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

use super::card_with;
use super::rooms::line;
use super::runs::{ended, install_over_rest, start};
use crate::support::hub::ADMIN_TOKEN;
use crate::support::world::{self, channel, expect, grant, on_channel, person, principal, space};
use crate::support::{agents::agent, RawSocket, TestHub};

const WHO: &str = r#"
from sb import out, text
out(who=text("whoami"))
"#;

const MAKER: &str = r#"
from sb import call, out, text
room, other, readonly = open("rooms.txt").read().split()
out(one=text("invite_create", {"room": room, "max_uses": 1, "ttl_seconds": 600}))
out(two=text("invite_create", {"room": room}))
out(too_many=call("invite_create", {"room": room, "max_uses": 1000}))
out(forever=call("invite_create", {"room": room, "ttl_seconds": 0}))
out(hidden=call("invite_create", {"room": other}))
out(read_only=call("invite_create", {"room": readonly}))
out(missing=call("invite_create", {"room": "0190a0a0-0000-7000-8000-000000000000"}))
"#;

/// The app's principal first (a run makes it), then a version of the card
/// that knows its rooms, signed by the same author.
pub(super) async fn app_with_rooms(
    hub: &TestHub,
    id: &str,
    prims: &[&str],
    main: &str,
    rooms: &str,
) -> (Uuid, super::Card) {
    let first = card_with(id, prims, WHO, &[], json!({}), None);
    install_over_rest(hub, &first).await;
    let run = start(hub, id).await;
    let app: Uuid = run["appId"].as_str().unwrap().parse().unwrap();
    ended(hub, run["runId"].as_str().unwrap()).await;
    let key = first.root.path().join("author.key");
    (app, first_then(hub, id, prims, main, rooms, &key).await)
}

async fn first_then(
    hub: &TestHub,
    id: &str,
    prims: &[&str],
    main: &str,
    rooms: &str,
    key: &std::path::Path,
) -> super::Card {
    let c = card_with(
        id,
        prims,
        main,
        &[("rooms.txt", rooms)],
        json!({"version": "1.0.1"}),
        Some(key),
    );
    install_over_rest(hub, &c).await;
    c
}

async fn person_socket(hub: &TestHub, key: &str) -> RawSocket {
    let mut s = RawSocket::connect(&hub.ws_url()).await;
    let r = s
        .call(
            json!("c"),
            "person/network/connect",
            json!({"personKey": key}),
        )
        .await;
    assert!(r.get("result").is_some(), "{r}");
    s
}

async fn accept(s: &mut RawSocket, method: &str, link: &str) -> Value {
    s.call(json!("i"), method, json!({"link": link})).await
}

#[tokio::test]
async fn a_channel_link_lets_each_holder_in_and_every_dead_link_answers_alike() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let s = space(&hub, "games").await;
    let (room, other, readonly) = (
        channel(&hub, ADMIN_TOKEN, s, "lobby").await,
        channel(&hub, ADMIN_TOKEN, s, "backroom").await,
        channel(&hub, ADMIN_TOKEN, s, "notices").await,
    );
    let rooms = format!("{room} {other} {readonly}");
    let (app, _) = app_with_rooms(&hub, "maker", &["invite_create"], MAKER, &rooms).await;
    let granted = grant(&hub, ADMIN_TOKEN, principal(app), on_channel(room), "write").await;
    grant(
        &hub,
        ADMIN_TOKEN,
        principal(app),
        on_channel(readonly),
        "read",
    )
    .await;
    let run = start(&hub, "maker").await;
    let end = ended(&hub, run["runId"].as_str().unwrap()).await;
    assert_eq!(end["exitCode"], 0, "{end}");
    let log = end["log"].as_str().unwrap();
    let one = line(log, "one");
    let link = |v: &Value| v["link"].as_str().unwrap().to_string();
    assert!(link(&one).starts_with("sbinv_") && link(&one).len() == 6 + 32 + 1 + 64);
    assert_eq!(
        (one["room"].clone(), one["maxUses"].clone()),
        (json!(room), json!(1))
    );
    assert_eq!(
        line(log, "two")["maxUses"],
        1,
        "hosted.invite_default_uses by default"
    );
    for (k, field) in [
        ("too_many", "hosted.invite_max_uses"),
        ("forever", "ttl_seconds"),
    ] {
        let v = line(log, k);
        assert_eq!(v["error"], "bad_request", "{k}: {v}");
        assert!(v["message"].as_str().unwrap().contains(field), "{k}: {v}");
    }
    let (hidden, missing) = (line(log, "hidden"), line(log, "missing"));
    assert_eq!(missing["error"], "error");
    assert_eq!(
        (&hidden["error"], &hidden["message"]),
        (&missing["error"], &missing["message"]),
        "an existing channel the app may not see answers like a missing one"
    );
    // A channel it sees but may not write: refused in the broker's words.
    let read_only = line(log, "read_only");
    assert_eq!(read_only["error"], "capability_denied", "{read_only}");
    assert!(
        read_only["message"]
            .as_str()
            .unwrap()
            .contains("message.create"),
        "{read_only}"
    );

    let sam = person(&hub, "sam").await;
    let mut sam_s = person_socket(&hub, &sam.key).await;
    let joined = accept(&mut sam_s, "person/invite/accept", &link(&one)).await;
    assert_eq!(joined["result"]["joined"], true, "{joined}");
    assert_eq!(joined["result"]["conversation"]["id"], json!(room));
    let sent = sam_s
        .call(
            json!("m"),
            "person/message/send",
            json!({"conversationId": room, "parts": world::text("hi")}),
        )
        .await;
    assert!(sent.get("result").is_some(), "the link gave write: {sent}");
    // A second link to a room Sam writes already spends nothing.
    let again = accept(&mut sam_s, "person/invite/accept", &link(&line(log, "two"))).await;
    assert_eq!(again["result"]["joined"], false, "{again}");

    let carol = agent(&hub, "carol").await;
    let mut carol_s = RawSocket::connect_agent(&hub.ws_url(), &carol.key).await;
    let used_up = accept(&mut carol_s, "agent/invite/accept", &link(&one)).await["error"].clone();
    assert_eq!(
        used_up["message"],
        json!(switchboard::domain::hosted::invite::NOT_VALID)
    );
    assert_eq!(used_up["data"]["code"], "invite_not_valid");
    let id = link(&one)[6..38].to_string();
    let wrong_secret = format!("sbinv_{id}_{}", "0".repeat(64));
    let unknown = format!("sbinv_{}_{}", Uuid::now_v7().simple(), "1".repeat(64));
    for dead in ["garbage", wrong_secret.as_str(), unknown.as_str()] {
        let e = accept(&mut carol_s, "agent/invite/accept", dead).await["error"].clone();
        assert_eq!(e, used_up, "{dead}");
    }
    let two = link(&line(log, "two"));
    let carol_in = accept(&mut carol_s, "agent/invite/accept", &two).await;
    assert_eq!(carol_in["result"]["joined"], true, "{carol_in}");

    // The maker loses the room: its links die with its right.
    let path = format!("/api/v1/grants/{}", granted["grantId"].as_str().unwrap());
    expect(&hub, Method::DELETE, &path, ADMIN_TOKEN, None, 204).await;
    let dave = agent(&hub, "dave").await;
    let mut dave_s = RawSocket::connect_agent(&hub.ws_url(), &dave.key).await;
    let revoked = accept(&mut dave_s, "agent/invite/accept", &two).await["error"].clone();
    assert_eq!(revoked, used_up, "a revoked link answers as any dead one");
}

/// Hands a one-use link to its task's room out in the room, then waits for
/// the first message it hears there.
const TASK_ROOM: &str = r#"
from sb import out, text
cursor = None
heard = None
while heard is None:
    params = {"timeout": 30}
    if cursor is not None:
        params["after_id"] = cursor
    page = text("wait_for_message", params)
    cursor = page["nextAfter"]
    for e in page["events"]:
        if e["type"] == "app/task/activated":
            room = e["payload"]["conversations"][0]["id"]
            made = text("invite_create", {"room": room, "max_uses": 1})
            spare = text("invite_create", {"room": room, "max_uses": 1})
            text("send_message", {"to": room, "text": made["link"]})
            text("send_message", {"to": room, "text": spare["link"]})
        elif e["type"] == "app/message/received":
            heard = e["payload"]["message"]
out(heard=heard["parts"][0]["text"], sender=heard["senderId"])
"#;

#[tokio::test]
async fn a_task_room_link_brings_an_agent_into_the_task_and_no_one_else() {
    use crate::support::agents::{next_of, send};
    use switchboard::client::AgentClient;
    use switchboard::protocol::invites::{AgentInviteAccept, InviteAcceptParams};
    use switchboard::protocol::tasks::{AgentTaskRequest, TaskRequestParams};

    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let prims = ["invite_create", "send_message", "wait_for_message"];
    let c = card_with("doorman", &prims, TASK_ROOM, &[], json!({}), None);
    install_over_rest(&hub, &c).await;
    let run = start(&hub, "doorman").await;
    let app_id: Uuid = run["appId"].as_str().unwrap().parse().unwrap();
    let (alice, bob, carol, dave) = (
        agent(&hub, "alice").await,
        agent(&hub, "bob").await,
        agent(&hub, "carol").await,
        agent(&hub, "dave").await,
    );
    let a = AgentClient::connect(&hub.base, &alice.key).await.unwrap();
    let mut a_events = a.connection.notifications().expect("notifications");
    a.call::<AgentTaskRequest>(TaskRequestParams {
        app_id,
        invited_agent_ids: vec![bob.id],
        initial_conversation: None,
    })
    .await
    .unwrap();
    let handed = next_of(&mut a_events, "agent/message/received").await;
    let link = handed["payload"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    let room: Uuid = handed["payload"]["message"]["conversationId"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let spare = next_of(&mut a_events, "agent/message/received").await["payload"]["message"]
        ["parts"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();

    // A person holds a good link, but a task's room takes agents only; no
    // use is spent on the refusal.
    let sam = person(&hub, "sam").await;
    let mut sam_s = person_socket(&hub, &sam.key).await;
    let refused = accept(&mut sam_s, "person/invite/accept", &link).await;
    assert_eq!(refused["error"]["data"]["code"], "agents_only", "{refused}");

    let c = AgentClient::connect(&hub.base, &carol.key).await.unwrap();
    let mut c_events = c.connection.notifications().expect("notifications");
    let joined = c
        .call::<AgentInviteAccept>(InviteAcceptParams { link: link.clone() })
        .await
        .unwrap();
    assert!(joined.joined);
    assert!(joined.conversation.participants.contains(&carol.id));
    let told = next_of(&mut c_events, "agent/conversation/joined").await;
    assert_eq!(told["payload"]["conversation"]["id"], json!(room));

    let mut dave_s = RawSocket::connect_agent(&hub.ws_url(), &dave.key).await;
    let used_up = accept(&mut dave_s, "agent/invite/accept", &link).await;
    assert_eq!(
        used_up["error"]["data"]["code"], "invite_not_valid",
        "{used_up}"
    );

    // Carol is in the task now: her message passes its gate and reaches
    // the app.
    send(&c, room, "hello from carol").await;
    let end = ended(&hub, run["runId"].as_str().unwrap()).await;
    assert_eq!(end["exitCode"], 0, "{end}");
    let log = end["log"].as_str().unwrap();
    assert_eq!(line(log, "heard"), "hello from carol");
    assert_eq!(line(log, "sender"), json!(carol.id));

    // The task's app suspended: its task takes no one by a link, the one
    // refusal of every dead link (the redemption holds the task app's
    // installation); resumed, the spare link is still unspent.
    let path = |action: &str| format!("/api/v1/apps/{app_id}/installation/{action}");
    let (status, body) = super::runs::admin(&hub, Method::POST, &path("suspend"), None).await;
    assert_eq!(status, 200, "{body}");
    let held = accept(&mut dave_s, "agent/invite/accept", &spare).await;
    assert_eq!(held["error"]["data"]["code"], "invite_not_valid", "{held}");
    let (status, body) = super::runs::admin(&hub, Method::POST, &path("resume"), None).await;
    assert_eq!(status, 200, "{body}");
    let spare_id = switchboard::domain::hosted::invite::parse(&spare)
        .expect("a link")
        .id;
    let unspent = hub_store(&hub).await.invite(spare_id).await.unwrap();
    assert_eq!(unspent.map(|r| r.uses_left), Some(1), "no use spent");

    // The task closed: its room's unused link answers as a dead one to
    // everyone, the person too (the task's state is checked before the
    // redeemer's kind).
    let task_id = joined.conversation.task_id.expect("a task's room");
    close_task(&hub, task_id).await;
    let closed = accept(&mut sam_s, "person/invite/accept", &spare).await;
    assert_eq!(
        closed["error"]["data"]["code"], "invite_not_valid",
        "{closed}"
    );
}

/// Closes the task in the hub's own database, as its app's close would
/// (a hosted app has no primitive to close one).
async fn close_task(hub: &TestHub, task: Uuid) {
    use switchboard::domain::task::TaskState;
    let store = hub_store(hub).await;
    let moved = store
        .transition_task(
            task,
            TaskState::Active,
            TaskState::Closed,
            None,
            &switchboard::store::Effects::default(),
            switchboard::domain::now_millis(),
        )
        .await
        .unwrap();
    assert!(moved.is_some(), "the task was active");
}

const SHORT: &str = r#"
from sb import out, text
room = open("rooms.txt").read().split()[0]
out(made=text("invite_create", {"room": room, "ttl_seconds": 1}))
"#;

/// A link past its expiry lets no one in: made with a one-second expiry,
/// redeemed once the hub's clock (the one `expires_at` is set and checked
/// by) is past it, read by polling, not by a sleep of a guessed length.
/// The hub keeps the default prune interval (a minute), so the row is
/// still there when the link is refused: the refusal is the expiry's, not
/// a deleted row's. Then pruning deletes the row as a dead link.
#[tokio::test]
async fn an_expired_link_answers_as_every_dead_one_and_is_pruned() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let s = space(&hub, "games").await;
    let room = channel(&hub, ADMIN_TOKEN, s, "lobby").await;
    let (app, _) =
        app_with_rooms(&hub, "shorty", &["invite_create"], SHORT, &room.to_string()).await;
    grant(&hub, ADMIN_TOKEN, principal(app), on_channel(room), "write").await;
    let run = start(&hub, "shorty").await;
    let end = ended(&hub, run["runId"].as_str().unwrap()).await;
    assert_eq!(end["exitCode"], 0, "{end}");
    let made = line(end["log"].as_str().unwrap(), "made");
    let expires_at = made["expiresAt"].as_i64().unwrap();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while switchboard::domain::now_millis() <= expires_at {
        assert!(tokio::time::Instant::now() < deadline, "the clock stands");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let carol = agent(&hub, "carol").await;
    let mut carol_s = RawSocket::connect_agent(&hub.ws_url(), &carol.key).await;
    let link = made["link"].as_str().unwrap();
    let dead = accept(&mut carol_s, "agent/invite/accept", link).await;
    assert_eq!(dead["error"]["data"]["code"], "invite_not_valid", "{dead}");
    assert_eq!(
        dead["error"]["message"],
        json!(switchboard::domain::hosted::invite::NOT_VALID)
    );
    let id: Uuid = made["inviteId"].as_str().unwrap().parse().unwrap();
    let store = hub_store(&hub).await;
    let row = store
        .invite(id)
        .await
        .unwrap()
        .expect("refused, not pruned");
    assert!(row.uses_left > 0 && row.expires_at < switchboard::domain::now_millis());
    assert!(
        store
            .prune_invites(switchboard::domain::now_millis())
            .await
            .unwrap()
            >= 1
    );
    assert!(store.invite(id).await.unwrap().is_none(), "pruned as dead");
}

/// The hub's own database, opened beside it.
async fn hub_store(hub: &TestHub) -> switchboard::store::DynStore {
    let mut config = switchboard::config::Config::default();
    config.server.data_dir = hub.dir.path().join("data");
    switchboard::store::open_existing(&config).await.unwrap()
}
