//! Commands (ADR 0027 §2, §4, §8): the pure rules. Which names are
//! reserved, how an upgrade's manifest differs from the last one, whether
//! an invoke's options fit the declaration, and which autocomplete choices
//! an asker may be shown. Errors name `options.<name>`, never a value: an
//! option value reaches only the owning app (ADR 0027 §10).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::manifest::{ChoiceValue, CommandDecl, OptionDecl, OptionType};

/// Names no app may take: the clients' own commands.
pub const RESERVED: [&str; 8] = [
    "help", "me", "invite", "leave", "join", "mute", "status", "shrug",
];

/// The longest autocomplete choice name shown to an asker, in code points.
pub const CHOICE_NAME_MAX: usize = 100;
/// The longest string choice value.
pub const CHOICE_VALUE_MAX: usize = 100;

/// Names compare case-insensitively: the stored `name_key`.
pub fn name_key(name: &str) -> String {
    name.to_lowercase()
}

pub fn is_reserved(name: &str) -> bool {
    RESERVED.contains(&name_key(name).as_str())
}

/// What an upgrade does to the manifest's commands, by `name_key`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CommandDiff {
    pub added: Vec<CommandDecl>,
    /// The new declarations of commands whose description, level or
    /// options differ.
    pub changed: Vec<CommandDecl>,
    /// The old declarations no longer declared.
    pub removed: Vec<CommandDecl>,
}

impl CommandDiff {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }
}

/// `old` to `new`, each in its declaration order.
pub fn diff(old: &[CommandDecl], new: &[CommandDecl]) -> CommandDiff {
    let find =
        |list: &[CommandDecl], key: &str| list.iter().find(|c| name_key(&c.name) == key).cloned();
    let mut out = CommandDiff::default();
    for c in new {
        match find(old, &name_key(&c.name)) {
            None => out.added.push(c.clone()),
            Some(before) if !same_command(&before, c) => out.changed.push(c.clone()),
            Some(_) => {}
        }
    }
    for c in old {
        if find(new, &name_key(&c.name)).is_none() {
            out.removed.push(c.clone());
        }
    }
    out
}

/// Equal but for the case of the name, which is the same command.
fn same_command(a: &CommandDecl, b: &CommandDecl) -> bool {
    a.name == b.name
        && a.description == b.description
        && a.required_level == b.required_level
        && a.options == b.options
}

/// One refused option: the field (`options.<name>` or `options`) and why.
/// Never the value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionProblem {
    pub field: String,
    pub message: String,
}

impl OptionProblem {
    fn at(name: &str, message: impl Into<String>) -> OptionProblem {
        OptionProblem {
            field: format!("options.{name}"),
            message: message.into(),
        }
    }
}

/// What a valid invoke's options name, for the caller to check it may see
/// them (principals and channels, in declaration order).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Referenced {
    pub principals: Vec<Uuid>,
    pub channels: Vec<Uuid>,
}

/// How options are checked: an invoke's are complete, an autocomplete's
/// are those typed so far (no option is required yet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionRules {
    /// `command.option_value_max_chars`: the longest string value.
    pub value_max_chars: usize,
    pub complete: bool,
}

impl OptionRules {
    /// The same bounds for options typed so far.
    pub fn partial(self) -> OptionRules {
        OptionRules {
            complete: false,
            ..self
        }
    }
}

/// The options an invoke (or an autocomplete, typed so far) gives, against
/// the declaration: every given option is declared, every required one is
/// given (when complete), each value has the option's type, a string at
/// most `value_max_chars` characters and, with choices, is one of them. The
/// first problem, in the declaration's order (unknown names after).
pub fn validate_options(
    decl: &[OptionDecl],
    values: &Map<String, Value>,
    rules: OptionRules,
) -> Result<Referenced, OptionProblem> {
    let mut referenced = Referenced::default();
    for o in decl {
        let Some(value) = values.get(&o.name) else {
            if o.required && rules.complete {
                return Err(OptionProblem::at(&o.name, "is required"));
            }
            continue;
        };
        check_value(o, value, &mut referenced)?;
        check_length(o, value, rules.value_max_chars)?;
    }
    let declared: HashSet<&str> = decl.iter().map(|o| o.name.as_str()).collect();
    let mut unknown: Vec<&String> = values
        .keys()
        .filter(|k| !declared.contains(k.as_str()))
        .collect();
    unknown.sort();
    if let Some(name) = unknown.first() {
        return Err(OptionProblem::at(name, "is not an option of this command"));
    }
    Ok(referenced)
}

