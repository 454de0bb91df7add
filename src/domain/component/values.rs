//! The values an interaction carries, checked against its component: a
//! button takes none, a select `{selected: [value]}`, a form its fields by
//! type. An error names `values.<member>`, never the value (ADR 0027 §10).

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::{Component, ComponentKind, ComponentLimits, FieldType, FormField};
use crate::domain::message::PartError;

fn err(field: String, rule: impl std::fmt::Display) -> PartError {
    PartError {
        message: format!("{field} {rule}"),
        field,
    }
}

/// The values as stored and sent to the app (`None` for a button); a
/// string field without its own `maxLength` takes
/// `component.field_max_length`.
pub fn validate_values(
    component: &Component,
    values: Option<&Value>,
    limits: &ComponentLimits,
) -> Result<Option<Value>, PartError> {
    match component.kind {
        ComponentKind::Button => match values {
            None => Ok(None),
            Some(_) => Err(err("values".into(), "must be absent for a button")),
        },
        ComponentKind::Select => select(component, object(values)?).map(Some),
        ComponentKind::Form => form(component, object(values)?, limits).map(Some),
    }
}

fn object(values: Option<&Value>) -> Result<&Map<String, Value>, PartError> {
    match values {
        Some(Value::Object(map)) => Ok(map),
        Some(_) => Err(err("values".into(), "must be an object")),
        None => Err(err("values".into(), "is required for this component")),
    }
}

fn select(component: &Component, values: &Map<String, Value>) -> Result<Value, PartError> {
    if let Some(unknown) = values.keys().find(|k| *k != "selected") {
        return Err(err(format!("values.{unknown}"), "is not a member"));
    }
    let field = || "values.selected".to_string();
    let Some(Value::Array(selected)) = values.get("selected") else {
        return Err(err(field(), "must be an array of option values"));
    };
    let d = &component.definition;
    let options: HashSet<&str> = d
        .options
        .iter()
        .flatten()
        .map(|o| o.value.as_str())
        .collect();
    let (min, max) = (
        d.min_values.unwrap_or(1) as usize,
        d.max_values.unwrap_or(1) as usize,
    );
    if selected.len() < min || selected.len() > max {
        return Err(err(
            field(),
            format_args!("must hold {min} to {max} values"),
        ));
    }
    let mut seen = HashSet::new();
    for (i, v) in selected.iter().enumerate() {
        let known = v.as_str().filter(|s| options.contains(s));
        match known {
            Some(s) if seen.insert(s) => {}
            Some(_) => return Err(err(format!("values.selected[{i}]"), "is chosen twice")),
            None => {
                return Err(err(
                    format!("values.selected[{i}]"),
                    "is not among the options",
                ))
            }
        }
    }
    Ok(Value::Object(values.clone()))
}

fn form(
    component: &Component,
    values: &Map<String, Value>,
    limits: &ComponentLimits,
) -> Result<Value, PartError> {
    let fields = component.definition.fields.as_deref().unwrap_or_default();
    if let Some(unknown) = values
        .keys()
        .find(|k| !fields.iter().any(|f| &f.name == *k))
    {
        return Err(err(
            format!("values.{unknown}"),
            "is not a field of this form",
        ));
    }
    for f in fields {
        match values.get(&f.name) {
            None | Some(Value::Null) if f.required => {
                return Err(err(format!("values.{}", f.name), "is required"))
            }
            None => {}
            Some(v) => field(f, v, limits.field_max_length)?,
        }
    }
    Ok(Value::Object(values.clone()))
}

fn field(f: &FormField, v: &Value, default_max: u32) -> Result<(), PartError> {
    let at = || format!("values.{}", f.name);
    let ok = match f.field_type {
        FieldType::String => match v.as_str() {
            Some(s) => {
                let max = f.max_length.unwrap_or(default_max) as usize;
                if s.chars().count() > max {
                    return Err(err(at(), format_args!("must be at most {max} characters")));
                }
                true
            }
            None => false,
        },
        FieldType::Integer => v.is_i64() || v.is_u64(),
        FieldType::Number => v.is_number(),
        FieldType::Boolean => v.is_boolean(),
    };
    if ok {
        Ok(())
    } else {
        let ty = match f.field_type {
            FieldType::String => "a string",
            FieldType::Integer => "an integer",
            FieldType::Number => "a number",
            FieldType::Boolean => "a boolean",
        };
        Err(err(at(), format_args!("must be {ty}")))
    }
}
