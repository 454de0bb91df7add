//! Issue 16's cards against a real hub (ADR 0027 §5-§7): an app posts a
//! message with components into a channel, people and agents operate them,
//! the app answers, and its lifecycle disables them. (`tests/it/cards.rs`
//! is the App Card packages of ADR 0010; these are message cards.)

mod answers;
mod lifecycle;
mod privacy;
mod rules;
mod triggers;

use serde_json::{json, Value};
use uuid::Uuid;

use crate::support::hub::{Options, ADMIN_TOKEN};
use crate::support::world::{
    channel, grant, on_channel, on_space, person, principal, space, Member,
};
use crate::support::{werewolf_manifest, RawSocket, TestHub};

pub(crate) use crate::installations::both;

/// A channel `general` in space `Support` with: the app `bot` (write on the
/// channel, the given scopes), Alex (a person, write), Sam (a person,
/// read), the agent `helper` (write) and Robin (a person with nothing).
pub struct Table {
    pub hub: TestHub,
    pub bot: Member,
    pub alex: Member,
    pub sam: Member,
    pub robin: Member,
    pub helper: Member,
    pub space: Uuid,
    pub general: Uuid,
}

pub const ALL_SCOPES: &[&str] = &["messages:write", "components:write", "events:subscribe"];

pub async fn table(options: Options, scopes: &[&str]) -> Table {
    let mut manifest = werewolf_manifest();
    manifest["name"] = json!("Bot");
    manifest["scopes"] = json!(scopes);
    table_with(options, &manifest).await
}

/// The same table with the app registered from `manifest`.
pub async fn table_with(options: Options, manifest: &Value) -> Table {
    let hub = TestHub::start_with(options).await;
    let (bot_id, bot_key) = hub.register_app(manifest).await;
    let bot = Member {
        id: bot_id.parse().unwrap(),
        key: bot_key,
    };
    let (alex, sam, robin) = (
        person(&hub, "Alex").await,
        person(&hub, "Sam").await,
        person(&hub, "Robin").await,
    );
    let (helper_id, helper_key) = hub.register_agent("helper").await;
    let helper = Member {
        id: helper_id.parse().unwrap(),
        key: helper_key,
    };
    let space = space(&hub, "Support").await;
    let general = channel(&hub, ADMIN_TOKEN, space, "general").await;
    for (who, level) in [(bot.id, "write"), (alex.id, "write"), (helper.id, "write")] {
        grant(
            &hub,
            ADMIN_TOKEN,
            principal(who),
            on_channel(general),
            level,
        )
        .await;
    }
    grant(
        &hub,
        ADMIN_TOKEN,
        principal(sam.id),
        on_space(space),
        "read",
    )
    .await;
    Table {
        hub,
        bot,
        alex,
        sam,
        robin,
        helper,
        space,
        general,
    }
}

impl Table {
    pub async fn connect(&self, who: &Member) -> RawSocket {
        let (method, field) = match who.key.split('_').nth(1) {
            Some("person") => ("person/network/connect", "personKey"),
            Some("agent") => ("agent/network/connect", "agentKey"),
            _ => ("app/network/connect", "appKey"),
        };
        let mut s = RawSocket::connect(&self.hub.ws_url()).await;
        let r = s.call(json!("c"), method, json!({ field: who.key })).await;
        assert!(r.get("result").is_some(), "{method}: {r}");
        s
    }

    /// The app posts a card of `components` into `general`: the result.
    pub async fn post(&self, app: &mut RawSocket, components: Value, card_use: &str) -> Value {
        let r = app
            .call(
                json!("post"),
                "app/message/send",
                json!({
                    "conversationId": self.general,
                    "parts": [{"type": "text", "text": "[SYSTEM] vote now"}],
                    "components": components,
                    "cardUse": card_use,
                }),
            )
            .await;
        assert!(r.get("result").is_some(), "{r}");
        r["result"].clone()
    }
}

/// Two buttons, `yes` and `no`.
pub fn buttons() -> Value {
    json!([
        {"kind": "button", "customId": "yes", "label": "Yes", "style": "primary"},
        {"kind": "button", "customId": "no", "label": "No"}
    ])
}

/// The component with `custom_id` on a card message.
pub fn component_id(message: &Value, custom_id: &str) -> String {
    message["card"]["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["customId"] == json!(custom_id))
        .unwrap_or_else(|| panic!("no {custom_id} in {message}"))["componentId"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The params of the next notification `method` (others skipped).
pub async fn next(s: &mut RawSocket, method: &str) -> Value {
    loop {
        let frame = s.recv().await;
        if frame["method"] == json!(method) {
            return frame["params"].clone();
        }
    }
}

/// `who` presses a component: the whole answer frame.
pub async fn press(
    s: &mut RawSocket,
    who: &Member,
    message_id: &Value,
    component: &str,
    values: Option<Value>,
) -> Value {
    let audience = who.key.split('_').nth(1).unwrap_or("agent");
    let mut params = json!({ "messageId": message_id, "componentId": component });
    if let Some(v) = values {
        params["values"] = v;
    }
    s.call(
        json!(format!("press-{}", Uuid::now_v7())),
        &format!("{audience}/interaction/create"),
        params,
    )
    .await
}

/// The error's `data.reason`, or its code when it has none.
pub fn reason(answer: &Value) -> Value {
    answer["error"]["data"]["reason"].clone()
}
