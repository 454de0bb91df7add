//! Issue 16, step "commands" (ADR 0027 §1-§4, §8, §10): commands an app
//! declares or registers, who sees and invokes them, what an invoke writes
//! (one event to the app, nothing else), autocomplete over the gateway, and
//! the lifecycle's effects, against a real hub on SQLite and (the main
//! paths) PostgreSQL.

mod audit;
mod autocomplete;
mod invoke;
mod lifecycle;
mod receive;
mod visibility;

use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::support::hub::{Options, ADMIN_TOKEN};
use crate::support::world::{self, expect, grant, on_channel, principal, Member, World};
use crate::support::{werewolf_manifest, RawSocket};

/// A test of `$case(options)` on SQLite and on a throwaway PostgreSQL.
macro_rules! both {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test] async fn $case() { super::$case(crate::support::TestHub::fast_options()).await; })*
        }
        mod postgres {
            $(#[tokio::test] async fn $case() { super::$case(crate::installations::on_postgres().await).await; })*
        }
    };
}
pub(crate) use both;

/// The Poll app's manifest: `vote` (write, a required choice), `find`
/// (read, an autocomplete option and an integer) and `purge` (admin).
pub fn poll_manifest() -> Value {
    let mut m = werewolf_manifest();
    m["name"] = json!("Poll");
    m["scopes"] = json!(["commands:write", "events:subscribe"]);
    m["commands"] = json!([
        {"name": "vote", "description": "Cast a vote", "requiredLevel": "write",
         "options": [{"name": "choice", "type": "string", "description": "Yes or no", "required": true,
                      "choices": [{"name": "Yes", "value": "yes"}, {"name": "No", "value": "no"}]}]},
        {"name": "find", "description": "Find someone", "requiredLevel": "read",
         "options": [{"name": "who", "type": "string", "description": "A name", "autocomplete": true},
                     {"name": "n", "type": "integer", "description": "How many"},
                     {"name": "room", "type": "channel", "description": "Where"}]},
        {"name": "purge", "description": "Clear the board", "requiredLevel": "admin"}
    ]);
    m
}

/// The people-and-places world plus the Poll app, with write on
/// `general`, and the agent `helper` with write there too.
pub struct Setup {
    pub w: World,
    pub poll: Member,
}

pub async fn setup(options: Options) -> Setup {
    let w = world::world(options).await;
    let (id, key) = w.hub.register_app(&poll_manifest()).await;
    let poll = Member {
        id: id.parse().unwrap(),
        key,
    };
    let alex = w.alex.key.clone();
    grant(
        &w.hub,
        &alex,
        principal(poll.id),
        on_channel(w.general),
        "write",
    )
    .await;
    grant(
        &w.hub,
        &alex,
        principal(w.helper.id),
        on_channel(w.general),
        "write",
    )
    .await;
    Setup { w, poll }
}

impl Setup {
    /// The commands `who` is offered in `conversation`, over the gateway.
    pub async fn listed(&self, s: &mut RawSocket, who: &Member, conversation: Uuid) -> Vec<Value> {
        let method = world::method_for(who, "command/list");
        let r = s
            .call(json!("l"), &method, json!({"conversationId": conversation}))
            .await;
        r["result"]["commands"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .clone()
    }

    /// The id of the live command `name` the app owns.
    pub async fn command_id(&self, name: &str) -> Uuid {
        let path = format!("/api/v1/apps/{}/commands", self.poll.id);
        let v = expect(&self.w.hub, Method::GET, &path, &self.poll.key, None, 200).await;
        let found = v["commands"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == json!(name))
            .unwrap_or_else(|| panic!("no command {name}: {v}"));
        found["commandId"].as_str().unwrap().parse().unwrap()
    }

    /// The installation lifecycle, by the operator over REST.
    pub async fn lifecycle(&self, action: &str) {
        let (method, path) = match action {
            "uninstall" => (
                Method::DELETE,
                format!("/api/v1/apps/{}/installation", self.poll.id),
            ),
            _ => (
                Method::POST,
                format!("/api/v1/apps/{}/installation/{action}", self.poll.id),
            ),
        };
        let a = world::call(&self.w.hub, method, &path, ADMIN_TOKEN, None).await;
        assert!(a.status / 100 == 2, "{action}: {}", a.body);
    }

    /// `*/command/invoke` by `who` on socket `s`: the whole frame.
    pub async fn invoke(
        &self,
        s: &mut RawSocket,
        who: &Member,
        command: Uuid,
        conversation: Uuid,
        options: Value,
    ) -> Value {
        let method = world::method_for(who, "command/invoke");
        let params =
            json!({"commandId": command, "conversationId": conversation, "options": options});
        s.call(json!("i"), &method, params).await
    }
}

pub fn names(commands: &[Value]) -> Vec<String> {
    let mut n: Vec<String> = commands
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    n.sort();
    n
}
