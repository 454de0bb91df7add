//! The manifest's installation members (ADR 0023 §1): the scopes the app
//! asks for, the components it will post, how it is reached, the events it
//! wants and the names it answers the gates by. Each is optional, so a
//! seed-000 manifest stays valid; a member left out means its default.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{enum_member, pointer_escape, ManifestBounds, GATES};
use crate::domain::egress_policy::{self, BlockReason};
use crate::domain::installation::{Scope, ScopeSet};
use crate::domain::validate::{Problems, NO_CONTROL};

/// A component kind the app will post on its cards: asked for consent,
/// never enforced (seed 11 3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ComponentKind {
    Button,
    Select,
    Form,
}

/// What the schema says of an `interactionsUrl` and an `eventsUrl`:
/// `https://`, then a host
/// without user info. The hub's validation says the rest (no IP literal,
/// the allowlist, the length) with a problem naming the member.
const HTTPS_URL_PATTERN: &str = r"^https://[^/?#@\s]+([/?#]|$)";

/// How the app receives its commands and interactions (issue 17 delivers;
/// the URL is checked now so a manifest cannot store a target the hub
/// would refuse).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("allOf" = [{
    "if": {"properties": {"mode": {"const": "interactions_url"}}},
    "then": {
        "required": ["interactionsUrl"],
        "properties": {"interactionsUrl": {
            "type": "string",
            "format": "uri",
            "pattern": HTTPS_URL_PATTERN
        }}
    },
    "else": {"not": {"required": ["interactionsUrl"]}}
}, {
    "if": {"required": ["eventsUrl"]},
    "then": {"properties": {"eventsUrl": {
        "type": "string",
        "format": "uri",
        "pattern": HTTPS_URL_PATTERN
    }}}
}]))]
pub struct AppDelivery {
    pub mode: DeliveryMode,
    /// Required with mode `interactions_url`, refused otherwise: `https`,
    /// no user info, its host and port on `egress.allowlist`; 1 to 2048
    /// characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = URL_MAX), regex(pattern = NO_CONTROL))]
    pub interactions_url: Option<String>,
    /// Where the manifest's `eventSubscriptions` are delivered as signed
    /// webhooks (ADR 0033), in any mode: `https`, no user info, its host
    /// and port on `egress.allowlist`; 1 to 2048 characters. Needs
    /// `eventSubscriptions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = URL_MAX), regex(pattern = NO_CONTROL))]
    pub events_url: Option<String>,
}

impl Default for AppDelivery {
    fn default() -> Self {
        AppDelivery {
            mode: DeliveryMode::Gateway,
            interactions_url: None,
            events_url: None,
        }
    }
}

impl AppDelivery {
    pub(super) fn is_default(&self) -> bool {
        *self == AppDelivery::default()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryMode {
    /// Over the app's gateway socket.
    Gateway,
    /// As signed HTTPS requests to `interactionsUrl`.
    InteractionsUrl,
}

/// The names the hub calls the app's gates by (ADR 0023 §8). Params and
/// answers are the same under both.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CallbackNames {
    /// The catalogue's names (`app/message/authorize`, ...).
    #[default]
    #[serde(rename = "current")]
    Current,
    /// Seed 002's names: `apps/onBeforeMessageDelivery` and
    /// `apps/onBeforeDispatch`.
    #[serde(rename = "moltzap-v1")]
    MoltzapV1,
}

impl CallbackNames {
    pub(super) fn is_current(&self) -> bool {
        *self == CallbackNames::Current
    }
}

const URL_MAX: usize = 2048;

/// `/scopes`: known names, no duplicate. Answers the requested set (the
/// derived one when absent), or `None` when the list has problems, so the
/// checks that depend on it do not pile up on top of them.
pub(super) fn scopes(p: &mut Problems, value: Option<&Value>) -> Option<ScopeSet> {
    let items = match value {
        None => return Some(ScopeSet::of([Scope::EventsSubscribe])),
        Some(Value::Array(items)) => items,
        Some(_) => {
            p.push("/scopes", "must be an array");
            return None;
        }
    };
    let names = Scope::ALL.map(Scope::as_str);
    let mut set = ScopeSet::EMPTY;
    let mut clean = true;
    for (i, item) in items.iter().enumerate() {
        let at = format!("/scopes/{i}");
        match item.as_str().and_then(Scope::parse) {
            Some(scope) if set.contains(scope) => {
                p.push(at, format!("duplicate scope \"{scope}\""));
                clean = false;
            }
            Some(scope) => set = set.iter().chain([scope]).collect(),
            None => {
                enum_member(p, &at, Some(item), &names);
                clean = false;
            }
        }
    }
    clean.then_some(set)
}

/// A manifest that lists its scopes asks for `events:subscribe` whenever a
/// gate is a hook: the hook is called over the gateway socket, which that
/// scope admits. One problem per hook gate, at its kind.
pub(super) fn hooks_need_a_socket(p: &mut Problems, hooks: Option<&Value>, requested: ScopeSet) {
    if requested.contains(Scope::EventsSubscribe) {
        return;
    }
    let Some(hooks) = hooks.and_then(Value::as_object) else {
        return;
    };
    for gate in GATES {
        let kind = hooks.get(gate).and_then(|g| g.get("kind"));
        if kind.and_then(Value::as_str) == Some("hook") {
            p.push(
                format!("/hooks/{}/kind", pointer_escape(gate)),
                "a hook gate needs the scope events:subscribe in /scopes",
            );
        }
    }
}

/// `/components`: known kinds, no duplicate.
pub(super) fn components(p: &mut Problems, value: Option<&Value>) {
    let items = match value {
        None => return,
        Some(Value::Array(items)) => items,
        Some(_) => return p.push("/components", "must be an array"),
    };
    let names = ["button", "select", "form"];
    let mut seen = std::collections::HashSet::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("/components/{i}");
        match item.as_str().filter(|k| names.contains(k)) {
            Some(kind) if !seen.insert(kind) => {
                p.push(at, format!("duplicate component kind \"{kind}\""))
            }
            Some(_) => {}
            None => enum_member(p, &at, Some(item), &names),
        }
    }
}

