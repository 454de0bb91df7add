//! `switchboard schema export`: the catalogue as an OpenRPC document (`rpc/`)
//! and JSON Schemas of the manifest and every payload (`schemas/`). The files
//! are committed; a test fails when they differ from a fresh export.

use std::collections::BTreeMap;
use std::path::Path;

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{json, Map, Value};

use super::{catalogue, Caller, Direction, MethodSpec, SpecKind, PROTOCOL_VERSION_MAX};
use crate::domain::manifest::Manifest;
use crate::rpc::{ErrorKind, RpcError};

/// Every exported file: path relative to the repository root, and content.
pub fn render() -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    files.insert("rpc/openrpc.json".to_string(), pretty(&openrpc_document()));

    let mut schema = |name: &str, value: Value| {
        files.insert(format!("schemas/{name}.schema.json"), pretty(&value));
    };
    schema("manifest", manifest_schema());
    schema(
        "app-card",
        root_schema::<crate::domain::card::AppCard>("App Card (app.json, muretai/app/1)"),
    );
    schema(
        "error-object",
        root_schema::<RpcError>("JSON-RPC error object"),
    );
    for spec in catalogue() {
        let stem = spec.name.replace('/', ".");
        let mut g = generator("#/$defs/");
        let params = (spec.params_schema)(&mut g).to_value();
        schema(
            &format!("{stem}.params"),
            with_defs(params, &mut g, spec.name),
        );
        if let Some(result) = spec.result_schema {
            let mut g = generator("#/$defs/");
            let result = result(&mut g).to_value();
            schema(
                &format!("{stem}.result"),
                with_defs(result, &mut g, spec.name),
            );
        }
    }
    files
}

/// Writes `files` (this export's and the REST document's,
/// `http::openapi::render`) under `root`, replacing what was there.
pub fn write(root: &Path, files: &BTreeMap<String, String>) -> std::io::Result<Vec<String>> {
    for dir in ["rpc", "schemas"] {
        let d = root.join(dir);
        if d.exists() {
            std::fs::remove_dir_all(&d)?;
        }
        std::fs::create_dir_all(&d)?;
    }
    for (path, content) in files {
        std::fs::write(root.join(path), content)?;
    }
    Ok(files.keys().cloned().collect())
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("schema serializes");
    s.push('\n');
    s
}

fn generator(definitions: &str) -> SchemaGenerator {
    let mut settings = SchemaSettings::draft2020_12();
    settings.definitions_path = definitions.trim_start_matches('#').to_string().into();
    SchemaGenerator::new(settings)
}

fn root_schema<T: JsonSchema>(title: &str) -> Value {
    let mut g = generator("#/$defs/");
    let schema = T::json_schema(&mut g).to_value();
    let mut v = with_defs(schema, &mut g, title);
    v["title"] = json!(title);
    v
}

/// The manifest's schema, with the event types of the app audience as the
/// enum of `eventSubscriptions` (the catalogue holds them, and the domain
/// type does not know the catalogue).
fn manifest_schema() -> Value {
    let mut v = root_schema::<Manifest>("App manifest");
    let items = &mut v["properties"]["eventSubscriptions"]["items"];
    items["enum"] = json!(super::app_event_types());
    v
}

fn with_defs(schema: Value, g: &mut SchemaGenerator, title: &str) -> Value {
    let mut obj = match schema {
        Value::Object(o) => o,
        other => {
            let mut o = Map::new();
            o.insert("allOf".into(), json!([other]));
            o
        }
    };
    let mut out = Map::new();
    out.insert(
        "$schema".into(),
        json!("https://json-schema.org/draft/2020-12/schema"),
    );
    out.insert("title".into(), json!(title));
    obj.remove("$schema");
    out.extend(obj);
    let defs = g.take_definitions(true);
    if !defs.is_empty() {
        out.insert("$defs".into(), Value::Object(defs.into_iter().collect()));
    }
    Value::Object(out)
}

/// The OpenRPC document as a value: the export writes it, and the
/// protocol reference's tables are rendered from it.
pub(crate) fn openrpc_document() -> Value {
    let mut g = generator("#/components/schemas/");
    let methods: Vec<Value> = catalogue()
        .iter()
        .map(|s| method_entry(s, &mut g))
        .collect();
    let defs = g.take_definitions(true);
    let errors: Map<String, Value> = ErrorKind::ALL
        .iter()
        .map(|k| {
            (
                k.tag().to_string(),
                json!({"code": k.code(), "message": k.tag(), "data": k.meaning()}),
            )
        })
        .collect();
    json!({
        "openrpc": "1.3.2",
        "info": {
            "title": "switchboard",
            "version": format!("{}", PROTOCOL_VERSION_MAX),
            "description": "JSON-RPC 2.0 over WebSocket (/ws). Methods marked x-direction \
                hub-to-peer are requests or notifications the hub sends to a connected peer \
                on the same socket.",
        },
        "methods": methods,
        "components": {
            "schemas": Value::Object(defs.into_iter().collect()),
            "errors": Value::Object(errors),
        },
    })
}

fn method_entry(spec: &MethodSpec, g: &mut SchemaGenerator) -> Value {
    let params_schema = (spec.params_schema)(g).to_value();
    let required: Vec<&str> = params_schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let params: Vec<Value> = params_schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .map(|(name, schema)| {
                    let mut d = json!({
                        "name": name,
                        "required": required.contains(&name.as_str()),
                        "schema": schema,
                    });
                    if let Some(desc) = schema.get("description") {
                        d["description"] = desc.clone();
                    }
                    d
                })
                .collect()
        })
        .unwrap_or_default();
    let mut entry = json!({
        "name": spec.name,
        "summary": spec.summary,
        "paramStructure": "by-name",
        "params": params,
        "x-direction": spec.direction.as_str(),
        "x-params-type": (spec.params_type)(),
    });
    let who = match (spec.direction, spec.caller) {
        (Direction::ToHub, c) => ("x-caller", c.as_str()),
        (
            Direction::FromHub,
            c @ (Caller::Agent | Caller::App | Caller::Person | Caller::Unauthenticated),
        ) => ("x-recipient", c.as_str()),
    };
    entry[who.0] = json!(who.1);
    if let Some(alias) = spec.moltzap_v1_name {
        // The name a `callbackNames: "moltzap-v1"` app is called by.
        entry["x-moltzap-v1-name"] = json!(alias);
    }
    if spec.direction == Direction::ToHub && spec.kind == SpecKind::Request {
        // The right a call asks for (null: none) and the rate limit it
        // spends (ADR 0020 §3, §4).
        entry["x-action"] = json!(spec.action.map(|a| a.as_str()));
        // A connect runs before there is a principal to charge: it spends
        // no class (the source address's failed-connect budget applies).
        entry["x-rate-class"] = match spec.caller {
            Caller::Unauthenticated => Value::Null,
            _ => json!(spec.rate_class.as_str()),
        };
    }
    match spec.kind {
        SpecKind::Request => {
            if let (Some(result), Some(ty)) = (spec.result_schema, spec.result_type) {
                entry["result"] = json!({"name": ty(), "schema": result(g).to_value()});
            }
            entry["errors"] = Value::Array(
                spec.errors
                    .iter()
                    .map(|k| json!({"$ref": format!("#/components/errors/{}", k.tag())}))
                    .collect(),
            );
        }
        SpecKind::Notification { ephemeral } => {
            entry["x-notification"] = json!(true);
            entry["x-ephemeral"] = json!(ephemeral);
        }
    }
    entry
}
