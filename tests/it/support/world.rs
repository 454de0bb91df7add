//! The world (ADR 0020 §6), built through the real operations: people
//! by REST, agents registered with Alex's key (so Alex owns them), spaces,
//! channels and grants by the operator and by Alex where Alex may.
//!
//! - people Alex, Sam, Robin; agents `helper` (in `researchers`) and
//!   `scout` (no grant), both owned by Alex; app `bot` (in `researchers`,
//!   write on Support/general);
//! - spaces Support (`general`, `escalation`), Research (`notes`),
//!   Marketing (`campaigns`);
//! - Alex admin on Support and Research; Sam read on Support; Robin nothing
//!   on Marketing; group `researchers` write on Research.

use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

use super::hub::{Options, ADMIN_TOKEN};
use super::{werewolf_manifest, RawSocket, TestHub};

/// A principal's id and key.
#[derive(Clone, Debug)]
pub struct Member {
    pub id: Uuid,
    pub key: String,
}

pub struct World {
    pub hub: TestHub,
    pub alex: Member,
    pub sam: Member,
    pub robin: Member,
    pub helper: Member,
    pub scout: Member,
    pub bot: Member,
    pub support: Uuid,
    pub research: Uuid,
    pub marketing: Uuid,
    pub general: Uuid,
    pub escalation: Uuid,
    pub notes: Uuid,
    pub campaigns: Uuid,
    pub researchers: Uuid,
}

