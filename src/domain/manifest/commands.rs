//! The manifest's `commands`: the slash commands an app declares (ADR 0023
//! §1). Issue 16 builds them; here they are typed and their shape checked, so
//! a manifest registered today is one issue 16 can read as it is.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{enum_member, ManifestBounds};
use crate::domain::authz::Level;
use crate::domain::validate::{FieldProblem, Problems, NO_CONTROL};

/// One declared command.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandDecl {
    /// 1 to 32 of `a-z`, `0-9`, `-`, `_`; unique in the manifest,
    /// case-insensitively.
    #[schemars(length(min = 1, max = NAME_MAX), regex(pattern = NAME_PATTERN))]
    pub name: String,
    /// 1 to `command.description_max_chars` characters (the schema carries
    /// its default, 100), no control characters.
    #[schemars(length(min = 1, max = DEFAULT_DESCRIPTION_MAX_CHARS), regex(pattern = NO_CONTROL))]
    pub description: String,
    /// The level on the place a caller needs to run it (default `trigger`).
    #[serde(default = "default_level")]
    pub required_level: Level,
    /// At most 25, names unique within the command.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = OPTIONS_MAX))]
    pub options: Vec<OptionDecl>,
}

fn default_level() -> Level {
    Level::Trigger
}

/// One option of a command. The schema's `allOf` says what the checks
/// below say across members: choice values of the option's type, choices
/// and autocomplete only for `string`, `integer` and `number`, never both.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("allOf" = [
    {
        "if": {"required": ["type"], "properties": {"type": {"const": "string"}}},
        "then": {"properties": {"choices": {"items": {"properties": {"value": {"type": "string"}}}}}}
    },
    {
        "if": {"required": ["type"], "properties": {"type": {"const": "integer"}}},
        "then": {"properties": {"choices": {"items": {"properties": {"value": {"type": "integer"}}}}}}
    },
    {
        "if": {"required": ["type"], "properties": {"type": {"const": "number"}}},
        "then": {"properties": {"choices": {"items": {"properties": {"value": {"type": "number"}}}}}}
    },
    {
        "if": {"required": ["type"], "properties": {"type": {"enum": ["boolean", "principal", "channel"]}}},
        "then": {"not": {"anyOf": [
            {"required": ["choices"]},
            {"required": ["autocomplete"], "properties": {"autocomplete": {"const": true}}}
        ]}}
    },
    {
        "if": {"required": ["autocomplete"], "properties": {"autocomplete": {"const": true}}},
        "then": {"not": {"required": ["choices"]}}
    }
]))]
pub struct OptionDecl {
    /// Same rules as a command name; unique within its command.
    #[schemars(length(min = 1, max = NAME_MAX), regex(pattern = NAME_PATTERN))]
    pub name: String,
    #[serde(rename = "type")]
    pub kind: OptionType,
    /// 1 to `command.description_max_chars` characters (the schema carries
    /// its default, 100), no control characters.
    #[schemars(length(min = 1, max = DEFAULT_DESCRIPTION_MAX_CHARS), regex(pattern = NO_CONTROL))]
    pub description: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub required: bool,
    /// The only values allowed, for `string`, `integer` and `number`
    /// options; 1 to 25 of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = CHOICES_MAX))]
    pub choices: Vec<OptionChoice>,
    /// Values are suggested by the app as the caller types (`string`,
    /// `integer` and `number` options, never with `choices`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub autocomplete: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OptionType {
    String,
    Integer,
    Number,
    Boolean,
    /// A principal's id.
    Principal,
    /// A channel's id.
    Channel,
}

impl OptionType {
    const NAMES: [&'static str; 6] = [
        "string",
        "integer",
        "number",
        "boolean",
        "principal",
        "channel",
    ];

    /// The types whose values may be listed or suggested.
    fn takes_choices(name: &str) -> bool {
        matches!(name, "string" | "integer" | "number")
    }
}

