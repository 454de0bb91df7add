//! The OpenAPI 3.1 document of the REST routes (ADR 0028): one operation
//! per route and method, declared in `paths/` beside the router's table in
//! `http/mod.rs` (a test fails when the two differ), with the bodies the
//! catalogue's types already describe taken from their schemars schemas and
//! the REST-only ones in `schemas`. `switchboard schema export` writes it
//! to `rpc/openapi.json`; `GET /api/v1/openapi.json` serves the same bytes.

mod op;
mod paths;
mod schemas;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use super::query::QueryParams;

pub use op::Op;

/// Where the export writes the document, relative to the repository root.
pub const OPENAPI_FILE: &str = "rpc/openapi.json";

/// The document as a value.
pub fn document() -> Value {
    let mut components = schemas::Components::new();
    let mut paths = Map::new();
    for op in paths::all(&mut components) {
        let (path, method, operation) = op.finish();
        let item = paths.entry(path).or_insert_with(|| json!({}));
        item[method] = operation;
    }
    json!({
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "switchboard REST",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The REST routes of a switchboard hub, on the same port as its \
                JSON-RPC WebSocket (/ws, described by rpc/openrpc.json). Every error is \
                {\"error\": {code, message, details?, ...}} (the ApiError schema). Bounds \
                the operator configures are given at their defaults; each description names \
                its key.",
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "paths": Value::Object(paths),
        "components": components.finish(),
    })
}

/// The exported file: path and content.
pub fn render() -> BTreeMap<String, String> {
    BTreeMap::from([(OPENAPI_FILE.to_string(), rendered().to_string())])
}

/// The document's text, rendered once per process: it depends on the code
/// alone, never on the configuration.
fn rendered() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        let mut text = serde_json::to_string_pretty(&document()).expect("document serializes");
        text.push('\n');
        text
    })
}

/// `GET /api/v1/openapi.json`: the document, to anyone (it says nothing the
/// code does not), byte for byte the exported file.
pub async fn serve(query: QueryParams) -> Response {
    if let Err(unknown) = query.only(&[]) {
        return unknown.into_response();
    }
    let mut response = rendered().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The error a route answers with, for `op`'s error responses.
fn error_schema() -> Value {
    json!({"$ref": "#/components/schemas/ApiError"})
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_operation_has_an_id_a_summary_and_answers() {
        let doc = super::document();
        let mut ids = std::collections::BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let id = op["operationId"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{method} {path}"));
                assert!(ids.insert(id.to_string()), "operationId {id} twice");
                assert!(op["summary"].is_string(), "{id}");
                assert!(!op["responses"].as_object().unwrap().is_empty(), "{id}");
            }
        }
    }

    #[test]
    fn every_reference_names_a_component() {
        let doc = super::document();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        let text = doc.to_string();
        for piece in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = &piece[..piece.find('"').unwrap()];
            assert!(schemas.contains_key(name), "no component {name}");
        }
        assert!(
            !text.contains("#/$defs/"),
            "a schemars reference left unrewritten"
        );
    }
}
