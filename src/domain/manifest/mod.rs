//! The app manifest: what an app declares when it registers, above all an
//! explicit policy for each of the three gates. There is no omission default;
//! an app that wants the open posture says so. The installation members
//! (ADR 0023 §1) are optional, so the seed-000 shape stays valid and is
//! stored, and read back, without them.

mod commands;
mod members;
#[cfg(test)]
mod tests;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::egress_policy::HostPort;
use super::installation::{Scope, ScopeSet};
use super::validate::{pointer_escape, FieldProblem, Problems, NO_CONTROL};

pub use commands::{
    validate_command, ChoiceValue, CommandDecl, OptionChoice, OptionDecl, OptionType,
    DEFAULT_DESCRIPTION_MAX_CHARS, DEFAULT_MAX_COMMANDS,
};
pub use members::{https_target, AppDelivery, CallbackNames, ComponentKind, DeliveryMode};

/// The schema's `allOf` carries the one rule across members: a manifest
/// that lists its scopes without `events:subscribe` has no hook gate and no
/// event subscription (both reach the app over its socket).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("allOf" = [{
    "if": {
        "required": ["scopes"],
        "properties": {"scopes": {"not": {"contains": {"const": "events:subscribe"}}}}
    },
    "then": {
        "properties": {
            "hooks": {"properties": {
                "dispatch_authorize": {"properties": {"kind": {"not": {"const": "hook"}}}},
                "message_authorize": {"properties": {"kind": {"not": {"const": "hook"}}}},
                "task_create": {"properties": {"kind": {"not": {"const": "hook"}}}}
            }},
            "eventSubscriptions": {"maxItems": 0}
        }
    }
}]))]
pub struct Manifest {
    /// Display name, 1 to 100 characters (code points), no control
    /// characters.
    #[schemars(length(min = 1, max = NAME_MAX), regex(pattern = NO_CONTROL))]
    pub name: String,
    /// What the app does, 1 to 2000 characters, no control characters.
    #[schemars(length(min = 1, max = DESCRIPTION_MAX), regex(pattern = NO_CONTROL))]
    pub description: String,
    pub limits: ManifestLimits,
    /// Conversations created in every accepted task: at most
    /// `limits.max_manifest_conversations` (the schema carries its default),
    /// keys unique within the manifest.
    #[serde(default)]
    #[schemars(length(max = DEFAULT_MAX_CONVERSATIONS))]
    pub conversations: Vec<ConversationTemplate>,
    pub hooks: GatePolicies,
    /// The scopes the app asks for. Absent (the seed-000 shape) is not
    /// empty: such a manifest asks for `events:subscribe`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Vec<Scope>", extend("uniqueItems" = true))]
    pub scopes: Option<Vec<Scope>>,
    /// Slash commands, at most `command.max_per_principal` (the schema
    /// carries its default); names unique case-insensitively.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = commands::DEFAULT_MAX_COMMANDS))]
    pub commands: Vec<CommandDecl>,
    /// The component kinds the app will post, for consent; each once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("uniqueItems" = true))]
    pub components: Vec<ComponentKind>,
    /// How the app is reached; default `{"mode": "gateway"}`.
    #[serde(default, skip_serializing_if = "AppDelivery::is_default")]
    pub delivery: AppDelivery,
    /// Event types of the app audience it wants (needs `events:subscribe`),
    /// each once; the export lists the catalogue's types as the items' enum.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("uniqueItems" = true))]
    pub event_subscriptions: Vec<String>,
    /// The names its gates are called by; default `current`.
    #[serde(default, skip_serializing_if = "CallbackNames::is_current")]
    pub callback_names: CallbackNames,
}

impl Manifest {
    /// The webhook subscription the manifest keeps (ADR 0033): its
    /// `delivery.eventsUrl` and `eventSubscriptions`, when it names both.
    pub fn events_subscription(&self) -> Option<(&str, &[String])> {
        let url = self.delivery.events_url.as_deref()?;
        (!self.event_subscriptions.is_empty()).then_some((url, self.event_subscriptions.as_slice()))
    }

