//! Calling an app: the one path every gate hook and probe takes. It picks
//! the app's callback socket, makes the server-initiated call with a
//! deadline, decodes the answer into the catalogue's result type and records
//! the outcome. Callers turn anything but `Ok` into a fail-closed verdict.

use std::time::{Duration, Instant};

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

/// Calls the app by the catalogue's name (the operator's ping, which has no
/// other name).
pub async fn call_app<M: Method>(
    hub: &Hub,
    app_id: Uuid,
    params: &M::Params,
    timeout: Duration,
) -> HookOutcome<M::Result> {
    call_app_as::<M>(hub, app_id, CallbackNames::Current, params, timeout).await
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
    debug_assert_eq!(M::DIRECTION, Direction::FromHub);
    let started = Instant::now();
    let outcome = match hub.registry.callback_target(app_id) {
        None => HookOutcome::Unavailable,
        Some(conn) => {
            let params = serde_json::to_value(params).expect("hook params serialize");
            let name = protocol::callback_name::<M>(names);
            match conn.peer.call(name, &params, timeout).await {
                CallOutcome::Ok(value) => match serde_json::from_value::<M::Result>(value) {
                    Ok(result) => HookOutcome::Ok(result),
                    Err(e) => HookOutcome::BadResult(e.to_string()),
                },
                CallOutcome::RemoteError(e) => HookOutcome::RemoteError(e),
                CallOutcome::Timeout => HookOutcome::Timeout,
                CallOutcome::Disconnected => HookOutcome::Disconnected,
                CallOutcome::BadResult(reason) => HookOutcome::BadResult(reason),
            }
        }
    };
    let label = outcome.label();
    metrics::counter!(names::SERVER_CALLS, "method" => M::NAME, "outcome" => label).increment(1);
    metrics::histogram!(names::SERVER_CALL_DURATION, "method" => M::NAME)
        .record(started.elapsed().as_secs_f64());
    if matches!(outcome, HookOutcome::Ok(_)) {
        debug!(app = %app_id, method = M::NAME, elapsed_ms = started.elapsed().as_millis() as u64, "app call ok");
    } else {
        warn!(app = %app_id, method = M::NAME, outcome = label, elapsed_ms = started.elapsed().as_millis() as u64, "app call failed");
    }
    outcome
}
