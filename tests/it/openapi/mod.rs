//! The OpenAPI document (ADR 0028): it covers every route the router
//! declares and no other, it is served as exported, and the error bodies a
//! live hub writes are the `ApiError` schema it states.

use std::collections::BTreeSet;
use std::path::Path;

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::hub::{TestHub, ADMIN_TOKEN};

mod answers;
mod fixes;

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// `/api/v1/apps/{app_id}/ping` and `/api/v1/apps/{appId}/ping` are one
/// route: the router and the document name parameters their own way.
fn shape(path: &str) -> String {
    let mut out = String::new();
    let mut in_param = false;
    for ch in path.chars() {
        match ch {
            '{' => {
                in_param = true;
                out.push_str("{}");
            }
            '}' => in_param = false,
            _ if !in_param => out.push(ch),
            _ => {}
        }
    }
    out
}

/// The text of a call from just after its `(` to its matching `)`.
fn call_text(from: &str) -> &str {
    let mut depth = 1;
    for (i, ch) in from.char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return &from[..i];
                }
            }
            _ => {}
        }
    }
    from
}

/// Every `(method, path)` the router declares, read from its one table in
/// `src/http/mod.rs` (an axum router cannot list its routes).
fn router_routes() -> BTreeSet<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/http/mod.rs");
    let src = std::fs::read_to_string(path).expect("src/http/mod.rs");
    // The console's routes are merged from their own table: private,
    // cookie-authenticated, and so not in the document (ADR 0030).
    let src = src.replacen(CONSOLE_MERGE, "", 1);
    assert!(
        !src.contains(".merge(") && !src.contains(".nest("),
        "the router's routes must stay in src/http/mod.rs's one table for this scan"
    );
    routes_in(&src)
}

const CONSOLE_MERGE: &str = ".merge(console::routes(&hub))";

/// The console's own table, in `src/http/console/mod.rs`.
fn console_routes() -> BTreeSet<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let router = std::fs::read_to_string(root.join("src/http/mod.rs")).expect("src/http/mod.rs");
    assert!(
        router.contains(CONSOLE_MERGE),
        "the console is merged as the scan expects"
    );
    let src = std::fs::read_to_string(root.join("src/http/console/mod.rs"))
        .expect("src/http/console/mod.rs");
    routes_in(&src)
}

#[test]
fn the_console_routes_are_under_console_and_not_in_the_document() {
    let console = console_routes();
    assert!(
        console.len() >= 9,
        "the scan found too few console routes: {console:?}"
    );
    for (method, path) in &console {
        assert!(
            path == "/console" || path.starts_with("/console/"),
            "{method} {path} is in the console's table but not under /console"
        );
    }
    let documented = document_routes(&switchboard::http::openapi::document());
    let shared: Vec<_> = console.intersection(&documented).collect();
    assert!(
        shared.is_empty(),
        "console routes in the document: {shared:?}"
    );
    assert!(
        documented.iter().all(|(_, p)| !p.starts_with("/console")),
        "the document names a /console path"
    );
}

/// The `(method, path)` pairs of the `.route(..)` calls in `src`.
fn routes_in(src: &str) -> BTreeSet<(String, String)> {
    let mut routes = BTreeSet::new();
    for piece in src.split(".route(").skip(1) {
        let call = call_text(piece);
        let path = call
            .split('"')
            .nth(1)
            .unwrap_or_else(|| panic!("a route without a path literal: {call}"));
        for method in METHODS {
            let token = format!("{method}(");
            let found = call.match_indices(&token).any(|(i, _)| {
                i == 0 || matches!(call.as_bytes()[i - 1], b'.' | b'(' | b' ' | b'\n' | b',')
            });
            if found {
                routes.insert((method.to_string(), shape(path)));
            }
        }
    }
    routes
}

fn document_routes(doc: &Value) -> BTreeSet<(String, String)> {
    let mut routes = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("path item").keys() {
            routes.insert((method.clone(), shape(path)));
        }
    }
    routes
}

#[test]
fn the_document_covers_every_route_of_the_router_and_no_other() {
    let router = router_routes();
    assert!(
        router.len() > 40,
        "the scan found too few routes: {router:?}"
    );
    let doc = switchboard::http::openapi::document();
    let documented = document_routes(&doc);
    let missing: Vec<_> = router.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&router).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "the router and the OpenAPI document disagree; declare the route in \
         src/http/openapi/paths/ and run `cargo run -- schema export`\n\
         in the router, not documented: {missing:?}\ndocumented, not in the router: {extra:?}"
    );
}

