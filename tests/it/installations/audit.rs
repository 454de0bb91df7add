//! Every lifecycle action is one `audit_actions` row with no values (ADR
//! 0023 §5): who, what, scopes and state before and after. A canary in the
//! manifest's description never appears in the audit, in any answer of the
//! lifecycle routes, or in the hub's log.

use reqwest::Method;
use serde_json::{json, Value};

use super::{both, call, described, operator};
use crate::support::hub::{Options, ADMIN_TOKEN};
use crate::support::TestHub;

both!(every_lifecycle_action_is_one_audit_row_without_values);

const CANARY: &str = "canary-3b91-never-in-the-audit";

async fn actions(hub: &TestHub, query: &str) -> (u16, Value) {
    let path = format!("/api/v1/audit/actions?{query}");
    call(hub, Method::GET, &path, ADMIN_TOKEN, None).await
}

/// Runs every lifecycle action once (and two repeats, which write
/// nothing); returns every answer's text.
async fn run_the_lifecycle(hub: &TestHub, app: &str, key: &str) -> Vec<String> {
    let mut answers = Vec::new();
    let none = json!({"scopes": []});
    let all = json!({"scopes": ["events:subscribe"]});
    let upgrade = described(&format!("edition two {CANARY}"));
    let manifest_path = format!("/api/v1/apps/{app}/manifest");
    let steps: Vec<(Method, &str, Option<&Value>)> = vec![
        (Method::PUT, "installation/scopes", Some(&none)),
        (Method::PUT, "installation/scopes", Some(&all)),
        (Method::POST, "installation/suspend", None),
        (Method::POST, "installation/suspend", None),
        (Method::POST, "installation/resume", None),
        (Method::POST, "installation/resume", None),
    ];
    for (method, rest, body) in steps {
        let (status, answer) = operator(hub, method, app, rest, body).await;
        assert_eq!(status, 200, "{rest}: {answer}");
        answers.push(answer.to_string());
    }
    let (status, answer) = call(hub, Method::PUT, &manifest_path, key, Some(&upgrade)).await;
    assert_eq!(status, 200, "{answer}");
    answers.push(answer.to_string());
    let (status, _) = operator(hub, Method::DELETE, app, "installation", None).await;
    assert_eq!(status, 204);
    let (status, answer) = operator(hub, Method::POST, app, "installation", None).await;
    assert_eq!(status, 201, "{answer}");
    answers.push(answer.to_string());
    answers
}

async fn every_lifecycle_action_is_one_audit_row_without_values(options: Options) {
    let hub = TestHub::start_with(options).await;
    let (app, key) = hub
        .register_app(&described(&format!("a game {CANARY}")))
        .await;
    let (_, other_key) = hub.register_app(&described("another")).await;
    let answers = run_the_lifecycle(&hub, &app, &key).await;

    let (status, page) = actions(&hub, &format!("appId={app}")).await;
    assert_eq!(status, 200, "{page}");
    let records = page["records"].as_array().unwrap();
    let rows: Vec<(&str, &str)> = records
        .iter()
        .map(|r| {
            (
                r["action"].as_str().unwrap(),
                r["actorKind"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("app.install", "app"),
            ("app.scopes.update", "operator"),
            ("app.scopes.update", "operator"),
            ("app.suspend", "operator"),
            ("app.resume", "operator"),
            ("app.upgrade", "app"),
            ("app.uninstall", "operator"),
            ("app.install", "operator"),
        ],
        "one row per action, none for a repeat"
    );
    let scopes: Vec<(&Value, &Value)> = records
        .iter()
        .map(|r| (&r["scopesBefore"], &r["scopesAfter"]))
        .collect();
    let events = json!(["events:subscribe"]);
    assert_eq!(scopes[1], (&events, &json!([])));
    assert_eq!(scopes[2], (&json!([]), &events));
    assert_eq!(
        (&records[6]["stateBefore"], &records[6]["stateAfter"]),
        (&json!("active"), &json!("uninstalled"))
    );
    assert_eq!(records[5]["actorId"], json!(app));
    assert_eq!(
        records[1]["actorId"],
        Value::Null,
        "the operator is no principal"
    );
    assert!(records.iter().all(|r| r["appId"] == json!(app)));

    // Pages: three, then the rest after the last id.
    let (_, first) = actions(&hub, &format!("appId={app}&limit=3")).await;
    let after = first["nextAfter"].as_str().unwrap().to_string();
    let (_, rest) = actions(&hub, &format!("appId={app}&after={after}&limit=100")).await;
    assert_eq!(rest["records"].as_array().unwrap().len(), 5);
    assert!(rest.get("nextAfter").is_none());
    let (_, everything) = actions(&hub, "limit=100").await;
    assert_eq!(
        everything["records"].as_array().unwrap().len(),
        9,
        "the other app's install too"
    );
    for query in ["limit=0", "appId=nope", "colour=red"] {
        let (status, body) = actions(&hub, query).await;
        assert_eq!(status, 400, "{query}: {body}");
    }
    let (status, _) = call(&hub, Method::GET, "/api/v1/audit/actions", &other_key, None).await;
    assert_eq!(status, 401, "the operator's only");

    // No value anywhere: not in the audit, the answers, or the log.
    let audit = everything.to_string();
    assert!(
        !audit.contains(CANARY) && !audit.contains("edition two"),
        "{audit}"
    );
    for answer in &answers {
        assert!(!answer.contains(CANARY), "{answer}");
    }
    assert!(
        !hub.log().contains(CANARY),
        "the canary reached the hub's log"
    );
    // Nor the app's key (shown once, at registration), nor its secret part
    // (`sbk_app_<id>_<secret>`: the secret's own alphabet has `_`).
    let secret = key.splitn(4, '_').nth(3).unwrap_or(&key);
    assert!(!audit.contains(secret), "the app's key reached the audit");
    assert!(
        !hub.log().contains(secret),
        "the app's key reached the hub's log"
    );
}