/// One allowed value of an option, with the name shown for it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OptionChoice {
    /// 1 to 100 characters, no control characters.
    #[schemars(length(min = 1, max = CHOICE_TEXT_MAX), regex(pattern = NO_CONTROL))]
    pub name: String,
    /// Of the option's type (a string: 1 to 100 characters, no control
    /// characters).
    pub value: ChoiceValue,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ChoiceValue {
    Integer(i64),
    Number(f64),
    String(#[schemars(length(min = 1, max = CHOICE_TEXT_MAX), regex(pattern = NO_CONTROL))] String),
}

const NAME_MAX: usize = 32;
/// A command's or option's name (length apart).
const NAME_PATTERN: &str = "^[a-z0-9_-]+$";
const OPTIONS_MAX: usize = 25;
const CHOICES_MAX: usize = 25;
const CHOICE_TEXT_MAX: usize = 100;

/// The defaults of `command.max_per_principal` and
/// `command.description_max_chars`; the exported schema carries them.
pub const DEFAULT_MAX_COMMANDS: usize = 100;
pub const DEFAULT_DESCRIPTION_MAX_CHARS: usize = 100;

/// `/commands`: at most `bounds.max_commands` declarations of the shape
/// above.
pub(super) fn commands(p: &mut Problems, value: Option<&Value>, bounds: &ManifestBounds) {
    let items = match value {
        None => return,
        Some(Value::Array(items)) => items,
        Some(_) => return p.push("/commands", "must be an array"),
    };
    if items.len() > bounds.max_commands {
        p.push(
            "/commands",
            format!(
                "must have at most {} entries (command.max_per_principal)",
                bounds.max_commands
            ),
        );
    }
    let mut seen = std::collections::HashSet::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("/commands/{i}");
        let Some(c) = p.object(
            &at,
            Some(item),
            &["name", "description", "requiredLevel", "options"],
            true,
        ) else {
            continue;
        };
        if let Some(name) = name(p, &format!("{at}/name"), c.get("name")) {
            if crate::domain::command::is_reserved(name) {
                p.push(format!("{at}/name"), "is reserved");
            } else if !seen.insert(name.to_ascii_lowercase()) {
                p.push(format!("{at}/name"), format!("duplicate command {name:?}"));
            }
        }
        description(
            p,
            &format!("{at}/description"),
            c.get("description"),
            bounds,
        );
        if let Some(level) = c.get("requiredLevel") {
            let levels = Level::ALL.map(Level::as_str);
            enum_member(p, &format!("{at}/requiredLevel"), Some(level), &levels);
        }
        options(p, &at, c, bounds);
    }
}

/// One command an app registers through the API (ADR 0027 §2): the
/// manifest's rules for one entry, with pointers under `/command`.
pub fn validate_command(value: &Value, bounds: &ManifestBounds) -> Result<(), Vec<FieldProblem>> {
    let mut p = Problems::default();
    commands(&mut p, Some(&Value::Array(vec![value.clone()])), bounds);
    let problems = p.into_vec();
    if problems.is_empty() {
        return Ok(());
    }
    Err(problems
        .into_iter()
        .map(|f| FieldProblem {
            pointer: f.pointer.replacen("/commands/0", "/command", 1),
            message: f.message,
        })
        .collect())
}

/// A command's or option's name: 1 to 32 of `a-z`, `0-9`, `-`, `_`.
fn name<'v>(p: &mut Problems, at: &str, value: Option<&'v Value>) -> Option<&'v str> {
    let name = p.string(at, value, 1, NAME_MAX)?;
    let allowed = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_';
    if name.bytes().all(allowed) {
        Some(name)
    } else {
        p.push(
            at,
            "may contain only lowercase letters, digits, '-' and '_'",
        );
        None
    }
}

fn description(p: &mut Problems, at: &str, value: Option<&Value>, bounds: &ManifestBounds) {
    p.string(at, value, 1, bounds.command_description_max_chars);
}

