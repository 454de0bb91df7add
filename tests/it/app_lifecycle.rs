//! The seed's lifecycle tests as one scenario each, with both halves of
//! issue 16 on one app (ADR 0027 §2, §7): the app `Linker` declares the
//! command `link` and has posted two cards into `general`, and then
//!
//! - TestSuspendHidesCommandsAndDisablesComponents: a suspend hides `link`
//!   (listed nowhere, invoked as an unknown command) and disables every
//!   component, one `message.updated` per card with version + 1 to each of
//!   its readers;
//! - TestResumeKeepsComponentsDisabled: a resume shows `link` again (listed,
//!   invoked, the invocation reaching the app) while the components stay
//!   disabled (a press is 409 `component_used`);
//! - TestUninstallRemovesCommandsKeepsMessages: an uninstall removes `link`,
//!   disables the components and keeps the messages with their author.
//!
//! Each also checks the audit row's details. SQLite and PostgreSQL.

use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::installations::{app_events, audit_details, both, operator};
use crate::message_cards::{buttons, component_id, next, press, reason, table_with, Table};
use crate::support::event_reader::rest_events;
use crate::support::hub::Options;
use crate::support::raw::same_answer;
use crate::support::{werewolf_manifest, RawSocket};

both!(
    suspend_hides_commands_and_disables_components,
    resume_keeps_components_disabled,
    uninstall_removes_commands_keeps_messages,
);

/// Linker: cards and commands, with the events it is sent.
fn linker() -> Value {
    let mut m = werewolf_manifest();
    m["name"] = json!("Linker");
    m["scopes"] = json!([
        "messages:write",
        "components:write",
        "commands:write",
        "events:subscribe"
    ]);
    m["commands"] = json!([
        {"name": "link", "description": "Link a ticket", "requiredLevel": "write",
         "options": [{"name": "target", "type": "string", "description": "What to link", "autocomplete": true}]}
    ]);
    m
}

/// The table with Linker, its app socket, Alex's and the helper agent's
/// sockets, and the two cards Linker posted (both seen by Alex and the
/// helper).
struct Scene {
    t: Table,
    app: RawSocket,
    alex: RawSocket,
    helper: RawSocket,
    cards: [Value; 2],
    link: Uuid,
}

async fn scene(options: Options) -> Scene {
    let t = table_with(options, &linker()).await;
    let mut app = t.connect(&t.bot).await;
    let mut alex = t.connect(&t.alex).await;
    let mut helper = t.connect(&t.helper).await;
    let first = t.post(&mut app, buttons(), "once").await["message"].clone();
    let second = t.post(&mut app, buttons(), "once_per_principal").await["message"].clone();
    for _ in 0..2 {
        next(&mut alex, "person/message/received").await;
        next(&mut helper, "agent/message/received").await;
    }
    let offered = listed(&mut alex, t.general).await;
    assert_eq!(offered.len(), 1, "{offered:?}");
    assert_eq!(offered[0]["name"], json!("link"));
    let link = offered[0]["commandId"].as_str().unwrap().parse().unwrap();
    Scene {
        t,
        app,
        alex,
        helper,
        cards: [first, second],
        link,
    }
}

