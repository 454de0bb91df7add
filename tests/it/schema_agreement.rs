//! The exported JSON Schemas against the hub: every case of a corpus of
//! manifests and params goes to the committed schema (the `jsonschema`
//! crate, formats checked) and to a real `switchboard serve` (manifests
//! through `POST /api/v1/apps/register`, params through real WebSocket
//! calls), and both must give the verdict the case expects. The hub runs
//! with its defaults, which are the bounds the schemas carry.
//!
//! A few rules no JSON Schema can say (a key unique across array items,
//! case-insensitively; a bound that depends on stored state) are cases of
//! their own, [`Verdict::HubOnly`]: the schema accepts them, the hub
//! refuses, and the schema's description names the rule.

mod cards;
mod leases;
mod manifests;
mod param_cases;
mod params;

use std::path::Path;

use serde_json::Value;

/// What a case must get from both sides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Valid,
    Invalid,
    /// Schema-valid, refused by the hub: a rule beyond JSON Schema.
    HubOnly,
}

pub struct Case {
    pub name: String,
    pub doc: Value,
    pub verdict: Verdict,
}

pub fn case(name: impl Into<String>, doc: Value, verdict: Verdict) -> Case {
    Case {
        name: name.into(),
        doc,
        verdict,
    }
}

/// The committed schema `schemas/<file>` as a validator (formats checked:
/// the hub refuses a malformed uuid).
pub fn validator(file: &str) -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("schemas")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("schema file");
    let schema: Value = serde_json::from_str(&text).expect("schema JSON");
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap_or_else(|e| panic!("{file} is not a valid schema: {e}"))
}

/// The disagreements of one case with its verdict, if any.
pub fn judge(case: &Case, schema_valid: bool, hub_valid: bool) -> Option<String> {
    let (schema_wants, hub_wants) = match case.verdict {
        Verdict::Valid => (true, true),
        Verdict::Invalid => (false, false),
        Verdict::HubOnly => (true, false),
    };
    (schema_valid != schema_wants || hub_valid != hub_wants).then(|| {
        format!(
            "{}: expected {:?}, schema says {}, hub says {}",
            case.name,
            case.verdict,
            word(schema_valid),
            word(hub_valid)
        )
    })
}

fn word(valid: bool) -> &'static str {
    if valid {
        "valid"
    } else {
        "invalid"
    }
}

/// `n` copies of `c`.
pub fn chars(c: char, n: usize) -> String {
    std::iter::repeat_n(c, n).collect()
}

/// `doc` with the member at `pointer` set to `value` (its parent exists).
pub fn with(doc: &Value, pointer: &str, value: Value) -> Value {
    let mut out = doc.clone();
    let (parent, last) = pointer.rsplit_once('/').expect("a pointer");
    let target = out.pointer_mut(parent).expect("the parent exists");
    match target {
        Value::Object(map) => {
            map.insert(last.to_string(), value);
        }
        Value::Array(items) => {
            let i: usize = last.parse().expect("an index");
            items[i] = value;
        }
        other => panic!("{pointer}: parent is {other}"),
    }
    out
}

/// `doc` without the member at `pointer`.
pub fn without(doc: &Value, pointer: &str) -> Value {
    let mut out = doc.clone();
    let (parent, last) = pointer.rsplit_once('/').expect("a pointer");
    let target = out.pointer_mut(parent).expect("the parent exists");
    target
        .as_object_mut()
        .expect("an object")
        .remove(last)
        .expect("the member exists");
    out
}
