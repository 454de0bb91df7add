//! Calling an app: the one path every gate hook and probe takes. It picks
//! the app's callback socket, makes the server-initiated call with a
//! deadline, decodes the answer into the catalogue's result type and records
//! the outcome. Callers turn anything but `Ok` into a fail-closed verdict.
//! In cluster mode the socket may be on another node: `relay` reaches it.

pub mod check;
pub mod presence;
pub mod relay;

use std::time::{Duration, Instant};

use serde_json::Value;

use tracing::{debug, warn};
use uuid::Uuid;

use crate::domain::manifest::CallbackNames;
use crate::hub::Hub;
use crate::protocol::{self, Direction, Method};
use crate::rpc::{CallOutcome, RpcError};
use crate::telemetry::names;

/// How a call to an app ended.
#[derive(Debug, Clone, PartialEq)]
pub enum HookOutcome<T> {
    Ok(T),
    /// The app answered with a JSON-RPC error.
    RemoteError(RpcError),
    /// No answer within the deadline.
    Timeout,
    /// The socket closed while the call waited (or its queue overflowed).
    Disconnected,
    /// The app has no open socket at all.
    Unavailable,
    /// The answer did not decode as the method's result type.
    BadResult(String),
}

impl<T> HookOutcome<T> {
    /// The stable name used in metrics, logs and fail-closed reasons.
    pub fn label(&self) -> &'static str {
        match self {
            HookOutcome::Ok(_) => "ok",
            HookOutcome::RemoteError(_) => "remote_error",
            HookOutcome::Timeout => "timeout",
            HookOutcome::Disconnected => "disconnected",
            HookOutcome::Unavailable => "unavailable",
            HookOutcome::BadResult(_) => "bad_result",
        }
    }
}

/// Who a call is for. Live calls are the traffic the operator watches:
/// they are counted with their app (`switchboard_hook_calls_total`, the
/// latency histogram and the health window). Probes (the operator's ping,
/// `app check`) are counted only in `switchboard_server_calls_total`, so a
/// check of a silent app does not show in the figures it is compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Traffic {
    Live,
    Probe,
}

/// Calls the app by the catalogue's name (autocomplete, which has no other
/// name).
pub async fn call_app<M: Method>(
    hub: &Hub,
    app_id: Uuid,
    params: &M::Params,
    timeout: Duration,
) -> HookOutcome<M::Result> {
    call_app_as::<M>(hub, app_id, CallbackNames::Current, params, timeout).await
}

/// The operator's ping: a probe by the catalogue's name.
pub async fn probe_app<M: Method>(
    hub: &Hub,
    app_id: Uuid,
    params: &M::Params,
    timeout: Duration,
) -> HookOutcome<M::Result> {
    typed_call::<M>(hub, app_id, M::NAME, params, timeout, Traffic::Probe).await
}

/// Calls the app by the name its manifest's `callbackNames` chooses (ADR
/// 0023 §8): the gates pass what the manifest they decided with says. The
/// answer decodes the same under either name, and metrics and logs keep
/// the canonical `M::NAME`, so dashboards do not split by app.
pub async fn call_app_as<M: Method>(
    hub: &Hub,
    app_id: Uuid,
    names: CallbackNames,
    params: &M::Params,
    timeout: Duration,
) -> HookOutcome<M::Result> {
    let name = protocol::callback_name::<M>(names);
    typed_call::<M>(hub, app_id, name, params, timeout, Traffic::Live).await
}

async fn typed_call<M: Method>(
    hub: &Hub,
    app_id: Uuid,
    name: &'static str,
    params: &M::Params,
    timeout: Duration,
    traffic: Traffic,
) -> HookOutcome<M::Result> {
    debug_assert_eq!(M::DIRECTION, Direction::FromHub);
    let params = serde_json::to_value(params).expect("hook params serialize");
    let (answer, elapsed) = call_raw(hub, app_id, name, &params, timeout).await;
    let outcome = decode::<M>(answer);
    record(hub, app_id, M::NAME, outcome.label(), elapsed, traffic);
    outcome
}