/// `/delivery`: the mode, and the interactions URL exactly when the mode
/// needs one, vetted by the egress rules (the private override is not
/// consulted: it never widens the allowlist).
pub(super) fn delivery(
    p: &mut Problems,
    value: Option<&Value>,
    bounds: &ManifestBounds,
    subscriptions: Option<&Value>,
) {
    let known = ["mode", "interactionsUrl", "eventsUrl"];
    let Some(d) = p.object("/delivery", value, &known, false) else {
        return;
    };
    events_url(p, d.get("eventsUrl"), bounds, subscriptions);
    let modes = ["gateway", "interactions_url"];
    enum_member(p, "/delivery/mode", d.get("mode"), &modes);
    let at = "/delivery/interactionsUrl";
    match (
        d.get("mode").and_then(Value::as_str),
        d.get("interactionsUrl"),
    ) {
        (Some("interactions_url"), url) => interactions_url(p, at, url, bounds),
        (Some("gateway"), Some(_)) => p.push(at, "is allowed only with mode \"interactions_url\""),
        _ => {}
    }
}

/// `/delivery/eventsUrl`: a URL by the egress rules, for a manifest that
/// names event types to deliver there.
fn events_url(
    p: &mut Problems,
    value: Option<&Value>,
    bounds: &ManifestBounds,
    subscriptions: Option<&Value>,
) {
    let Some(value) = value else {
        return;
    };
    let at = "/delivery/eventsUrl";
    https_target(p, at, Some(value), &bounds.egress_allowlist);
    let named = subscriptions
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    if !named {
        p.push(at, "needs event types in /eventSubscriptions");
    }
}

fn interactions_url(p: &mut Problems, at: &str, value: Option<&Value>, bounds: &ManifestBounds) {
    https_target(p, at, value, &bounds.egress_allowlist);
}

/// A URL the hub will send to: 1 to 2048 characters, and the egress rules
/// with `allowlist` (never the private override). Webhook subscriptions
/// (ADR 0033) take their URL by the same rules.
pub fn https_target<'v>(
    p: &mut Problems,
    at: &str,
    value: Option<&'v Value>,
    allowlist: &[egress_policy::HostPort],
) -> Option<&'v str> {
    let url = p.string(at, value, 1, URL_MAX)?;
    match egress_policy::check_url(url, allowlist, &[]) {
        Ok(_) => Some(url),
        Err(reason) => {
            p.push(at, url_problem(&reason));
            None
        }
    }
}

/// Says what is wrong without repeating the URL (it may carry a secret
/// path).
fn url_problem(reason: &BlockReason) -> &'static str {
    match reason {
        BlockReason::BadUrl => "must be an absolute URL with a host name",
        BlockReason::NotHttps => "must use https",
        BlockReason::UserInfo => "must not contain user info",
        BlockReason::IpLiteral => "must name a host, not an IP address",
        BlockReason::NotAllowed => "its host and port must be on the hub's egress.allowlist",
        BlockReason::PrivateAddress | BlockReason::NoAddress => "is not reachable",
    }
}

/// `/eventSubscriptions`: event types the app audience receives, no
/// duplicate; they arrive only with `events:subscribe`.
pub(super) fn event_subscriptions(
    p: &mut Problems,
    value: Option<&Value>,
    bounds: &ManifestBounds,
    requested: Option<ScopeSet>,
) {
    let items = match value {
        None => return,
        Some(Value::Array(items)) => items,
        Some(_) => return p.push("/eventSubscriptions", "must be an array"),
    };
    let mut seen = std::collections::HashSet::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("/eventSubscriptions/{i}");
        match item.as_str() {
            Some(t) if !bounds.app_event_types.contains(&t) => p.push(
                at,
                "is not an event type the app audience receives (see the catalogue)",
            ),
            Some(t) if !seen.insert(t) => p.push(at, format!("duplicate event type {t:?}")),
            Some(_) => {}
            None => p.push(at, "must be a string"),
        }
    }
    let lacks = requested.is_some_and(|s| !s.contains(Scope::EventsSubscribe));
    if !items.is_empty() && lacks {
        p.push(
            "/eventSubscriptions",
            "needs the scope events:subscribe in /scopes",
        );
    }
}

/// `/callbackNames`: `current` or `moltzap-v1`.
pub(super) fn callback_names(p: &mut Problems, value: Option<&Value>) {
    if value.is_some() {
        enum_member(p, "/callbackNames", value, &["current", "moltzap-v1"]);
    }
}
