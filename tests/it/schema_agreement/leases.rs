//! `app/dispatch/resolve`: its schema against the hub, each case on a
//! lease of its own that the app's `app/dispatch/authorize` hook held (the
//! hub checks the resolution only on a held lease the app may resolve).

use serde_json::{json, Value};
use uuid::Uuid;

use super::Verdict::{Invalid, Valid};
use super::{case, judge, validator, with, without, Case};
use crate::support::agents::agent;
use crate::support::{RawSocket, TestHub};

const LEASE: &str = "held-lease";

fn corpus() -> Vec<Case> {
    let grant = json!({"leaseId": LEASE, "resolution": {"decision": "grant"}});
    let deny = json!({"leaseId": LEASE, "resolution": {"decision": "deny"}});
    let t = "/resolution/leaseTimeoutMs";
    vec![
        case("grant", grant.clone(), Valid),
        case("grant leaseTimeoutMs 1", with(&grant, t, json!(1)), Valid),
        case("grant leaseTimeoutMs 0", with(&grant, t, json!(0)), Invalid),
        case(
            "grant leaseTimeoutMs -1",
            with(&grant, t, json!(-1)),
            Invalid,
        ),
        case(
            "grant leaseTimeoutMs string",
            with(&grant, t, json!("5")),
            Invalid,
        ),
        // Above leases.max_timeout_ms the hub lowers it: not a refusal.
        case(
            "grant leaseTimeoutMs huge",
            with(&grant, t, json!(u64::MAX)),
            Valid,
        ),
        case("deny", deny.clone(), Valid),
        case(
            "deny with reason",
            with(&deny, "/resolution/reason", json!("no")),
            Valid,
        ),
        case(
            "deny reason number",
            with(&deny, "/resolution/reason", json!(5)),
            Invalid,
        ),
        case(
            "grant with reason",
            with(&grant, "/resolution/reason", json!("x")),
            Invalid,
        ),
        case(
            "decision hold",
            with(&grant, "/resolution/decision", json!("hold")),
            Invalid,
        ),
        case(
            "missing decision",
            with(&grant, "/resolution", json!({})),
            Invalid,
        ),
        case(
            "missing resolution",
            without(&grant, "/resolution"),
            Invalid,
        ),
        case(
            "leaseId not a uuid",
            with(&grant, "/leaseId", json!("l")),
            Invalid,
        ),
        case("unknown member", with(&grant, "/extra", json!(1)), Invalid),
    ]
}

struct Room {
    sender: RawSocket,
    recipient: RawSocket,
    app: RawSocket,
    conversation: Uuid,
    calls: u64,
}

impl Room {
    async fn open(hub: &TestHub) -> Room {
        let manifest = json!({
            "name": "Leases",
            "description": "Holds every dispatch",
            "limits": { "maxParticipants": 2 },
            "conversations": [{ "key": "room", "name": "Room", "participantFilter": "all" }],
            "hooks": {
                "dispatch_authorize": { "kind": "hook", "timeoutMs": 10000 },
                "message_authorize": { "kind": "forwardAllExceptSender" },
                "task_create": { "kind": "accept" }
            }
        });
        let (app_id, app_key) = hub.register_app(&manifest).await;
        let (a, b) = (agent(hub, "sender").await, agent(hub, "recipient").await);
        let mut sender = RawSocket::connect_agent(&hub.ws_url(), &a.key).await;
        let request = json!({"appId": app_id, "invitedAgentIds": [b.id]});
        let task = sender.call(json!(1), "agent/task/request", request).await;
        let conversation = task["result"]["conversations"][0]["id"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no task conversation: {task}"));
        Room {
            sender,
            recipient: RawSocket::connect_agent(&hub.ws_url(), &b.key).await,
            app: RawSocket::connect_app(&hub.ws_url(), &app_key).await,
            conversation,
            calls: 1,
        }
    }

    fn next_id(&mut self) -> Value {
        self.calls += 1;
        json!(self.calls)
    }

    /// A new message, and the recipient's lease on it, held by the app.
    async fn held_lease(&mut self) -> Uuid {
        let send =
            json!({"conversationId": self.conversation, "parts": [{"type": "text", "text": "m"}]});
        let id = self.next_id();
        let sent = self.sender.call(id, "agent/message/send", send).await;
        let message = &sent["result"]["message"]["id"];
        let request = json!({"conversationId": self.conversation, "messageId": message});
        let id = self.next_id();
        let app = &mut self.app;
        let (lease, ()) = tokio::join!(held_on(&mut self.recipient, id, request), async {
            let call = app.recv_request().await;
            assert_eq!(call["method"], "app/dispatch/authorize", "{call}");
            let hold = json!({"admission": {"decision": "hold"}});
            app.send_json(&json!({"jsonrpc": "2.0", "id": call["id"], "result": hold}))
                .await;
        });
        lease
    }
}

/// Asks for dispatch and waits for both the answer (a pending lease) and
/// the `agent/dispatch/held` event of that lease, in whichever order they
/// come.
async fn held_on(recipient: &mut RawSocket, id: Value, request: Value) -> Uuid {
    let frame =
        json!({"jsonrpc": "2.0", "id": id, "method": "agent/dispatch/request", "params": request});
    recipient.send_json(&frame).await;
    let mut lease = None;
    let mut held = Vec::new();
    loop {
        let f = recipient.recv().await;
        if f["id"] == id {
            assert_eq!(f["result"]["lease"]["state"], "pending", "{f}");
            lease = Some(f["result"]["lease"]["leaseId"].clone());
        } else if f["method"] == "agent/dispatch/held" {
            held.push(f["params"]["payload"]["lease"]["leaseId"].clone());
        }
        if let Some(l) = lease.as_ref().filter(|l| held.contains(l)) {
            return l.as_str().and_then(|s| s.parse().ok()).expect("a lease id");
        }
    }
}

#[tokio::test]
async fn lease_resolutions_agree_with_the_hub_on_every_case() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let mut room = Room::open(&hub).await;
    let schema = validator("app.dispatch.resolve.params.schema.json");
    let corpus = corpus();
    let mut problems = Vec::new();
    for c in &corpus {
        let mut doc = c.doc.clone();
        if doc["leaseId"] == json!(LEASE) {
            doc["leaseId"] = json!(room.held_lease().await);
        }
        let id = room.next_id();
        let frame = room.app.call(id, "app/dispatch/resolve", doc.clone()).await;
        let hub_valid = match frame.get("error") {
            None => true,
            Some(e) => e["code"] != json!(-32602),
        };
        problems.extend(judge(c, schema.is_valid(&doc), hub_valid));
    }
    eprintln!("schema agreement: {} lease resolution cases", corpus.len());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
