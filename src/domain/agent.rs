//! What an agent registers with.

use serde_json::Value;

use super::validate::{FieldProblem, Problems};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRegistration {
    pub name: String,
    pub description: Option<String>,
}

/// Validates `{name, description?}`, reporting every problem with a pointer.
pub fn validate_registration(doc: &Value) -> Result<AgentRegistration, Vec<FieldProblem>> {
    let mut p = Problems::default();
    let Some(obj) = p.object("", Some(doc), &["name", "description"], true) else {
        return Err(p.into_vec());
    };
    let name = p
        .string("/name", obj.get("name"), 1, 100)
        .map(str::to_string);
    let description = match obj.get("description") {
        None => None,
        Some(d) => p
            .string("/description", Some(d), 0, 2000)
            .map(str::to_string),
    };
    match name {
        Some(name) if p.is_empty() => Ok(AgentRegistration { name, description }),
        _ => Err(p.into_vec()),
    }
}
