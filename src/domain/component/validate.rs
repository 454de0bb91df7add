//! The components an app posts, checked with the member at fault named
//! (`components[1].options[0].value`), before anything is stored.

use std::collections::HashSet;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    ButtonStyle, Capability, ComponentKind, Definition, FormField, Restriction, SelectOption,
    DEFAULT_FORM_MAX_FIELDS, DEFAULT_LABEL_MAX_CHARS, DEFAULT_SELECT_MAX_OPTIONS,
    DEFAULT_TEXT_MAX_CHARS,
};
use crate::domain::authz::Level;
use crate::domain::command::disallowed;
use crate::domain::message::PartError;

/// A component as an app posts it: the members of every kind, the
/// kind's own checked by [`validate_components`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewComponent {
    pub kind: ComponentKind,
    /// The app's own name for it: 1 to `component.text_max_chars`
    /// characters, unique on the card.
    #[schemars(length(min = 1, max = DEFAULT_TEXT_MAX_CHARS))]
    pub custom_id: String,
    /// A button's text (required for a button): 1 to
    /// `component.label_max_chars` characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = DEFAULT_LABEL_MAX_CHARS))]
    pub label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub style: Option<ButtonStyle>,
    /// 1 to `component.text_max_chars` characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = DEFAULT_TEXT_MAX_CHARS))]
    pub placeholder: Option<String>,
    /// A select's options (required for a select): 1 to
    /// `component.select_max_options`, values unique.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = DEFAULT_SELECT_MAX_OPTIONS))]
    pub options: Option<Vec<SelectOption>>,
    /// At least this many options chosen (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values: Option<u32>,
    /// At most this many (default 1, at most the number of options).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_values: Option<u32>,
    /// A form's title (required for a form): 1 to
    /// `component.text_max_chars` characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = DEFAULT_TEXT_MAX_CHARS))]
    pub title: Option<String>,
    /// A form's fields (required for a form): 1 to
    /// `component.form_max_fields`, names unique.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = DEFAULT_FORM_MAX_FIELDS))]
    pub fields: Option<Vec<FormField>>,
    /// The level needed to operate it; default `write`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<Level>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_capability: Option<Capability>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restricted_to: Option<Restriction>,
    /// Seconds until it expires: 1 to `component.default_ttl_seconds`,
    /// which is also the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub expires_in_seconds: Option<u64>,
}

impl NewComponent {
    /// The kind's own members, as stored and shown.
    pub fn definition(&self) -> Definition {
        Definition {
            label: self.label.clone(),
            style: self.style,
            placeholder: self.placeholder.clone(),
            options: self.options.clone(),
            min_values: self.min_values,
            max_values: self.max_values,
            title: self.title.clone(),
            fields: self.fields.clone(),
        }
    }
}

/// The `component.*` bounds a card is checked against.
#[derive(Clone, Copy, Debug)]
pub struct ComponentLimits {
    /// `component.max_per_message`.
    pub max_per_message: usize,
    /// `component.default_ttl_seconds`: the default and the longest.
    pub ttl_seconds: u64,
    /// `component.label_max_chars`: a button's label.
    pub label_max_chars: usize,
    /// `component.text_max_chars`: custom ids, placeholders, titles, the
    /// labels and values of options, the labels of fields.
    pub text_max_chars: usize,
    /// `component.select_max_options`.
    pub select_max_options: usize,
    /// `component.form_max_fields`.
    pub form_max_fields: usize,
    /// `component.field_max_length`: a string field's longest
    /// `maxLength`, and its default.
    pub field_max_length: u32,
    /// `component.field_name_max_chars`.
    pub field_name_max_chars: usize,
}

fn err(field: String, rule: impl std::fmt::Display) -> PartError {
    PartError {
        message: format!("{field} {rule}"),
        field,
    }
}

/// A text of `1..=max` characters a client shows as it is: no control
/// characters and no bidirectional overrides or isolates (which could make
/// one label look like another), the check a command's choices pass.
fn text(field: String, value: &str, max: usize) -> Result<(), PartError> {
    let n = value.chars().count();
    if n == 0 || n > max || value.chars().any(disallowed) {
        return Err(err(
            field,
            format_args!(
                "must be 1 to {max} characters without control or bidirectional-override characters"
            ),
        ));
    }
    Ok(())
}

/// A button's label, posted or changed by `app/component/update`.
pub fn check_label(field: String, label: &str, limits: &ComponentLimits) -> Result<(), PartError> {
    text(field, label, limits.label_max_chars)
}

