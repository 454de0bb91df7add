//! What schemathesis found against the document (ADR 0028), each a
//! regression test: the answers a live hub writes are the schemas the
//! document states.

use reqwest::Method;
use serde_json::Value;

use super::component;
use crate::installations::{call, described, operator};
use crate::support::hub::ADMIN_TOKEN;
use crate::support::TestHub;

/// An owner action leaves out the members it has no value for: an
/// install's scopes and state before, the operator's actor id. They were
/// written `null`, which neither docs/protocol.md (`actorId?`) nor the
/// ActionRecord schema allows.
#[tokio::test]
async fn an_owner_action_leaves_out_the_members_it_has_no_value_for() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let (app, _) = hub.register_app(&described("audit shape")).await;
    let (status, _) = operator(&hub, Method::POST, &app, "installation/suspend", None).await;
    assert_eq!(status, 200);
    let (status, page) = call(
        &hub,
        Method::GET,
        "/api/v1/audit/actions",
        ADMIN_TOKEN,
        None,
    )
    .await;
    assert_eq!(status, 200, "{page}");
    let records = page["records"].as_array().expect("records");
    let by = |action: &str| -> &Value {
        records
            .iter()
            .find(|r| r["action"] == action)
            .unwrap_or_else(|| panic!("no {action} in {page}"))
    };
    let (install, suspend) = (by("app.install"), by("app.suspend"));
    assert_eq!(install["actorKind"], "app");
    for member in ["scopesBefore", "stateBefore"] {
        assert!(install.get(member).is_none(), "{member} in {install}");
    }
    assert_eq!(suspend["actorKind"], "operator");
    assert!(suspend.get("actorId").is_none(), "{suspend}");
    assert_eq!(suspend["stateBefore"], "active");
    let schema = component(&switchboard::http::openapi::document(), "ActionRecord");
    for record in records {
        let problems: Vec<String> = schema.iter_errors(record).map(|e| e.to_string()).collect();
        assert!(problems.is_empty(), "{record}: {problems:?}");
    }
}
