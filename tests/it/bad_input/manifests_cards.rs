//! App manifests (`POST /api/v1/apps/register`) and App Cards
//! (`POST /api/v1/cards`): each row is a document with one fault and the
//! exact 400 that names it. SQLite only: both are refused before any
//! store call.

use serde_json::{json, Value};

use super::{assert_no_failures, options, Health};
use crate::support::hub::ADMIN_TOKEN;
use crate::support::{werewolf_manifest, TestHub};

/// A change to the seed's Werewolf manifest.
type Edit = fn(&mut Value);

/// The manifest's 400 with these problems, in order.
fn manifest_problems(problems: &[(&str, &str)]) -> Value {
    let details: Vec<Value> = problems
        .iter()
        .map(|(pointer, message)| json!({"pointer": format!("/manifest{pointer}"), "message": message}))
        .collect();
    json!({"error": {"code": "invalid_manifest", "message": "the manifest is invalid", "details": details}})
}

#[rustfmt::skip]
fn manifest_rows() -> Vec<(&'static str, Edit, Value)> {
    let one = |pointer: &str, message: &str| manifest_problems(&[(pointer, message)]);
    vec![
        ("without a name", |m| {m.as_object_mut().unwrap().remove("name");}, one("/name", "is required")),
        ("a name of the wrong type", |m| m["name"] = json!(5), one("/name", "must be a string")),
        ("an empty name", |m| m["name"] = json!(""), one("/name", "must be 1 to 100 characters long")),
        ("a name with a control character", |m| m["name"] = json!("a\u{7}b"), one("/name", "must not contain control characters")),
        ("a description too long", |m| m["description"] = json!("d".repeat(2001)), one("/description", "must be 1 to 2000 characters long")),
        ("an unknown member", |m| m["zz"] = json!(1), one("/zz", "unknown member")),
        ("without limits", |m| {m.as_object_mut().unwrap().remove("limits");}, one("/limits", "is required")),
        ("maxParticipants 0", |m| m["limits"]["maxParticipants"] = json!(0), one("/limits/maxParticipants", "must be an integer from 1 to 1000")),
        ("maxParticipants a string", |m| m["limits"]["maxParticipants"] = json!("x"), one("/limits/maxParticipants", "must be an integer")),
        ("conversations not an array", |m| m["conversations"] = json!({}), one("/conversations", "must be an array")),
        ("a conversation key with capitals", |m| m["conversations"][0]["key"] = json!("Town Square"), one("/conversations/0/key", "may contain only lowercase letters, digits, '-' and '_'")),
        ("a conversation key twice", |m| m["conversations"][1]["key"] = json!("town-square"), one("/conversations/1/key", "duplicate key \"town-square\"")),
        ("a participantFilter not known", |m| m["conversations"][0]["participantFilter"] = json!("some"), one("/conversations/0/participantFilter", "must be one of \"all\", \"none\"")),
        ("more conversations than limits.max_manifest_conversations", |m| {let c: Vec<Value> = (0..33).map(|i| json!({"key": format!("c{i}"), "name": "C", "participantFilter": "all"})).collect(); m["conversations"] = json!(c);}, one("/conversations", "must have at most 32 entries")),
        ("without hooks", |m| {m.as_object_mut().unwrap().remove("hooks");}, one("/hooks", "is required")),
        ("a gate missing", |m| {m["hooks"].as_object_mut().unwrap().remove("task_create");}, one("/hooks/task_create", "is required")),
        ("a gate kind not known", |m| m["hooks"]["task_create"] = json!({"kind": "maybe"}), one("/hooks/task_create/kind", "must be one of \"accept\", \"reject\", \"hook\"")),
        ("a reason on an accepting gate", |m| m["hooks"]["task_create"] = json!({"kind": "accept", "reason": "r"}), one("/hooks/task_create/reason", "is not allowed for kind \"accept\"")),
        ("a refusing gate without a reason", |m| m["hooks"]["task_create"] = json!({"kind": "reject"}), one("/hooks/task_create/reason", "is required")),
        ("a hook timeout under hooks.min_timeout_ms", |m| m["hooks"]["message_authorize"]["timeoutMs"] = json!(1), one("/hooks/message_authorize/timeoutMs", "must be an integer from 10 to 60000")),
        ("every problem at once", |m| {m["name"] = json!(""); m["limits"]["maxParticipants"] = json!(0);}, manifest_problems(&[("/name", "must be 1 to 100 characters long"), ("/limits/maxParticipants", "must be an integer from 1 to 1000")])),
    ]
}

/// An unsigned card whose every entry file is listed with a well-formed
/// hash: each row breaks one rule of it.
fn card() -> Value {
    let hash = format!("sha256:{}", "0".repeat(64));
    json!({
        "schema": "muretai/app/1",
        "id": "werewolf",
        "name": "Werewolf",
        "tagline": "Who is the wolf?",
        "description": "A social deduction game for agents.",
        "version": "1.2.0",
        "category": "game",
        "primitives": ["send_message", "read_inbox"],
        "entry": {
            "readme": "README.md",
            "integrity": { "README.md": hash }
        },
        "coreChanges": false,
        "author": "did:key:placeholder"
    })
}

