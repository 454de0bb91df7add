//! A person talking with agents: twins, events named by recipient kind,
//! resume and REST catch-up, on SQLite and PostgreSQL.

use serde_json::json;
use switchboard::client::AgentClient;
use uuid::Uuid;

use super::{call_ok, cli, connect_person, field, next_raw, person, post_person};
use crate::support::agents::{agent, direct, next_of, send, text, Agent};
use crate::support::event_reader::rest_events;
use crate::support::hub::Options;
use crate::support::{pg, werewolf_manifest, RawSocket, TestHub};

#[tokio::test]
async fn people_are_created_by_rest_and_cli_with_their_key_shown_once() {
    let hub = TestHub::start().await;
    let anonymous = hub.post("/api/v1/people", &json!({ "name": "alex" })).await;
    assert_eq!(anonymous.0, 401, "{}", anonymous.1);
    let (status, _, body) = post_person(&hub, &json!({ "name": "" }), None).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["details"][0]["pointer"], "/name", "{body}");

    let (status, cache, first) = post_person(&hub, &json!({ "name": "alex" }), Some("k1")).await;
    assert_eq!(status, 201, "{first}");
    assert_eq!(cache, "no-store");
    assert!(first["personKey"]
        .as_str()
        .unwrap()
        .starts_with("sbk_person_"));
    // A retry with the same Idempotency-Key names the same person and
    // withholds the key.
    let (status, _, again) = post_person(&hub, &json!({ "name": "alex" }), Some("k1")).await;
    assert_eq!(status, 201);
    assert_eq!(again["personId"], first["personId"]);
    assert!(again.get("personKey").is_none(), "{again}");
    assert_eq!(again["keyWithheld"], true);
    let (_, result) = connect_person(&hub, first["personKey"].as_str().unwrap()).await;
    assert_eq!(result["personId"], first["personId"]);

    // The operator CLI writes the hub's database; the hub serves the key.
    let out = cli(
        &hub.dir.path().join("data"),
        &[
            "person",
            "create",
            "--name",
            "robin",
            "--description",
            "ops",
        ],
    );
    let key = field(&out, "person key:");
    let (mut s, result) = connect_person(&hub, &key).await;
    assert_eq!(
        result["personId"].as_str().unwrap(),
        field(&out, "person id:")
    );
    let me = call_ok(&mut s, "i", "person/identity/get", json!({})).await;
    assert_eq!(me["principalId"], result["personId"]);
    assert_eq!(me["name"], "robin");
    assert_eq!(me["description"], "ops");
    assert!(me.get("agentId").is_none(), "{me}");
}

type Notifications = tokio::sync::mpsc::UnboundedReceiver<switchboard::client::Notification>;

/// Two people and two agents, connected.
struct Cast {
    p: super::Person,
    q: super::Person,
    a: Agent,
    b: Agent,
    ca: AgentClient,
    ra: Notifications,
    _cb: AgentClient,
    rb: Notifications,
    sp: RawSocket,
    sq: RawSocket,
}

async fn cast(hub: &TestHub) -> Cast {
    let p = person(hub, "pat").await;
    let q = person(hub, "quinn").await;
    let a = agent(hub, "ada").await;
    let b = agent(hub, "bob").await;
    let ca = AgentClient::connect(&hub.base, &a.key).await.unwrap();
    let ra = ca.connection.notifications().unwrap();
    let cb = AgentClient::connect(&hub.base, &b.key).await.unwrap();
    let rb = cb.connection.notifications().unwrap();
    let (sp, _) = connect_person(hub, &p.key).await;
    let (sq, _) = connect_person(hub, &q.key).await;
    Cast {
        p,
        q,
        a,
        b,
        ca,
        ra,
        _cb: cb,
        rb,
        sp,
        sq,
    }
}

/// A direct conversation both ways and a mixed group, on one backend.
async fn people_and_agents_talk(hub: &TestHub) {
    let mut cast = cast(hub).await;
    direct_both_ways(&mut cast).await;
    mixed_group(&mut cast).await;
    refused_participants(hub, &mut cast.sp).await;
}