/// `<command>/options`: at most 25, names unique within the command.
fn options(p: &mut Problems, at: &str, command: &Map<String, Value>, bounds: &ManifestBounds) {
    let items = match command.get("options") {
        None => return,
        Some(Value::Array(items)) => items,
        Some(_) => return p.push(format!("{at}/options"), "must be an array"),
    };
    if items.len() > OPTIONS_MAX {
        p.push(
            format!("{at}/options"),
            format!("must have at most {OPTIONS_MAX} entries"),
        );
    }
    let mut seen = std::collections::HashSet::new();
    for (j, item) in items.iter().enumerate() {
        let at = format!("{at}/options/{j}");
        let known = [
            "name",
            "type",
            "description",
            "required",
            "choices",
            "autocomplete",
        ];
        let Some(o) = p.object(&at, Some(item), &known, true) else {
            continue;
        };
        if let Some(name) = name(p, &format!("{at}/name"), o.get("name")) {
            if !seen.insert(name.to_ascii_lowercase()) {
                p.push(format!("{at}/name"), format!("duplicate option {name:?}"));
            }
        }
        enum_member(p, &format!("{at}/type"), o.get("type"), &OptionType::NAMES);
        description(
            p,
            &format!("{at}/description"),
            o.get("description"),
            bounds,
        );
        boolean(p, &format!("{at}/required"), o.get("required"));
        let kind = o.get("type").and_then(Value::as_str);
        let autocomplete = boolean(p, &format!("{at}/autocomplete"), o.get("autocomplete"));
        let suggestible = kind.is_some_and(OptionType::takes_choices);
        if autocomplete == Some(true) && kind.is_some() && !suggestible {
            p.push(
                format!("{at}/autocomplete"),
                "is allowed only for string, integer and number options",
            );
        }
        if let Some(choices) = o.get("choices") {
            if autocomplete == Some(true) {
                p.push(
                    format!("{at}/choices"),
                    "is not allowed together with autocomplete",
                );
            }
            option_choices(p, &format!("{at}/choices"), choices, kind);
        }
    }
}

/// An option's `choices`: 1 to 25 `{name, value}` with values of its type.
fn option_choices(p: &mut Problems, at: &str, value: &Value, kind: Option<&str>) {
    let Value::Array(items) = value else {
        return p.push(at, "must be an array");
    };
    if let Some(kind) = kind.filter(|k| !OptionType::takes_choices(k)) {
        return p.push(at, format!("is not allowed for {kind} options"));
    }
    if items.is_empty() || items.len() > CHOICES_MAX {
        p.push(at, format!("must have 1 to {CHOICES_MAX} entries"));
    }
    for (k, item) in items.iter().enumerate() {
        let at = format!("{at}/{k}");
        let Some(c) = p.object(&at, Some(item), &["name", "value"], true) else {
            continue;
        };
        p.string(&format!("{at}/name"), c.get("name"), 1, CHOICE_TEXT_MAX);
        let value_at = format!("{at}/value");
        match (kind, c.get("value")) {
            (_, None) => p.push(value_at, "is required"),
            (Some("string"), v) => {
                p.string(&value_at, v, 1, CHOICE_TEXT_MAX);
            }
            (Some("integer"), Some(Value::Number(n))) if n.is_i64() => {}
            (Some("integer"), Some(_)) => p.push(value_at, "must be an integer"),
            (Some("number"), Some(Value::Number(_))) => {}
            (Some("number"), Some(_)) => p.push(value_at, "must be a number"),
            // The type itself is missing or wrong: reported at `type`.
            _ => {}
        }
    }
}

/// An optional boolean member; `None` when absent or not a boolean.
fn boolean(p: &mut Problems, at: &str, value: Option<&Value>) -> Option<bool> {
    match value {
        None => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => {
            p.push(at, "must be a boolean");
            None
        }
    }
}
