//! An app's hook health and its check (issue 21), by the operator or the
//! app itself with its key (its own id only; any other answers as a
//! missing app). The health figures are the hub's in-memory window
//! (`hub::HookHealth`); the check calls the connected app
//! (`hooks::check`).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::HeaderMap;
use axum::Json;
use serde_json::{json, Map, Value};

use super::error::ApiError;
use super::installations::{app_id, app_not_found, object_body, operator_or_app};
use super::manage::store_failure;
use crate::domain::authz::Action;
use crate::hooks::check::{check_app, CheckOutcome};
use crate::hub::hook_health::MethodHealth;
use crate::hub::Hub;
use crate::protocol::tasks::{AppDispatchAuthorize, AppMessageAuthorize, AppTaskCreate};
use crate::protocol::{Method, RateClass};
use crate::store::AppRecord;

/// The app, once the caller may name it.
async fn app_record(hub: &Hub, app: uuid::Uuid) -> Result<AppRecord, ApiError> {
    hub.store
        .app(app)
        .await
        .map_err(store_failure)?
        .ok_or_else(app_not_found)
}

/// `GET /api/v1/apps/{appId}/health`: per method, the calls of the last
/// `hooks.health_window_secs`. The three gates are always listed, with
/// their policy (and `timeoutMs` for a hook); other methods only when
/// called in the window.
pub async fn health(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(raw): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let app = app_id(&raw)?;
    let access = (RateClass::Default, Action::AppHealthRead);
    operator_or_app(&hub, &headers, remote, app, access).await?;
    let record = app_record(&hub, app).await?;
    Ok(Json(json!({
        "appId": app,
        "windowSeconds": hub.hook_health.window().as_secs(),
        "methods": health_methods(&hub, &record),
    })))
}

/// Per method, the app's figures of the window: the three gates always,
/// with their policy (and `timeoutMs` for a hook); other methods only
/// when called in the window. The console shows the same list.
pub(super) fn health_methods(hub: &Hub, record: &AppRecord) -> Vec<Value> {
    let mut figures = hub.hook_health.snapshot(record.principal.id);
    let mut methods = Vec::new();
    for (gate, method, policy) in gates(record) {
        let found = figures.iter().position(|f| f.method == method);
        let figure = found.map(|i| figures.remove(i));
        let mut entry = method_view(method, figure.as_ref());
        entry.insert("gate".into(), json!(gate));
        entry.insert("policy".into(), policy["kind"].clone());
        if let Some(timeout) = policy.get("timeoutMs") {
            entry.insert("timeoutMs".into(), timeout.clone());
        }
        methods.push(Value::Object(entry));
    }
    for figure in &figures {
        methods.push(Value::Object(method_view(figure.method, Some(figure))));
    }
    methods
}

/// The manifest's gates: name, method and policy as the manifest has it.
fn gates(app: &AppRecord) -> [(&'static str, &'static str, Value); 3] {
    let hooks = &app.manifest.hooks;
    [
        (
            "task_create",
            AppTaskCreate::NAME,
            policy(&hooks.task_create),
        ),
        (
            "message_authorize",
            AppMessageAuthorize::NAME,
            policy(&hooks.message_authorize),
        ),
        (
            "dispatch_authorize",
            AppDispatchAuthorize::NAME,
            policy(&hooks.dispatch_authorize),
        ),
    ]
}

fn policy(p: &impl serde::Serialize) -> Value {
    serde_json::to_value(p).expect("a gate policy serializes")
}

fn method_view(method: &str, figure: Option<&MethodHealth>) -> Map<String, Value> {
    let mut view = Map::new();
    view.insert("method".into(), json!(method));
    view.insert("count".into(), json!(figure.map_or(0, |f| f.count)));
    view.insert(
        "outcomes".into(),
        json!(figure.map(|f| f.outcomes.clone()).unwrap_or_default()),
    );
    view.insert("p50Ms".into(), json!(figure.and_then(|f| f.p50_ms)));
    view.insert("p99Ms".into(), json!(figure.and_then(|f| f.p99_ms)));
    view
}

/// `POST /api/v1/apps/{appId}/check`: one synthetic call per `hook` gate
/// (docs/protocol.md, "Checking an app's hooks"). `ok` is true only when
/// every gate answered well in time.
pub async fn check(
    State(hub): State<Arc<Hub>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(raw): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let app = app_id(&raw)?;
    let access = (RateClass::Write, Action::AppCheck);
    operator_or_app(&hub, &headers, remote, app, access).await?;
    object_body(&headers, &body, &[])?;
    Ok(Json(check_answer(&hub, app).await?))
}

/// The check's answer, `{appId, ok, gates}`: the REST route's and the
/// console's "run check".
pub(super) async fn check_answer(hub: &Arc<Hub>, app: uuid::Uuid) -> Result<Value, ApiError> {
    let record = app_record(hub, app).await?;
    let gates = check_app(hub, &record).await.map_err(store_failure)?;
    let ok = gates.iter().all(|g| g.kind == CheckOutcome::Ok);
    Ok(json!({ "appId": app, "ok": ok, "gates": gates }))
}