    /// The scopes the manifest asks for: its list, or for a scopeless
    /// (seed-000) manifest `{events:subscribe}`, since such an app learns
    /// its tasks over its socket (ADR 0023 §1).
    pub fn requested_scopes(&self) -> ScopeSet {
        match &self.scopes {
            Some(list) => list.iter().copied().collect(),
            None => ScopeSet::of([Scope::EventsSubscribe]),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManifestLimits {
    /// Most participants a task of this app may have: 1 to
    /// `limits.max_participants` (the schema carries its default, 1000).
    #[schemars(range(min = 1, max = DEFAULT_MAX_PARTICIPANTS))]
    pub max_participants: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConversationTemplate {
    /// Unique within the manifest: 1 to 64 of lowercase letters, digits,
    /// `-` and `_`.
    #[schemars(length(min = 1, max = KEY_MAX), regex(pattern = KEY_PATTERN))]
    pub key: String,
    /// 1 to 100 characters, no control characters.
    #[schemars(length(min = 1, max = NAME_MAX), regex(pattern = NO_CONTROL))]
    pub name: String,
    pub participant_filter: ParticipantFilter,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ParticipantFilter {
    /// Every task participant joins.
    All,
    /// Nobody joins; the app adds participants.
    None,
}

/// One policy per gate, all three required.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GatePolicies {
    pub dispatch_authorize: DispatchPolicy,
    pub message_authorize: MessagePolicy,
    pub task_create: TaskCreatePolicy,
}

/// Recipient-side admission.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum DispatchPolicy {
    Grant,
    Deny {
        /// 1 to 500 characters, no control characters.
        #[schemars(length(min = 1, max = REASON_MAX), regex(pattern = NO_CONTROL))]
        reason: String,
    },
    Hook {
        /// `hooks.min_timeout_ms` to `hooks.max_timeout_ms` (the schema
        /// carries their defaults, 10 and 60000).
        #[serde(rename = "timeoutMs")]
        #[schemars(range(min = DEFAULT_MIN_HOOK_TIMEOUT_MS, max = DEFAULT_MAX_HOOK_TIMEOUT_MS))]
        timeout_ms: u64,
    },
}

/// Send-side fan-out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum MessagePolicy {
    ForwardAllExceptSender,
    Deny {
        /// 1 to 500 characters, no control characters.
        #[schemars(length(min = 1, max = REASON_MAX), regex(pattern = NO_CONTROL))]
        reason: String,
    },
    Hook {
        /// `hooks.min_timeout_ms` to `hooks.max_timeout_ms` (the schema
        /// carries their defaults, 10 and 60000).
        #[serde(rename = "timeoutMs")]
        #[schemars(range(min = DEFAULT_MIN_HOOK_TIMEOUT_MS, max = DEFAULT_MAX_HOOK_TIMEOUT_MS))]
        timeout_ms: u64,
    },
}

/// Task creation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum TaskCreatePolicy {
    Accept,
    Reject {
        /// 1 to 500 characters, no control characters.
        #[schemars(length(min = 1, max = REASON_MAX), regex(pattern = NO_CONTROL))]
        reason: String,
    },
    Hook {
        /// `hooks.min_timeout_ms` to `hooks.max_timeout_ms` (the schema
        /// carries their defaults, 10 and 60000).
        #[serde(rename = "timeoutMs")]
        #[schemars(range(min = DEFAULT_MIN_HOOK_TIMEOUT_MS, max = DEFAULT_MAX_HOOK_TIMEOUT_MS))]
        timeout_ms: u64,
    },
}

/// Operator bounds a manifest must respect (configuration `hooks.*`,
/// `limits.*`, `command.*` and `egress.allowlist`), and the catalogue's
/// event types of the app audience, passed in so the domain does not
/// depend on the protocol.
#[derive(Clone, Debug)]
pub struct ManifestBounds {
    pub min_hook_timeout_ms: u64,
    pub max_hook_timeout_ms: u64,
    pub max_participants: u32,
    pub max_conversations: usize,
    pub max_commands: usize,
    pub command_description_max_chars: usize,
    pub egress_allowlist: Vec<HostPort>,
    pub app_event_types: Vec<&'static str>,
}

/// The three gates, in the order their problems are reported.
const GATES: [&str; 3] = ["dispatch_authorize", "message_authorize", "task_create"];

const NAME_MAX: usize = 100;
const DESCRIPTION_MAX: usize = 2000;
const REASON_MAX: usize = 500;
const KEY_MAX: usize = 64;
/// A conversation template's key (length apart).
const KEY_PATTERN: &str = "^[a-z0-9_-]+$";

/// The defaults of the operator bounds (configuration `hooks.*` and
/// `limits.*`); the exported schema carries them.
pub const DEFAULT_MIN_HOOK_TIMEOUT_MS: u64 = 10;
pub const DEFAULT_MAX_HOOK_TIMEOUT_MS: u64 = 60_000;
pub const DEFAULT_MAX_PARTICIPANTS: u32 = 1_000;
pub const DEFAULT_MAX_CONVERSATIONS: usize = 32;

/// Every top-level member; any other is refused with its pointer.
const MEMBERS: [&str; 11] = [
    "name",
    "description",
    "limits",
    "conversations",
    "hooks",
    "scopes",
    "commands",
    "components",
    "delivery",
    "eventSubscriptions",
    "callbackNames",
];

/// Validates a manifest document and reports every problem with a JSON pointer
/// relative to the manifest's root.
pub fn validate(doc: &Value, bounds: &ManifestBounds) -> Result<Manifest, Vec<FieldProblem>> {
    let mut p = Problems::default();
    let Some(root) = p.object("", Some(doc), &MEMBERS, true) else {
        return Err(p.into_vec());
    };
    p.string("/name", root.get("name"), 1, NAME_MAX);
    p.string("/description", root.get("description"), 1, DESCRIPTION_MAX);

    if let Some(limits) = p.object("/limits", root.get("limits"), &["maxParticipants"], true) {
        p.integer(
            "/limits/maxParticipants",
            limits.get("maxParticipants"),
            1,
            bounds.max_participants as u64,
        );
    }

    conversations(&mut p, root.get("conversations"), bounds);
    hooks(&mut p, root.get("hooks"), bounds);

    let requested = members::scopes(&mut p, root.get("scopes"));
    if let (Some(_), Some(requested)) = (root.get("scopes"), requested) {
        members::hooks_need_a_socket(&mut p, root.get("hooks"), requested);
    }
    commands::commands(&mut p, root.get("commands"), bounds);
    members::components(&mut p, root.get("components"));
    let subscriptions = root.get("eventSubscriptions");
    members::delivery(&mut p, root.get("delivery"), bounds, subscriptions);
    members::event_subscriptions(&mut p, subscriptions, bounds, requested);
    members::callback_names(&mut p, root.get("callbackNames"));

    if !p.is_empty() {
        return Err(p.into_vec());
    }
    serde_json::from_value(doc.clone()).map_err(|e| {
        // The checks above mirror the types; reaching this is a bug in them, but
        // the caller still gets an answer rather than a panic.
        vec![FieldProblem {
            pointer: String::new(),
            message: e.to_string(),
        }]
    })
}

/// `/conversations`: at most `bounds.max_conversations` templates, each with
/// a unique key of lowercase letters, digits, '-' and '_'.
fn conversations(p: &mut Problems, value: Option<&Value>, bounds: &ManifestBounds) {
    match value {
        None => {}
        Some(Value::Array(items)) => {
            if items.len() > bounds.max_conversations {
                p.push(
                    "/conversations",
                    format!("must have at most {} entries", bounds.max_conversations),
                );
            }
            let mut seen = std::collections::HashSet::new();
            for (i, item) in items.iter().enumerate() {
                let at = format!("/conversations/{i}");
                let Some(c) =
                    p.object(&at, Some(item), &["key", "name", "participantFilter"], true)
                else {
                    continue;
                };
                if let Some(key) = p.string(&format!("{at}/key"), c.get("key"), 1, KEY_MAX) {
                    if !key.bytes().all(|b| {
                        b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_'
                    }) {
                        p.push(
                            format!("{at}/key"),
                            "may contain only lowercase letters, digits, '-' and '_'",
                        );
                    } else if !seen.insert(key.to_string()) {
                        p.push(format!("{at}/key"), format!("duplicate key {key:?}"));
                    }
                }
                p.string(&format!("{at}/name"), c.get("name"), 1, NAME_MAX);
                enum_member(
                    p,
                    &format!("{at}/participantFilter"),
                    c.get("participantFilter"),
                    &["all", "none"],
                );
            }
        }
        Some(_) => p.push("/conversations", "must be an array"),
    }
}

/// `/hooks`: the policy of each of the three gates.
fn hooks(p: &mut Problems, value: Option<&Value>, bounds: &ManifestBounds) {
    if let Some(hooks) = p.object(
        "/hooks",
        value,
        &["dispatch_authorize", "message_authorize", "task_create"],
        true,
    ) {
        policy(
            p,
            hooks,
            "dispatch_authorize",
            &["grant"],
            &["deny"],
            bounds,
        );
        policy(
            p,
            hooks,
            "message_authorize",
            &["forwardAllExceptSender"],
            &["deny"],
            bounds,
        );
        policy(p, hooks, "task_create", &["accept"], &["reject"], bounds);
    }
}

fn enum_member(p: &mut Problems, at: &str, value: Option<&Value>, allowed: &[&str]) {
    match value {
        Some(Value::String(s)) if allowed.contains(&s.as_str()) => {}
        None => p.push(at, "is required"),
        Some(_) => p.push(at, format!("must be one of {}", quoted(allowed))),
    }
}

fn quoted(items: &[&str]) -> String {
    items
        .iter()
        .map(|s| format!("\"{s}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One gate's policy: a plain kind, a refusing kind with a reason, or `hook`.
fn policy(
    p: &mut Problems,
    hooks: &serde_json::Map<String, Value>,
    gate: &str,
    plain: &[&str],
    refusing: &[&str],
    bounds: &ManifestBounds,
) {
    let at = format!("/hooks/{}", pointer_escape(gate));
    let value = hooks.get(gate);
    let Some(obj) = p.object(&at, value, &["kind", "reason", "timeoutMs"], true) else {
        return;
    };
    let kinds: Vec<&str> = plain
        .iter()
        .chain(refusing)
        .copied()
        .chain(std::iter::once("hook"))
        .collect();
    let kind = match obj.get("kind") {
        Some(Value::String(k)) if kinds.contains(&k.as_str()) => k.as_str(),
        None => {
            p.push(format!("{at}/kind"), "is required");
            return;
        }
        Some(_) => {
            p.push(
                format!("{at}/kind"),
                format!("must be one of {}", quoted(&kinds)),
            );
            return;
        }
    };
    let allowed: &[&str] = if refusing.contains(&kind) {
        &["kind", "reason"]
    } else if kind == "hook" {
        &["kind", "timeoutMs"]
    } else {
        &["kind"]
    };
    for member in obj.keys() {
        if !allowed.contains(&member.as_str()) {
            p.push(
                format!("{at}/{}", pointer_escape(member)),
                format!("is not allowed for kind \"{kind}\""),
            );
        }
    }
    if refusing.contains(&kind) {
        p.string(&format!("{at}/reason"), obj.get("reason"), 1, REASON_MAX);
    } else if kind == "hook" {
        p.integer(
            &format!("{at}/timeoutMs"),
            obj.get("timeoutMs"),
            bounds.min_hook_timeout_ms,
            bounds.max_hook_timeout_ms,
        );
    }
}