/// The commands Alex is offered in `conversation`.
async fn listed(alex: &mut RawSocket, conversation: Uuid) -> Vec<Value> {
    let r = alex
        .call(
            json!("list"),
            "person/command/list",
            json!({ "conversationId": conversation }),
        )
        .await;
    r["result"]["commands"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .clone()
}

fn invoke_params(command: Uuid, conversation: Uuid) -> Value {
    json!({"commandId": command, "conversationId": conversation, "options": {"target": "T-1"}})
}

impl Scene {
    fn app_id(&self) -> String {
        self.t.bot.id.to_string()
    }

    async fn lifecycle(&self, method: Method, rest: &str, status: u16) {
        let (got, body) = operator(&self.t.hub, method, &self.app_id(), rest, None).await;
        assert_eq!(got, status, "{rest}: {body}");
    }

    async fn suspend(&mut self) {
        self.lifecycle(Method::POST, "installation/suspend", 200)
            .await;
        assert_eq!(
            self.app.closed().await,
            Some((4012, "app_suspended".into()))
        );
    }

    /// `person/command/invoke` of `link` by Alex: the whole frame.
    async fn invoke(&mut self) -> Value {
        let params = invoke_params(self.link, self.t.general);
        self.alex
            .call(json!("invoke"), "person/command/invoke", params)
            .await
    }

    /// `link` answers exactly as an unknown command would.
    async fn link_is_unknown(&mut self) {
        let general = self.t.general;
        same_answer(
            &mut self.alex,
            "person/command/invoke",
            "NotFoundError",
            self.link,
            |id| invoke_params(id, general),
        )
        .await;
    }

    /// Each card's `message.updated` on `socket` (`method`), once per card:
    /// the messages, sorted by id.
    async fn updates(socket: &mut RawSocket, method: &str) -> Vec<Value> {
        let mut seen = Vec::new();
        for _ in 0..2 {
            seen.push(next(socket, method).await["payload"]["message"].clone());
        }
        seen.sort_by_key(|m| m["id"].to_string());
        seen
    }

    fn posted_ids(&self) -> Vec<Value> {
        let mut ids: Vec<Value> = self.cards.iter().map(|c| c["id"].clone()).collect();
        ids.sort_by_key(|v| v.to_string());
        ids
    }

    /// Every component of both cards is disabled at version 2, as each
    /// reader's `message.updated` says: exactly one per card.
    async fn readers_see_disabled_cards(&mut self) {
        let posted = self.posted_ids();
        let alex = Scene::updates(&mut self.alex, "person/message/updated").await;
        let helper = Scene::updates(&mut self.helper, "agent/message/updated").await;
        for seen in [&alex, &helper] {
            let ids: Vec<Value> = seen.iter().map(|m| m["id"].clone()).collect();
            assert_eq!(ids, posted, "one message.updated per card");
            for m in seen.iter() {
                assert_eq!(m["card"]["version"], json!(2), "{m}");
                let components = m["card"]["components"].as_array().unwrap();
                assert_eq!(components.len(), 2);
                for c in components {
                    assert_eq!(c["state"], json!("disabled"), "{m}");
                }
            }
        }
        // The helper's stored stream holds no more than those two.
        let (status, page) = rest_events(&self.t.hub, &self.t.helper.key, "after=0").await;
        assert_eq!(status, 200, "{page}");
        let stored = page["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["type"] == json!("agent/message/updated"))
            .count();
        assert_eq!(stored, 2, "{page}");
    }

    /// A press on each card is refused as a used control.
    async fn presses_are_refused(&mut self) {
        for (card, custom) in [(&self.cards[0], "yes"), (&self.cards[1], "no")] {
            let component = component_id(card, custom);
            let pressed = press(&mut self.alex, &self.t.alex, &card["id"], &component, None).await;
            assert_eq!(reason(&pressed), json!("component_used"), "{pressed}");
        }
    }

    /// The cards as Alex reads them now.
    async fn kept(&mut self) -> Vec<Value> {
        let page = self
            .alex
            .call(
                json!("history"),
                "person/message/list",
                json!({ "conversationId": self.t.general }),
            )
            .await;
        let messages = page["result"]["messages"].as_array().unwrap().clone();
        assert_eq!(messages.len(), 2, "{page}");
        messages
    }
}

async fn suspend_hides_commands_and_disables_components(options: Options) {
    let mut s = scene(options).await;
    let r = s.invoke().await;
    assert_eq!(r["result"]["accepted"], json!(true), "{r}");
    s.suspend().await;
    s.readers_see_disabled_cards().await;
    assert!(listed(&mut s.alex, s.t.general).await.is_empty());
    s.link_is_unknown().await;
    s.presses_are_refused().await;
    assert_eq!(
        audit_details(&s.t.hub, &s.app_id(), "app.suspend").await,
        [json!({"componentsDisabled": 4})]
    );
}

async fn resume_keeps_components_disabled(options: Options) {
    let mut s = scene(options).await;
    s.suspend().await;
    s.readers_see_disabled_cards().await;
    s.lifecycle(Method::POST, "installation/resume", 200).await;
    // The command is back: offered, invoked, and the invocation is the app's.
    let offered = listed(&mut s.alex, s.t.general).await;
    assert_eq!(offered.len(), 1, "{offered:?}");
    assert_eq!(offered[0]["commandId"], json!(s.link));
    let r = s.invoke().await;
    assert_eq!(r["result"]["accepted"], json!(true), "{r}");
    let invoked = app_events(&s.t.hub, &s.t.bot.key, "app/command/invoked").await;
    assert_eq!(invoked.len(), 1, "{invoked:?}");
    assert_eq!(
        invoked[0]["payload"]["invocation"]["invocationId"],
        r["result"]["invocationId"]
    );
    // The components are not: still disabled at version 2, refused.
    for m in s.kept().await {
        assert_eq!(m["card"]["version"], json!(2), "{m}");
        for c in m["card"]["components"].as_array().unwrap() {
            assert_eq!(c["state"], json!("disabled"), "{m}");
        }
    }
    s.presses_are_refused().await;
    assert_eq!(
        audit_details(&s.t.hub, &s.app_id(), "app.resume").await,
        [json!(null)],
        "a resume changes no component"
    );
}

async fn uninstall_removes_commands_keeps_messages(options: Options) {
    let mut s = scene(options).await;
    s.lifecycle(Method::DELETE, "installation", 204).await;
    s.readers_see_disabled_cards().await;
    assert!(listed(&mut s.alex, s.t.general).await.is_empty());
    s.link_is_unknown().await;
    s.presses_are_refused().await;
    // The messages stay, by Linker, with their text.
    let posted = s.cards.clone();
    for m in s.kept().await {
        let card = posted.iter().find(|c| c["id"] == m["id"]).unwrap();
        assert_eq!(m["senderId"], json!(s.t.bot.id), "{m}");
        assert_eq!(m["origin"], json!("app"), "{m}");
        assert_eq!(m["parts"], card["parts"], "{m}");
    }
    assert_eq!(
        audit_details(&s.t.hub, &s.app_id(), "app.uninstall").await,
        [json!({"commandsRemoved": ["link"], "componentsDisabled": 4})]
    );
}