#[test]
fn the_scan_tells_a_route_the_document_lacks() {
    let added = routes_in(
        r#"Router::new()
        .route("/api/v1/cards", post(cards::install).get(cards::list))
        .route(
            "/api/v1/things/{thing_id}",
            get(things::read).delete(things::delete),
        )"#,
    );
    let documented = document_routes(&switchboard::http::openapi::document());
    let missing: Vec<_> = added.difference(&documented).collect();
    assert_eq!(
        missing,
        [
            &("delete".to_string(), "/api/v1/things/{}".to_string()),
            &("get".to_string(), "/api/v1/things/{}".to_string()),
        ]
    );
    assert_eq!(
        shape("/api/v1/apps/{app_id}/ping"),
        shape("/api/v1/apps/{appId}/ping")
    );
}

#[test]
fn the_document_is_openapi_3_1_with_the_auth_schemes() {
    let doc = switchboard::http::openapi::document();
    assert_eq!(doc["openapi"], "3.1.0");
    let schemes = &doc["components"]["securitySchemes"];
    assert_eq!(schemes["adminToken"]["scheme"], "bearer");
    assert_eq!(schemes["principalKey"]["scheme"], "bearer");
    assert_eq!(
        schemes["registrationSecret"]["name"],
        "X-Registration-Secret"
    );
    let ping = &doc["paths"]["/api/v1/apps/{appId}/ping"]["post"];
    let timeout = ping["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "timeoutMs")
        .expect("timeoutMs");
    let hooks = switchboard::config::HooksConfig::default();
    assert_eq!(timeout["schema"]["minimum"], json!(hooks.min_timeout_ms));
    assert_eq!(timeout["schema"]["maximum"], json!(hooks.max_timeout_ms));
}

/// A validator of one component of the document.
pub fn component(doc: &Value, name: &str) -> jsonschema::Validator {
    let reference = json!({"$ref": format!("#/components/schemas/{name}")});
    component_schema(doc, &reference)
}

/// A validator of `schema`, a schema of the document whose references
/// point into its components.
pub fn component_schema(doc: &Value, schema: &Value) -> jsonschema::Validator {
    let root = json!({"allOf": [schema], "components": doc["components"]});
    jsonschema::options()
        .should_validate_formats(true)
        .build(&root)
        .unwrap_or_else(|e| panic!("{schema} is not a valid schema: {e}"))
}

async fn call(hub: &TestHub, method: Method, path: &str, bearer: Option<&str>) -> (u16, Value) {
    let mut request = hub.http.request(method, format!("{}{path}", hub.base));
    if let Some(token) = bearer {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn the_hub_serves_the_exported_document_and_writes_the_error_shape_it_states() {
    let hub = TestHub::start().await;
    let served = hub
        .http
        .get(format!("{}/api/v1/openapi.json", hub.base))
        .send()
        .await
        .expect("GET openapi.json");
    assert_eq!(served.status(), 200);
    assert_eq!(served.headers()["content-type"], "application/json");
    let text = served.text().await.unwrap();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("rpc/openapi.json");
    assert!(
        text == std::fs::read_to_string(file).unwrap(),
        "GET /api/v1/openapi.json differs from rpc/openapi.json"
    );
    let doc: Value = serde_json::from_str(&text).unwrap();
    let error = component(&doc, "ApiError");

    let (_, agent_key) = hub.register_agent("shape").await;
    let answers = [
        call(&hub, Method::GET, "/api/v1/nowhere", None).await,
        call(&hub, Method::GET, "/api/v1/audit", None).await,
        call(
            &hub,
            Method::GET,
            "/api/v1/audit?limit=0",
            Some(ADMIN_TOKEN),
        )
        .await,
        call(&hub, Method::GET, "/api/v1/openapi.json?x=1", None).await,
        call(&hub, Method::DELETE, "/api/v1/audit", Some(ADMIN_TOKEN)).await,
        call(
            &hub,
            Method::GET,
            "/api/v1/apps/00000000-0000-0000-0000-000000000001/installation",
            Some(&agent_key),
        )
        .await,
        call(&hub, Method::POST, "/api/v1/spaces", Some(ADMIN_TOKEN)).await,
    ];
    let statuses: Vec<u16> = answers.iter().map(|(s, _)| *s).collect();
    assert_eq!(statuses, [404, 401, 400, 400, 405, 403, 415]);
    for (status, body) in &answers {
        let problems: Vec<String> = error.iter_errors(body).map(|e| e.to_string()).collect();
        assert!(problems.is_empty(), "{status} {body}: {problems:?}");
    }
    assert_eq!(answers[2].1["error"]["details"][0]["pointer"], "/limit");
    assert_eq!(answers[5].1["error"]["reason"], "subject_kind_not_allowed");
    // The schema refuses what ApiError never writes.
    assert!(!error.is_valid(&json!({"error": {"code": "x", "message": "m", "hint": 1}})));
    assert!(!error.is_valid(&json!({"error": {"code": "Not Found", "message": "m"}})));
}