fn with(edit: impl FnOnce(&mut Value)) -> Value {
    let mut c = card();
    edit(&mut c);
    json!({ "card": c })
}

fn refused(code: &str, message: &str) -> Value {
    json!({"error": {"code": code, "message": message}})
}

#[rustfmt::skip]
fn card_rows() -> Vec<(&'static str, Value, Value)> {
    let key = ed25519_dalek::SigningKey::from_bytes(&[7u8; 32]);
    let author = switchboard::domain::card::did_key::encode(&key.verifying_key());
    let signed_by = author.clone();
    vec![
        ("without a card", json!({}), refused("invalid_request", "card is required")),
        ("a card of the wrong type", json!({"card": 5}), refused("invalid_schema", "app.json does not match the schema: invalid type: integer `5`, expected struct AppCard")),
        ("an empty card", json!({"card": {}}), refused("invalid_schema", "app.json does not match the schema: missing field `schema`")),
        ("another schema", with(|c| c["schema"] = json!("muretai/app/2")), refused("wrong_schema", "schema must be \"muretai/app/1\"")),
        ("an id with capitals", with(|c| c["id"] = json!("Werewolf")), refused("invalid_id", "id \"Werewolf\" must be 1 to 64 lowercase letters, digits or '-', starting with a letter or digit")),
        ("a version that is not semver", with(|c| c["version"] = json!("one")), refused("invalid_version", "version \"one\" is not a semantic version")),
        ("core changes", with(|c| c["coreChanges"] = json!(true)), refused("core_changes", "coreChanges must be false: an app never patches the core")),
        ("an unknown primitive", with(|c| c["primitives"] = json!(["teleport"])), refused("unknown_primitive", "unknown primitive \"teleport\"")),
        ("an entry not in integrity", with(|c| c["entry"]["integrity"] = json!({})), refused("unlisted_entry", "entry.readme names \"README.md\", which is not a file listed in integrity")),
        ("an integrity value not a sha256", with(|c| c["entry"]["integrity"]["README.md"] = json!("md5:00")), refused("bad_integrity_value", "integrity value for \"README.md\" must be \"sha256:\" and 64 lowercase hex digits")),
        ("a path out of the package", with(|c| {c["entry"]["integrity"]["../etc/passwd"] = json!(format!("sha256:{}", "0".repeat(64)));}), refused("bad_path", "path \"../etc/passwd\" is not a relative POSIX path inside the package")),
        ("an author that is no did:key", with(|_| {}), refused("bad_author", "author \"did:key:placeholder\" is not an Ed25519 did:key")),
        ("an unsigned card", with(move |c| c["author"] = json!(author)), refused("unsigned", "the card is not signed (sig is missing)")),
        ("a signature that does not verify", with(move |c| {c["author"] = json!(signed_by); c["sig"] = json!(base64_of(&[0u8; 64]));}), refused("bad_signature", "the signature does not verify for the author over the canonical card")),
        ("an unknown member beside the card", json!({"card": card(), "zz": 1}), json!({"error": {"code": "invalid_request", "message": "the request has invalid fields", "details": [{"pointer": "/zz", "message": "unknown member"}]}})),
        ("files not an object", json!({"card": card(), "files": []}), refused("invalid_request", "files must be an object of base64 strings")),
        ("a file not base64", json!({"card": card(), "files": {"README.md": "%%%"}}), refused("invalid_request", "files.README.md must be base64")),
        ("forceAuthor not a boolean", json!({"card": card(), "forceAuthor": "yes"}), refused("invalid_request", "forceAuthor must be a boolean")),
    ]
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub fn row_count() -> usize {
    manifest_rows().len() + card_rows().len()
}

async fn post(hub: &TestHub, path: &str, body: &Value, operator: bool) -> (u16, Value) {
    let mut request = hub.http.post(format!("{}{path}", hub.base)).json(body);
    if operator {
        request = request.bearer_auth(ADMIN_TOKEN);
    }
    let r = request.send().await.expect("POST");
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn bad_manifests_and_cards_are_refused_naming_the_field() {
    let hub = TestHub::start_with(options()).await;
    let mut health = Health::new(&hub);
    let mut failures = Vec::new();
    for (name, edit, expected) in manifest_rows() {
        let mut manifest = werewolf_manifest();
        edit(&mut manifest);
        let got = post(
            &hub,
            "/api/v1/apps/register",
            &json!({ "manifest": manifest }),
            false,
        )
        .await;
        if got != (400, expected.clone()) {
            failures.push(format!(
                "manifest {name}: answered {} {}, expected 400 {expected}",
                got.0, got.1
            ));
        }
        failures.extend(health.faults(&hub, name).await);
    }
    for (name, body, expected) in card_rows() {
        let got = post(&hub, "/api/v1/cards", &body, true).await;
        if got != (400, expected.clone()) {
            failures.push(format!(
                "card {name}: answered {} {}, expected 400 {expected}",
                got.0, got.1
            ));
        }
        failures.extend(health.faults(&hub, name).await);
    }
    assert_no_failures("manifests and cards", row_count(), &failures);
}