/// A REST call's answer: status, headers (lowercased names, `date` left
/// out: it ticks between two calls) and the raw body.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// `method path` with `token` as Bearer and an optional JSON body.
pub async fn call(
    hub: &TestHub,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> Answer {
    let mut request = hub
        .http
        .request(method, format!("{}{path}", hub.base))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let r = request.send().await.expect("REST call");
    let status = r.status().as_u16();
    let mut headers: Vec<(String, String)> = r
        .headers()
        .iter()
        .filter(|(name, _)| name.as_str() != "date")
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    headers.sort();
    let body = r.text().await.expect("body");
    Answer {
        status,
        headers,
        body,
    }
}

/// The answer's JSON, asserting its status.
pub async fn expect(
    hub: &TestHub,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
    status: u16,
) -> Value {
    let what = format!("{method} {path}");
    let a = call(hub, method, path, token, body).await;
    assert_eq!(a.status, status, "{what}: {}", a.body);
    a.json()
}

fn id_of(v: &Value, pointer: &str) -> Uuid {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{pointer} missing in {v}"))
        .parse()
        .unwrap()
}

pub async fn person(hub: &TestHub, name: &str) -> Member {
    let body = Some(json!({ "name": name }));
    let v = expect(hub, Method::POST, "/api/v1/people", ADMIN_TOKEN, body, 201).await;
    Member {
        id: id_of(&v, "/personId"),
        key: v["personKey"].as_str().unwrap().to_string(),
    }
}

async fn owned_agent(hub: &TestHub, owner: &Member, name: &str) -> Member {
    let body = Some(json!({ "name": name }));
    let path = "/api/v1/agents/register";
    let v = expect(hub, Method::POST, path, &owner.key, body, 201).await;
    assert_eq!(v["ownerId"], json!(owner.id));
    Member {
        id: id_of(&v, "/agentId"),
        key: v["agentKey"].as_str().unwrap().to_string(),
    }
}

pub async fn space(hub: &TestHub, name: &str) -> Uuid {
    let body = Some(json!({ "name": name }));
    let v = expect(hub, Method::POST, "/api/v1/spaces", ADMIN_TOKEN, body, 201).await;
    id_of(&v, "/space/spaceId")
}

/// A channel created by whoever `token` is.
pub async fn channel(hub: &TestHub, token: &str, space: Uuid, name: &str) -> Uuid {
    let path = format!("/api/v1/spaces/{space}/channels");
    let body = Some(json!({ "name": name }));
    let v = expect(hub, Method::POST, &path, token, body, 201).await;
    assert_eq!(v["channel"]["kind"], json!("channel"));
    assert_eq!(v["channel"]["state"], json!("open"));
    id_of(&v, "/channel/id")
}

/// `POST /api/v1/grants` by `token`: the grant.
pub async fn grant(hub: &TestHub, token: &str, subject: Value, place: Value, level: &str) -> Value {
    let body = Some(json!({ "subject": subject, "place": place, "level": level }));
    let v = expect(hub, Method::POST, "/api/v1/grants", token, body, 201).await;
    v["grant"].clone()
}

pub fn principal(id: Uuid) -> Value {
    json!({ "principalId": id })
}

pub fn on_space(id: Uuid) -> Value {
    json!({ "spaceId": id })
}

pub fn on_channel(id: Uuid) -> Value {
    json!({ "channelId": id })
}

pub async fn world(options: Options) -> World {
    let hub = TestHub::start_with(options).await;
    let (alex, sam, robin) = (
        person(&hub, "Alex").await,
        person(&hub, "Sam").await,
        person(&hub, "Robin").await,
    );
    let helper = owned_agent(&hub, &alex, "helper").await;
    let scout = owned_agent(&hub, &alex, "scout").await;
    let mut manifest = werewolf_manifest();
    manifest["name"] = json!("Bot");
    // It sends into channels: that needs messages:write (ADR 0023 §1).
    manifest["scopes"] = json!(["messages:write", "events:subscribe"]);
    let (bot_id, bot_key) = hub.register_app(&manifest).await;
    let bot = Member {
        id: bot_id.parse().unwrap(),
        key: bot_key,
    };
    let (support, research, marketing) = (
        space(&hub, "Support").await,
        space(&hub, "Research").await,
        space(&hub, "Marketing").await,
    );
    grant(
        &hub,
        ADMIN_TOKEN,
        principal(alex.id),
        on_space(support),
        "admin",
    )
    .await;
    grant(
        &hub,
        ADMIN_TOKEN,
        principal(alex.id),
        on_space(research),
        "admin",
    )
    .await;
    // Alex is admin there, so Alex creates their channels.
    let general = channel(&hub, &alex.key, support, "general").await;
    let escalation = channel(&hub, &alex.key, support, "escalation").await;
    let notes = channel(&hub, &alex.key, research, "notes").await;
    let campaigns = channel(&hub, ADMIN_TOKEN, marketing, "campaigns").await;
    grant(
        &hub,
        &alex.key,
        principal(sam.id),
        on_space(support),
        "read",
    )
    .await;
    let body = Some(json!({ "name": "researchers" }));
    let v = expect(&hub, Method::POST, "/api/v1/groups", ADMIN_TOKEN, body, 201).await;
    let researchers = id_of(&v, "/group/groupId");
    for member in [robin.id, helper.id, bot.id] {
        let path = format!("/api/v1/groups/{researchers}/members/{member}");
        expect(&hub, Method::PUT, &path, ADMIN_TOKEN, None, 204).await;
    }
    let group = json!({ "groupId": researchers });
    grant(&hub, &alex.key, group, on_space(research), "write").await;
    grant(
        &hub,
        &alex.key,
        principal(bot.id),
        on_channel(general),
        "write",
    )
    .await;
    World {
        hub,
        alex,
        sam,
        robin,
        helper,
        scout,
        bot,
        support,
        research,
        marketing,
        general,
        escalation,
        notes,
        campaigns,
        researchers,
    }
}

impl World {
    /// A socket connected as a person, agent or app of the world.
    pub async fn connect(&self, who: &Member) -> RawSocket {
        let url = self.hub.ws_url();
        let (method, field) = match who.key.split('_').nth(1) {
            Some("person") => ("person/network/connect", "personKey"),
            Some("agent") => ("agent/network/connect", "agentKey"),
            _ => ("app/network/connect", "appKey"),
        };
        let mut s = RawSocket::connect(&url).await;
        let r = s.call(json!("c"), method, json!({ field: who.key })).await;
        assert!(r.get("result").is_some(), "{method}: {r}");
        s
    }
}

/// The method of `who`'s audience (`person/`, `agent/`, `app/`) for `rest`
/// (`message/send`).
pub fn method_for(who: &Member, rest: &str) -> String {
    let audience = who.key.split('_').nth(1).unwrap_or("app");
    format!("{audience}/{rest}")
}

pub fn text(s: &str) -> Value {
    json!([{ "type": "text", "text": s }])
}