/// A person and an agent in a direct conversation: messages and typing
/// both ways, the person's events named `person/...`, its reads twins.
async fn direct_both_ways(cast: &mut Cast) {
    let Cast {
        p, a, ca, ra, sp, ..
    } = cast;
    // The person opens a direct conversation with the agent.
    let created = call_ok(
        sp,
        "1",
        "person/conversation/create",
        json!({ "kind": "direct", "participants": [a.id] }),
    )
    .await;
    let direct = created["conversation"]["id"].clone();
    let announced = next_of(ra, "agent/conversation/created").await;
    assert_eq!(announced["payload"]["conversation"]["id"], direct);

    // Agent to person: the person's copy is `person/message/received`.
    let sent = switchboard::protocol::conversations::MessageSendParams {
        conversation_id: direct.as_str().unwrap().parse().unwrap(),
        parts: text("hello pat"),
        client_msg_id: None,
        reply_to: None,
        thread_id: None,
        components: None,
        card_use: None,
    };
    ca.call::<switchboard::protocol::conversations::AgentMessageSend>(sent)
        .await
        .unwrap();
    let got = next_raw(sp, "person/message/received").await;
    assert_eq!(got["payload"]["message"]["parts"][0]["text"], "hello pat");
    assert_eq!(got["payload"]["message"]["senderId"], json!(a.id));

    // Person to agent, and typing both ways.
    call_ok(
        sp,
        "2",
        "person/message/send",
        json!({ "conversationId": direct, "parts": [{ "type": "text", "text": "hi ada" }] }),
    )
    .await;
    let got = next_of(ra, "agent/message/received").await;
    assert_eq!(got["payload"]["message"]["senderId"], json!(p.id));
    assert_eq!(got["payload"]["message"]["origin"], "person");
    call_ok(
        sp,
        "3",
        "person/typing/send",
        json!({ "conversationId": direct }),
    )
    .await;
    let typing = next_of(ra, "agent/typing/received").await;
    assert_eq!(typing["payload"]["principalId"], json!(p.id));
    assert!(typing["payload"].get("agentId").is_none(), "{typing}");
    ca.call::<switchboard::protocol::conversations::AgentTypingSend>(
        switchboard::protocol::conversations::TypingSendParams {
            conversation_id: direct.as_str().unwrap().parse().unwrap(),
        },
    )
    .await
    .unwrap();
    let typing = next_raw(sp, "person/typing/received").await;
    assert_eq!(typing["payload"]["principalId"], json!(a.id));
    assert_eq!(typing["payload"]["agentId"], json!(a.id));

    // The person's history and list hold the conversation and both messages.
    let history = call_ok(
        sp,
        "4",
        "person/message/list",
        json!({ "conversationId": direct }),
    )
    .await;
    assert_eq!(
        history["messages"].as_array().unwrap().len(),
        2,
        "{history}"
    );
    let list = call_ok(sp, "5", "person/conversation/list", json!({})).await;
    assert_eq!(list["conversations"][0]["id"], direct);
    let get = call_ok(
        sp,
        "6",
        "person/conversation/get",
        json!({ "conversationId": direct }),
    )
    .await;
    assert_eq!(
        get["conversation"]["participants"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

/// A group of two agents and two people: one send, an event per kind,
/// each kind's copies sharing one id.
async fn mixed_group(cast: &mut Cast) {
    let Cast {
        q,
        a,
        b,
        ca,
        rb,
        sp,
        sq,
        ..
    } = cast;
    let group = call_ok(
        sp,
        "7",
        "person/conversation/create",
        json!({ "kind": "group", "participants": [a.id, b.id, q.id], "name": "mixed" }),
    )
    .await;
    let group = group["conversation"]["id"].clone();
    let created_q = next_raw(sq, "person/conversation/created").await;
    assert_eq!(created_q["payload"]["conversation"]["id"], group);
    next_of(rb, "agent/conversation/created").await;
    ca.call::<switchboard::protocol::conversations::AgentMessageSend>(
        switchboard::protocol::conversations::MessageSendParams {
            conversation_id: group.as_str().unwrap().parse().unwrap(),
            parts: text("to all"),
            client_msg_id: None,
            reply_to: None,
            thread_id: None,
            components: None,
            card_use: None,
        },
    )
    .await
    .unwrap();
    let to_b = next_of(rb, "agent/message/received").await;
    let to_p = next_raw(sp, "person/message/received").await;
    let to_q = next_raw(sq, "person/message/received").await;
    let message = &to_b["payload"]["message"]["id"];
    assert_eq!(&to_p["payload"]["message"]["id"], message);
    assert_eq!(&to_q["payload"]["message"]["id"], message);
    assert_eq!(to_p["id"], to_q["id"], "the people's copies are one event");
    assert_ne!(to_p["id"], to_b["id"], "each kind has its own event");
    assert_eq!(to_p["type"], "person/message/received");
    assert_eq!(to_b["type"], "agent/message/received");
}

/// Apps and unknown ids are no participants: the same NotFound, naming
/// the id as `principalId`.
async fn refused_participants(hub: &TestHub, sp: &mut RawSocket) {
    let (app, _) = hub.register_app(&werewolf_manifest()).await;
    for id in [Uuid::new_v4().to_string(), app] {
        let err = sp
            .call(
                json!("8"),
                "person/conversation/create",
                json!({ "kind": "direct", "participants": [id] }),
            )
            .await;
        assert_eq!(err["error"]["_tag"], "NotFoundError", "{err}");
        assert_eq!(err["error"]["data"]["principalId"], json!(id), "{err}");
        assert_eq!(err["error"]["message"], format!("principal {id} not found"));
    }
}

#[tokio::test]
async fn a_person_and_agents_talk_on_sqlite() {
    people_and_agents_talk(&TestHub::start_with(TestHub::fast_options()).await).await;
}

#[tokio::test]
async fn a_person_and_agents_talk_on_postgres() {
    let url = pg::fresh_database().await;
    let hub = TestHub::start_with(Options {
        database_url: Some(url),
        ..TestHub::fast_options()
    })
    .await;
    people_and_agents_talk(&hub).await;
}

#[tokio::test]
async fn a_person_resumes_and_catches_up_over_rest() {
    let hub = TestHub::start().await;
    let p = person(&hub, "pat").await;
    let a = agent(&hub, "ada").await;
    let ca = AgentClient::connect(&hub.base, &a.key).await.unwrap();
    let direct = direct(&ca, p.id).await;
    for i in 0..3 {
        send(&ca, direct, &format!("m{i}")).await;
    }
    let (rest_status, page) = rest_events(&hub, &p.key, "after=0").await;
    assert_eq!(rest_status, 200, "{page}");
    let events = page["events"].as_array().unwrap();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "person/conversation/created",
            "person/message/received",
            "person/message/received",
            "person/message/received"
        ]
    );
    // Connected, the person acknowledges seq 2; a new socket resumes there.
    let (mut s, result) = connect_person(&hub, &p.key).await;
    assert_eq!(result["events"]["latestSeq"], 4);
    let epoch = result["events"]["syncEpoch"].as_str().unwrap().to_string();
    call_ok(&mut s, "a", "person/event/ack", json!({ "seq": 2 })).await;
    drop(s);
    let mut s = RawSocket::connect(&hub.ws_url()).await;
    s.send_json(
        &json!({"jsonrpc": "2.0", "id": "c", "method": "person/network/connect",
        "params": { "personKey": p.key, "resume": { "after": 3, "syncEpoch": epoch } }}),
    )
    .await;
    let mut seqs = Vec::new();
    while seqs.is_empty() {
        let frame = s.recv().await;
        if let Some(seq) = frame["params"]["seq"].as_u64() {
            assert_eq!(frame["method"], "person/message/received");
            seqs.push(seq);
        }
    }
    assert_eq!(seqs, [4]);
    // Without resume, delivery starts after the acknowledged seq.
    let mut s = RawSocket::connect(&hub.ws_url()).await;
    s.send_json(
        &json!({"jsonrpc": "2.0", "id": "c", "method": "person/network/connect",
        "params": { "personKey": p.key }}),
    )
    .await;
    let mut seqs = Vec::new();
    while seqs.len() < 2 {
        let frame = s.recv().await;
        if let Some(seq) = frame["params"]["seq"].as_u64() {
            seqs.push(seq);
        }
    }
    assert_eq!(seqs, [3, 4]);
}

#[tokio::test]
async fn a_person_connects_on_postgres() {
    let url = pg::fresh_database().await;
    let hub = TestHub::start_with(Options {
        database_url: Some(url),
        ..Options::default()
    })
    .await;
    let p = person(&hub, "pat").await;
    let (mut s, result) = connect_person(&hub, &p.key).await;
    assert_eq!(result["personId"], json!(p.id));
    let me = call_ok(&mut s, "i", "person/identity/get", json!({})).await;
    assert_eq!(me["principalId"], json!(p.id));
}
