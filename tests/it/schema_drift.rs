//! The committed `rpc/` (the OpenRPC and OpenAPI documents) and `schemas/`
//! must equal a fresh export.

use std::collections::BTreeSet;
use std::path::Path;

#[test]
fn committed_schemas_match_the_catalogue() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut exported = switchboard::protocol::export::render();
    exported.extend(switchboard::http::openapi::render());
    let mut problems = Vec::new();
    for (path, content) in &exported {
        match std::fs::read_to_string(root.join(path)) {
            Ok(committed) if &committed == content => {}
            Ok(_) => problems.push(format!("{path} differs")),
            Err(_) => problems.push(format!("{path} is missing")),
        }
    }
    let expected: BTreeSet<&String> = exported.keys().collect();
    for dir in ["rpc", "schemas"] {
        for entry in std::fs::read_dir(root.join(dir))
            .into_iter()
            .flatten()
            .flatten()
        {
            let rel = format!("{dir}/{}", entry.file_name().to_string_lossy());
            if !expected.contains(&rel) {
                problems.push(format!("{rel} is not produced by the export"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "rpc/ and schemas/ drifted from the catalogue; run `cargo run -- schema export`:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_openrpc_document_covers_both_directions() {
    let files = switchboard::protocol::export::render();
    let doc: serde_json::Value = serde_json::from_str(&files["rpc/openrpc.json"]).unwrap();
    let methods = doc["methods"].as_array().unwrap();
    let find = |name: &str| {
        methods
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("{name}"))
    };
    assert_eq!(find("agent/network/connect")["x-direction"], "peer-to-hub");
    assert_eq!(find("app/network/ping")["x-direction"], "hub-to-peer");
    assert_eq!(find("app/network/ping")["x-recipient"], "app");
    let connect = find("agent/network/connect");
    let key = connect["params"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "agentKey")
        .unwrap();
    assert_eq!(key["required"], true);
    assert!(doc["components"]["errors"]["InvalidParamsError"]["code"] == -32602);
}

#[test]
fn the_protocol_reference_tables_match_the_catalogue() {
    use switchboard::protocol::docs_tables::{apply, PROTOCOL_DOC};
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(PROTOCOL_DOC);
    let committed = std::fs::read_to_string(&path).unwrap();
    let fresh = apply(&committed).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        fresh == committed,
        "the generated tables of {PROTOCOL_DOC} drifted from the catalogue; run `cargo run -- schema export --docs`"
    );
}
