//! Issue 15's installations against a real hub on both backends (ADR
//! 0023): what registration installs, the operator's lifecycle over REST
//! and the CLI, its effects on sockets, tasks and keys, and its audit.

mod audit;
mod cli;
mod grants;
mod lifecycle;
mod registration;
mod uninstall;

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::hub::{Options, ADMIN_TOKEN};
use crate::support::{pg, werewolf_manifest, TestHub};

/// A test of `$case(options)` on SQLite and on a throwaway PostgreSQL.
macro_rules! both {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test] async fn $case() { super::$case(crate::support::TestHub::fast_options()).await; })*
        }
        mod postgres {
            $(#[tokio::test] async fn $case() { super::$case(crate::installations::on_postgres().await).await; })*
        }
    };
}
pub(crate) use both;

pub async fn on_postgres() -> Options {
    Options {
        database_url: Some(pg::fresh_database().await),
        ..TestHub::fast_options()
    }
}

/// One REST call with `bearer`; the answer's status and body (`Null` when
/// empty).
pub async fn call(
    hub: &TestHub,
    method: Method,
    path: &str,
    bearer: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let mut request = hub
        .http
        .request(method, format!("{}{path}", hub.base))
        .bearer_auth(bearer);
    if let Some(body) = body {
        request = request.json(body);
    }
    let r = request.send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    (status, body)
}

/// An operator call on `/api/v1/apps/{app}/<rest>`.
pub async fn operator(
    hub: &TestHub,
    method: Method,
    app: &str,
    rest: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let path = format!("/api/v1/apps/{app}/{rest}");
    call(hub, method, &path, ADMIN_TOKEN, body).await
}

/// The scopes member every seed-000 installation answers with.
pub fn events_scopes(granted: bool) -> Value {
    let all = json!(["events:subscribe"]);
    let granted = if granted { all.clone() } else { json!([]) };
    json!({"requested": all, "granted": granted, "effective": granted})
}

/// The werewolf manifest with `description`.
pub fn described(description: &str) -> Value {
    let mut m = werewolf_manifest();
    m["description"] = json!(description);
    m
}

/// The app's stored events of `event_type`, read over REST catch-up.
pub async fn app_events(hub: &TestHub, key: &str, event_type: &str) -> Vec<Value> {
    let (status, body) = crate::support::event_reader::rest_events(hub, key, "after=0").await;
    assert_eq!(status, 200, "{body}");
    body["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == json!(event_type))
        .cloned()
        .collect()
}

/// The `details` of every audit row of `action` on `app`, oldest first
/// (`Null` where a row has none).
pub async fn audit_details(hub: &TestHub, app: &str, action: &str) -> Vec<Value> {
    let path = format!("/api/v1/audit/actions?appId={app}");
    let (status, body) = call(hub, Method::GET, &path, ADMIN_TOKEN, None).await;
    assert_eq!(status, 200, "{body}");
    body["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["action"] == json!(action))
        .map(|r| r["details"].clone())
        .collect()
}