/// The answer decoded as the method's result type.
fn decode<M: Method>(answer: HookOutcome<Value>) -> HookOutcome<M::Result> {
    match answer {
        HookOutcome::Ok(value) => match serde_json::from_value::<M::Result>(value) {
            Ok(result) => HookOutcome::Ok(result),
            Err(e) => HookOutcome::BadResult(e.to_string()),
        },
        HookOutcome::RemoteError(e) => HookOutcome::RemoteError(e),
        HookOutcome::Timeout => HookOutcome::Timeout,
        HookOutcome::Disconnected => HookOutcome::Disconnected,
        HookOutcome::Unavailable => HookOutcome::Unavailable,
        HookOutcome::BadResult(reason) => HookOutcome::BadResult(reason),
    }
}

/// One call to the app's callback socket under the wire name `name`: its
/// answer undecoded, and how long it took. Not recorded: the caller
/// records the outcome once it has decoded the answer ([`record`]), so an
/// answer of the wrong type counts as `bad_result`.
pub async fn call_raw(
    hub: &Hub,
    app_id: Uuid,
    name: &'static str,
    params: &Value,
    timeout: Duration,
) -> (HookOutcome<Value>, Duration) {
    let started = Instant::now();
    if presence::clustered(hub) {
        // The newest socket may be on any node (ADR 0035).
        let outcome = relay::call_in_cluster(hub, app_id, name, params, timeout).await;
        return (outcome, started.elapsed());
    }
    let outcome = match hub.registry.callback_target(app_id) {
        None => HookOutcome::Unavailable,
        Some(conn) => match conn.peer.call(name, params, timeout).await {
            CallOutcome::Ok(value) => HookOutcome::Ok(value),
            CallOutcome::RemoteError(e) => HookOutcome::RemoteError(e),
            CallOutcome::Timeout => HookOutcome::Timeout,
            CallOutcome::Disconnected => HookOutcome::Disconnected,
            CallOutcome::BadResult(reason) => HookOutcome::BadResult(reason),
        },
    };
    let elapsed = started.elapsed();
    (outcome, elapsed)
}

/// Counts one call of the catalogue's `method` that ended in `outcome`
/// after `elapsed`, and logs it (ids, names and timings only).
pub fn record(
    hub: &Hub,
    app_id: Uuid,
    method: &'static str,
    outcome: &'static str,
    elapsed: Duration,
    traffic: Traffic,
) {
    let seconds = elapsed.as_secs_f64();
    metrics::counter!(names::SERVER_CALLS, "method" => method, "outcome" => outcome).increment(1);
    metrics::histogram!(names::SERVER_CALL_DURATION, "method" => method).record(seconds);
    if traffic == Traffic::Live {
        let app = app_id.to_string();
        metrics::counter!(names::HOOK_CALLS, "app" => app.clone(), "method" => method, "outcome" => outcome)
            .increment(1);
        metrics::histogram!(names::HOOK_CALL_DURATION, "app" => app, "method" => method)
            .record(seconds);
        hub.hook_health.record(app_id, method, outcome, elapsed);
    }
    let elapsed_ms = elapsed.as_millis() as u64;
    if outcome == "ok" {
        debug!(app = %app_id, method, elapsed_ms, ?traffic, "app call ok");
    } else {
        warn!(app = %app_id, method, outcome, elapsed_ms, ?traffic, "app call failed");
    }
}

/// A gate that did not call because the app's installation is not active:
/// counted as the outcome `inactive` of its method, with no latency.
pub fn record_inactive(hub: &Hub, app_id: Uuid, method: &'static str) {
    metrics::counter!(names::SERVER_CALLS, "method" => method, "outcome" => "inactive")
        .increment(1);
    metrics::counter!(names::HOOK_CALLS, "app" => app_id.to_string(), "method" => method, "outcome" => "inactive")
        .increment(1);
    hub.hook_health
        .record(app_id, method, "inactive", Duration::ZERO);
}