/// Checks a card's components; the error names the member at fault.
pub fn validate_components(
    components: &[NewComponent],
    limits: &ComponentLimits,
) -> Result<(), PartError> {
    if components.is_empty() {
        return Err(err("components".into(), "must not be empty"));
    }
    if components.len() > limits.max_per_message {
        return Err(err(
            "components".into(),
            format_args!(
                "must have at most {} entries (component.max_per_message)",
                limits.max_per_message
            ),
        ));
    }
    let mut ids = HashSet::new();
    for (i, c) in components.iter().enumerate() {
        let at = |member: &str| format!("components[{i}].{member}");
        text(at("customId"), &c.custom_id, limits.text_max_chars)?;
        if !ids.insert(c.custom_id.as_str()) {
            return Err(err(at("customId"), "is used twice on this card"));
        }
        if let Some(s) = c.expires_in_seconds {
            if s == 0 || s > limits.ttl_seconds {
                return Err(err(
                    at("expiresInSeconds"),
                    format_args!(
                        "must be from 1 to {} (component.default_ttl_seconds)",
                        limits.ttl_seconds
                    ),
                ));
            }
        }
        match c.kind {
            ComponentKind::Button => button(c, &at, limits)?,
            ComponentKind::Select => select(c, &at, limits)?,
            ComponentKind::Form => form(c, &at, limits)?,
        }
    }
    Ok(())
}

/// Members another kind owns are refused, naming the first present.
fn only(c: &NewComponent, allowed: &[&str], at: &dyn Fn(&str) -> String) -> Result<(), PartError> {
    let present = [
        ("label", c.label.is_some()),
        ("style", c.style.is_some()),
        ("placeholder", c.placeholder.is_some()),
        ("options", c.options.is_some()),
        ("minValues", c.min_values.is_some()),
        ("maxValues", c.max_values.is_some()),
        ("title", c.title.is_some()),
        ("fields", c.fields.is_some()),
    ];
    match present
        .iter()
        .find(|(name, is)| *is && !allowed.contains(name))
    {
        Some((name, _)) => Err(err(
            at(name),
            format_args!("is not a member of a {}", c.kind.as_str()),
        )),
        None => Ok(()),
    }
}

type At<'a> = &'a dyn Fn(&str) -> String;

fn button(c: &NewComponent, at: At, limits: &ComponentLimits) -> Result<(), PartError> {
    only(c, &["label", "style"], at)?;
    match &c.label {
        Some(label) => check_label(at("label"), label, limits),
        None => Err(err(at("label"), "is required for a button")),
    }
}

fn select(c: &NewComponent, at: At, limits: &ComponentLimits) -> Result<(), PartError> {
    only(c, &["placeholder", "options", "minValues", "maxValues"], at)?;
    let max = limits.text_max_chars;
    if let Some(p) = &c.placeholder {
        text(at("placeholder"), p, max)?;
    }
    let Some(options) = &c.options else {
        return Err(err(at("options"), "is required for a select"));
    };
    let most = limits.select_max_options;
    if options.is_empty() || options.len() > most {
        return Err(err(
            at("options"),
            format_args!("must have 1 to {most} entries (component.select_max_options)"),
        ));
    }
    let mut values = HashSet::new();
    for (j, o) in options.iter().enumerate() {
        text(at(&format!("options[{j}].label")), &o.label, max)?;
        text(at(&format!("options[{j}].value")), &o.value, max)?;
        if !values.insert(o.value.as_str()) {
            return Err(err(at(&format!("options[{j}].value")), "is used twice"));
        }
    }
    let (min, max) = (c.min_values.unwrap_or(1), c.max_values.unwrap_or(1));
    if max == 0 || max as usize > options.len() {
        return Err(err(
            at("maxValues"),
            "must be from 1 to the number of options",
        ));
    }
    if min > max {
        return Err(err(at("minValues"), "must be at most maxValues"));
    }
    Ok(())
}

fn form(c: &NewComponent, at: At, limits: &ComponentLimits) -> Result<(), PartError> {
    only(c, &["title", "fields"], at)?;
    match &c.title {
        Some(title) => text(at("title"), title, limits.text_max_chars)?,
        None => return Err(err(at("title"), "is required for a form")),
    }
    let Some(fields) = &c.fields else {
        return Err(err(at("fields"), "is required for a form"));
    };
    let most = limits.form_max_fields;
    if fields.is_empty() || fields.len() > most {
        return Err(err(
            at("fields"),
            format_args!("must have 1 to {most} entries (component.form_max_fields)"),
        ));
    }
    let mut names = HashSet::new();
    for (j, f) in fields.iter().enumerate() {
        field_name(at(&format!("fields[{j}].name")), &f.name, limits)?;
        if !names.insert(f.name.as_str()) {
            return Err(err(at(&format!("fields[{j}].name")), "is used twice"));
        }
        text(
            at(&format!("fields[{j}].label")),
            &f.label,
            limits.text_max_chars,
        )?;
        let longest = limits.field_max_length;
        match f.max_length {
            Some(n) if !(1..=longest).contains(&n) => {
                return Err(err(
                    at(&format!("fields[{j}].maxLength")),
                    format_args!("must be from 1 to {longest} (component.field_max_length)"),
                ))
            }
            Some(_) if f.field_type != super::FieldType::String => {
                return Err(err(
                    at(&format!("fields[{j}].maxLength")),
                    "is only for string fields",
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

fn field_name(field: String, name: &str, limits: &ComponentLimits) -> Result<(), PartError> {
    let max = limits.field_name_max_chars;
    let ok = !name.is_empty()
        && name.len() <= max
        && name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-');
    if ok {
        return Ok(());
    }
    Err(err(
        field,
        format_args!("must be 1 to {max} characters of A-Z, a-z, 0-9, _ and -"),
    ))
}
