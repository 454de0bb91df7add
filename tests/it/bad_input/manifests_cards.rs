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

fn manifest_rows() -> Vec<(&'static str, Edit, Value)> {
    vec![]
}

fn card_rows() -> Vec<(&'static str, Value, Value)> {
    vec![]
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
        let got = post(&hub, "/api/v1/apps/register", &json!({ "manifest": manifest }), false).await;
        if got != (400, expected.clone()) {
            failures.push(format!("manifest {name}: answered {} {}, expected 400 {expected}", got.0, got.1));
        }
        failures.extend(health.faults(&hub, name).await);
    }
    for (name, body, expected) in card_rows() {
        let got = post(&hub, "/api/v1/cards", &body, true).await;
        if got != (400, expected.clone()) {
            failures.push(format!("card {name}: answered {} {}, expected 400 {expected}", got.0, got.1));
        }
        failures.extend(health.faults(&hub, name).await);
    }
    assert_no_failures("manifests and cards", row_count(), &failures);
}