fn check_value(o: &OptionDecl, value: &Value, refs: &mut Referenced) -> Result<(), OptionProblem> {
    let typed = match o.kind {
        OptionType::String => value.as_str().is_some(),
        OptionType::Integer => value.as_i64().is_some(),
        OptionType::Number => value.is_number(),
        OptionType::Boolean => value.is_boolean(),
        OptionType::Principal | OptionType::Channel => {
            let id = value.as_str().and_then(|s| s.parse::<Uuid>().ok());
            match (id, o.kind) {
                (Some(id), OptionType::Principal) => refs.principals.push(id),
                (Some(id), _) => refs.channels.push(id),
                (None, _) => return Err(OptionProblem::at(&o.name, "must be an id")),
            }
            true
        }
    };
    if !typed {
        let kind = match o.kind {
            OptionType::String => "a string",
            OptionType::Integer => "an integer",
            OptionType::Number => "a number",
            _ => "a boolean",
        };
        return Err(OptionProblem::at(&o.name, format!("must be {kind}")));
    }
    if !o.choices.is_empty() && !o.choices.iter().any(|c| choice_is(&c.value, value)) {
        return Err(OptionProblem::at(&o.name, "must be one of its choices"));
    }
    Ok(())
}

/// A string value of at most `max` characters (the durable event carries
/// it: no unbounded value reaches the log).
fn check_length(o: &OptionDecl, value: &Value, max: usize) -> Result<(), OptionProblem> {
    match (o.kind, value.as_str()) {
        (OptionType::String, Some(s)) if s.chars().count() > max => Err(OptionProblem::at(
            &o.name,
            format!("must be at most {max} characters (command.option_value_max_chars)"),
        )),
        _ => Ok(()),
    }
}

fn choice_is(choice: &ChoiceValue, value: &Value) -> bool {
    match choice {
        ChoiceValue::String(s) => value.as_str() == Some(s.as_str()),
        ChoiceValue::Integer(i) => value.as_i64() == Some(*i) || value.as_f64() == Some(*i as f64),
        ChoiceValue::Number(n) => value.as_f64() == Some(*n),
    }
}

/// One suggestion an asker is shown.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Choice {
    /// 1 to 100 code points, no control or bidi-override characters.
    #[schemars(length(min = 1, max = CHOICE_NAME_MAX))]
    pub name: String,
    /// A string for string options, a number for integer and number ones.
    #[schemars(with = "ChoiceAnswerValue")]
    pub value: Value,
}

/// The schema of a choice's `value`: a string or a number. Which one, and
/// its bounds, the option's type decides when the hub checks the answer
/// (an answer that does not fit is no choices). Without a type, generated
/// SDK types could not hold a string or a number.
struct ChoiceAnswerValue;

impl schemars::JsonSchema for ChoiceAnswerValue {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ChoiceAnswerValue".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // `integer` beside `number` (which holds it) so that generated
        // types keep integers integers (an integer option's choice).
        schemars::json_schema!({ "type": ["string", "integer", "number"] })
    }
}

/// The choices an app answered, as the asker may see them: at most `max`
/// (the rest dropped), each displayable and of the option's type. `None`
/// when any one is not: an invalid answer is answered as no choices at all,
/// never in part.
pub fn checked_choices(kind: OptionType, answer: &[Choice], max: usize) -> Option<Vec<Choice>> {
    answer
        .iter()
        .take(max)
        .map(|c| (displayable(&c.name) && value_fits(kind, &c.value)).then(|| c.clone()))
        .collect()
}

/// A name a client can show as it is: 1 to 100 code points, no control
/// characters and no bidirectional overrides or isolates (which could make
/// one choice look like another).
pub fn displayable(name: &str) -> bool {
    let count = name.chars().count();
    (1..=CHOICE_NAME_MAX).contains(&count) && !name.chars().any(disallowed)
}

/// A character no display-checked text holds (choices here, a card's
/// labels in `component`): a control, a bidi override or isolate.
pub(crate) fn disallowed(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

fn value_fits(kind: OptionType, value: &Value) -> bool {
    match (kind, value) {
        (OptionType::String, Value::String(s)) => {
            let n = s.chars().count();
            (1..=CHOICE_VALUE_MAX).contains(&n) && !s.chars().any(disallowed)
        }
        (OptionType::Integer, v) => v.as_i64().is_some(),
        (OptionType::Number, Value::Number(_)) => true,
        _ => false,
    }
}

#[cfg(test)]
#[path = "command_tests.rs"]
mod tests;
