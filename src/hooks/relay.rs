//! Hook calls across nodes (ADR 0035). The gate's node finds the app's
//! newest socket in the presence table; when another node holds it, the
//! call goes to that node's hook subject by NATS request/reply, with the
//! hook's deadline. The holding node makes the server-initiated call and
//! replies with the outcome, which keeps its meaning on the way back.
//! Everything that goes wrong on the way is an outcome that denies.

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::{debug, warn};
use uuid::Uuid;

use super::HookOutcome;
use crate::cluster::{subjects, Kind};
use crate::domain::{now_millis, Millis};
use crate::hub::Hub;
use crate::protocol::{self, Direction, SpecKind};
use crate::rpc::{CallOutcome, RpcError};
use crate::store::CallbackPresence;
use crate::telemetry::names;

/// What the gate's node asks the holding node.
#[derive(Debug, Serialize, Deserialize)]
struct RelayCall {
    app_id: Uuid,
    connection_id: Uuid,
    /// The wire name, as the manifest's `callbackNames` chose it.
    method: String,
    params: Value,
    /// What is left of the hook's deadline when the request is sent.
    timeout_ms: u64,
    /// The caller's deadline, wall-clock epoch milliseconds: a call that
    /// reaches the holding node late (NATS queued it through a reconnect)
    /// is dropped, and a timely one gets only the time left. Wall clocks
    /// of two nodes differ by their skew, which shortens (or lengthens)
    /// the time left by as much; `timeout_ms` still caps it. Absent from
    /// a node of an older version: `timeout_ms` alone then.
    #[serde(default)]
    deadline_ms: Option<Millis>,
}

impl RelayCall {
    /// What the holding node may spend on the app at `now`: at most
    /// `timeout_ms`, at most until the caller's deadline, less the margin
    /// that lets its answer travel back. `None` when nothing is left.
    fn time_left(&self, now: Millis) -> Option<Duration> {
        let mut left = Duration::from_millis(self.timeout_ms);
        if let Some(deadline) = self.deadline_ms {
            let until = u64::try_from(deadline.saturating_sub(now)).unwrap_or(0);
            left = left.min(Duration::from_millis(until));
        }
        let left = left.saturating_sub(relay_margin(left));
        (!left.is_zero()).then_some(left)
    }
}

/// The holding node's answer: one of the hook outcomes.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
enum RelayAnswer {
    Ok {
        result: Value,
    },
    RemoteError {
        error: RpcError,
    },
    Timeout,
    Disconnected,
    Unavailable,
    BadResult {
        reason: String,
    },
    /// The socket is no longer open on the holding node: it closed after
    /// the caller read the presence table (its row is going).
    Gone,
}

impl From<CallOutcome> for RelayAnswer {
    fn from(outcome: CallOutcome) -> Self {
        match outcome {
            CallOutcome::Ok(result) => RelayAnswer::Ok { result },
            CallOutcome::RemoteError(error) => RelayAnswer::RemoteError { error },
            CallOutcome::Timeout => RelayAnswer::Timeout,
            CallOutcome::Disconnected => RelayAnswer::Disconnected,
            CallOutcome::BadResult(reason) => RelayAnswer::BadResult { reason },
        }
    }
}

impl From<RelayAnswer> for HookOutcome<Value> {
    fn from(answer: RelayAnswer) -> Self {
        match answer {
            RelayAnswer::Ok { result } => HookOutcome::Ok(result),
            RelayAnswer::RemoteError { error } => HookOutcome::RemoteError(error),
            RelayAnswer::Timeout => HookOutcome::Timeout,
            RelayAnswer::Disconnected => HookOutcome::Disconnected,
            RelayAnswer::Unavailable => HookOutcome::Unavailable,
            RelayAnswer::BadResult { reason } => HookOutcome::BadResult(reason),
            RelayAnswer::Gone => HookOutcome::Unavailable,
        }
    }
}

/// How long before the caller's deadline the holding node gives up on the
/// app, so its `timeout` reaches the caller before the caller's own wait
/// ends: a tenth of the deadline, at most 50 ms.
fn relay_margin(timeout: Duration) -> Duration {
    (timeout / 10).min(Duration::from_millis(50))
}

/// Targets tried for one call: a socket that closed after the presence
/// read hands the call to the next newest, as the registry does on one node.
/// Three, not a setting: each try reads presence again and shares the one
/// hook deadline, so more tries cannot make a call slower than its
/// deadline, only bound the presence reads when callback sockets churn
/// (a newest socket closing twice within one call is already rare; a
/// fourth read would mostly find the deadline spent).
const MAX_TARGETS: usize = 3;

/// One call to the app's newest socket anywhere in the cluster, within
/// `timeout` in all.
pub async fn call_in_cluster(
    hub: &Hub,
    app_id: Uuid,
    name: &'static str,
    params: &Value,
    timeout: Duration,
) -> HookOutcome<Value> {
    let cluster = &hub.cluster;
    let started = Instant::now();
    // The socket whose node had no responder on its hook subject.
    let mut unreachable = None;
    for _ in 0..MAX_TARGETS {
        let left = timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            return HookOutcome::Timeout;
        }
        let target = match hub.store.callback_presence(app_id).await {
            Ok(Some(target)) => target,
            Ok(None) => return HookOutcome::Unavailable,
            Err(e) => {
                warn!(app = %app_id, error = %e, "reading the app's presence failed; failing closed");
                return HookOutcome::Unavailable;
            }
        };
        if unreachable == Some(target.connection_id) {
            // Still the newest: its node died and its lease is live.
            return HookOutcome::Unavailable;
        }
        let answer = if target.node_id == cluster.node_id() {
            call_local(hub, app_id, target.connection_id, name, params, left).await
        } else {
            // Not connected: the client would queue the request and send
            // it on reconnect, long after this gate failed closed.
            match cluster.client().filter(|_| cluster.is_connected()) {
                Some(client) => call_remote(client, app_id, &target, name, params, left).await,
                None => {
                    count("nats_error");
                    return HookOutcome::Unavailable;
                }
            }
        };
        match answer {
            Answered::Outcome(outcome) => return outcome,
            Answered::NoResponders => {
                // A drained node forgot its rows before it unsubscribed:
                // read again and the app's socket elsewhere is the target.
                // A dead node's rows stay until its lease lapses: the same
                // target again, which ends the call `unavailable`.
                unreachable = Some(target.connection_id);
            }
            Answered::Gone => {
                // Closed since the read: its row is stale; the next newest.
                if let Err(e) = hub.store.remove_presence(target.connection_id).await {
                    warn!(app = %app_id, error = %e, "forgetting a closed socket's presence failed");
                    return HookOutcome::Unavailable;
                }
            }
        }
    }
    HookOutcome::Unavailable
}

/// A call's end as the caller sees it: an outcome, a socket that was no
/// longer open where the presence table said it was, or a node that no
/// longer takes calls on its hook subject.
enum Answered {
    Outcome(HookOutcome<Value>),
    Gone,
    NoResponders,
}

/// The call on this node's socket `connection_id` of the app.
async fn call_local(
    hub: &Hub,
    app_id: Uuid,
    connection_id: Uuid,
    name: &str,
    params: &Value,
    timeout: Duration,
) -> Answered {
    match hub.registry.app_connection(app_id, connection_id) {
        None => Answered::Gone,
        Some(conn) => {
            let answer = RelayAnswer::from(conn.peer.call(name, params, timeout).await);
            Answered::Outcome(answer.into())
        }
    }
}

/// The request to the holding node, waited on for at most `timeout`.
async fn call_remote(
    client: &async_nats::Client,
    app_id: Uuid,
    target: &CallbackPresence,
    name: &'static str,
    params: &Value,
    timeout: Duration,
) -> Answered {
    let call = RelayCall {
        app_id,
        connection_id: target.connection_id,
        method: name.to_string(),
        params: params.clone(),
        timeout_ms: timeout.as_millis() as u64,
        deadline_ms: Some(now_millis().saturating_add(timeout.as_millis() as Millis)),
    };
    let payload = Bytes::from(serde_json::to_vec(&call).expect("relay call serializes"));
    if payload.len() > client.server_info().max_payload {
        // NATS would refuse it: no node could answer it, whatever it waits.
        count("too_large");
        return Answered::Outcome(HookOutcome::BadResult(TOO_LARGE_CALL.into()));
    }
    let request = async_nats::Request::new()
        .payload(payload)
        .timeout(Some(timeout));
    metrics::counter!(names::CLUSTER_MESSAGES, "direction" => "published", "kind" => Kind::Hook.as_str()).increment(1);
    let sent = client.send_request(subjects::node_hook(&target.node_id), request);
    let (answered, label) = match tokio::time::timeout(timeout, sent).await {
        Err(_) => (Answered::Outcome(HookOutcome::Timeout), "no_reply"),
        Ok(Err(e)) => match e.kind() {
            async_nats::RequestErrorKind::NoResponders => (Answered::NoResponders, "no_responders"),
            async_nats::RequestErrorKind::TimedOut => {
                (Answered::Outcome(HookOutcome::Timeout), "no_reply")
            }
            _ => {
                debug!(app = %app_id, node = %target.node_id, error = %e, "relaying a hook call failed");
                (Answered::Outcome(HookOutcome::Unavailable), "nats_error")
            }
        },
        Ok(Ok(reply)) => match serde_json::from_slice::<RelayAnswer>(&reply.payload) {
            Ok(RelayAnswer::Gone) => (Answered::Gone, "gone"),
            Ok(answer) => {
                let outcome = HookOutcome::from(answer);
                let label = outcome.label();
                (Answered::Outcome(outcome), label)
            }
            Err(_) => (Answered::Outcome(HookOutcome::Unavailable), "nats_error"),
        },
    };
    count(label);
    answered
}

/// A relayed call this node dropped because its caller's deadline passed.
fn count_late() {
    metrics::counter!(names::CLUSTER_LATE_HOOK_CALLS).increment(1);
}

fn count(outcome: &'static str) {
    metrics::counter!(names::CLUSTER_HOOK_RELAYS, "outcome" => outcome).increment(1);
}

/// The catalogue's hub-to-app request that `name` is the wire name of
/// (its own name or its `moltzap-v1` alias): the only calls a relay makes.
fn app_callback(name: &str) -> Option<&'static str> {
    protocol::catalogue()
        .into_iter()
        .filter(|s| {
            matches!(s.kind, SpecKind::Request)
                && s.direction == Direction::FromHub
                && s.caller == protocol::Caller::App
        })
        .find_map(|s| {
            if s.name == name {
                Some(s.name)
            } else {
                s.moltzap_v1_name.filter(|alias| *alias == name)
            }
        })
}

/// How long a drain answers the calls NATS had already delivered when the
/// node unsubscribed from its hook subject.
const DRAIN_REPLIES_WITHIN: Duration = Duration::from_secs(2);

/// Answers the hook calls other nodes relay to this one. Each call runs as
/// its own task, so a slow app holds up nobody else. At shutdown the node
/// has forgotten its presence rows (`hooks::presence::run`), so no new
/// caller picks it; it keeps answering until its sockets have closed (a
/// call that finds its socket closed answers `gone`, and the caller tries
/// the app's next newest socket), then unsubscribes, answers what NATS had
/// already delivered, and ends (ADR 0034, 2026-12-02 drain).
pub async fn serve(hub: std::sync::Arc<Hub>) {
    let cluster = &hub.cluster;
    let Some(client) = cluster.client().cloned() else {
        return;
    };
    let subject = subjects::node_hook(cluster.node_id());
    let Some(mut calls) = cluster.subscribe(&subject).await else {
        tracing::error!(subject, "cannot take relayed hook calls");
        return;
    };
    loop {
        let msg = tokio::select! {
            msg = calls.next() => msg,
            // Resolves only once shutdown closed the tracker and the last
            // socket ended.
            _ = hub.connections.wait() => break,
        };
        let Some(msg) = msg else { return };
        take_call(&hub, &client, msg);
    }
    if let Err(e) = calls.drain().await {
        debug!(error = %e, "unsubscribing from the hook subject failed");
        return;
    }
    let deadline = tokio::time::Instant::now() + DRAIN_REPLIES_WITHIN;
    while let Ok(Some(msg)) = tokio::time::timeout_at(deadline, calls.next()).await {
        take_call(&hub, &client, msg);
    }
}

/// Answers one relayed call in a task of its own.
fn take_call(hub: &std::sync::Arc<Hub>, client: &async_nats::Client, msg: async_nats::Message) {
    metrics::counter!(names::CLUSTER_MESSAGES, "direction" => "received", "kind" => Kind::Hook.as_str()).increment(1);
    let Some(reply) = msg.reply.clone() else {
        return;
    };
    let hub2 = hub.clone();
    let client = client.clone();
    hub.tasks.spawn(async move {
        let answer = answer(&hub2, &msg.payload).await;
        send_answer(&client, reply, &answer).await;
    });
}

/// Why a relayed answer is `bad_result`: the app's answer was larger than
/// NATS carries (the server's `max_payload`).
const TOO_LARGE_ANSWER: &str = "the app's answer exceeds the NATS server's max_payload";

/// Why a relayed call is `bad_result` before it is sent.
const TOO_LARGE_CALL: &str = "the hook call exceeds the NATS server's max_payload";

/// Replies with the answer; one NATS cannot carry becomes a small
/// `bad_result` (the caller would otherwise wait out its deadline and
/// read `timeout`, which is not what happened).
async fn send_answer(
    client: &async_nats::Client,
    reply: async_nats::Subject,
    answer: &RelayAnswer,
) {
    let bytes = Bytes::from(serde_json::to_vec(answer).expect("relay answer serializes"));
    let bytes = if bytes.len() > client.server_info().max_payload {
        count("answer_too_large");
        let small = RelayAnswer::BadResult {
            reason: TOO_LARGE_ANSWER.into(),
        };
        Bytes::from(serde_json::to_vec(&small).expect("relay answer serializes"))
    } else {
        bytes
    };
    if let Err(e) = client.publish(reply, bytes).await {
        debug!(error = %e, "replying to a relayed hook call failed");
    }
}

/// One relayed call made on this node's socket.
async fn answer(hub: &Hub, payload: &[u8]) -> RelayAnswer {
    let Ok(call) = serde_json::from_slice::<RelayCall>(payload) else {
        return RelayAnswer::Unavailable;
    };
    let Some(method) = app_callback(&call.method) else {
        warn!(app = %call.app_id, "a relayed call named no app callback; refused");
        return RelayAnswer::Unavailable;
    };
    let Some(timeout) = call.time_left(now_millis()) else {
        count_late();
        warn!(app = %call.app_id, "a relayed call arrived after its deadline; dropped");
        return RelayAnswer::Timeout;
    };
    let started = Instant::now();
    let Some(conn) = hub.registry.app_connection(call.app_id, call.connection_id) else {
        return RelayAnswer::Gone;
    };
    let answer = RelayAnswer::from(conn.peer.call(method, &call.params, timeout).await);
    debug!(
        app = %call.app_id,
        method,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "relayed hook call answered"
    );
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_survives_the_wire() {
        let cases = vec![
            CallOutcome::Ok(serde_json::json!({"verdict": {"accept": {}}})),
            CallOutcome::RemoteError(RpcError::invalid_request("no")),
            CallOutcome::Timeout,
            CallOutcome::Disconnected,
            CallOutcome::BadResult("not json".into()),
        ];
        for case in cases {
            let wire = serde_json::to_vec(&RelayAnswer::from(case.clone())).unwrap();
            let back: HookOutcome<Value> =
                serde_json::from_slice::<RelayAnswer>(&wire).unwrap().into();
            let expected: HookOutcome<Value> = RelayAnswer::from(case).into();
            assert_eq!(back, expected);
        }
        let wire = serde_json::to_vec(&RelayAnswer::Unavailable).unwrap();
        let back: HookOutcome<Value> = serde_json::from_slice::<RelayAnswer>(&wire).unwrap().into();
        assert_eq!(back, HookOutcome::Unavailable);
    }

    #[test]
    fn only_app_callbacks_are_relayed() {
        use crate::protocol::tasks::AppDispatchAuthorize;
        use crate::protocol::Method;
        assert_eq!(
            app_callback(AppDispatchAuthorize::NAME),
            Some(AppDispatchAuthorize::NAME)
        );
        if let Some(alias) = AppDispatchAuthorize::MOLTZAP_V1_NAME {
            assert_eq!(app_callback(alias), Some(alias));
        }
        assert_eq!(app_callback("agents/connect"), None);
        assert_eq!(app_callback("nonsense"), None);
    }

    fn call(timeout_ms: u64, deadline_ms: Option<Millis>) -> RelayCall {
        RelayCall {
            app_id: Uuid::nil(),
            connection_id: Uuid::nil(),
            method: "app/task/create".into(),
            params: Value::Null,
            timeout_ms,
            deadline_ms,
        }
    }

    #[test]
    fn a_call_gets_only_the_time_left_until_its_deadline() {
        let now = 1_000_000;
        assert_eq!(
            call(1_000, Some(now + 1_000)).time_left(now),
            Some(Duration::from_millis(950))
        );
        assert_eq!(
            call(1_000, Some(now + 200)).time_left(now),
            Some(Duration::from_millis(180)),
            "late by 800 ms: 200 ms left, not the full timeout"
        );
        assert_eq!(call(1_000, Some(now)).time_left(now), None);
        assert_eq!(
            call(1_000, Some(now - 5_000)).time_left(now),
            None,
            "queued through a reconnect: dropped"
        );
        assert_eq!(
            call(1_000, Some(now + 60_000)).time_left(now),
            Some(Duration::from_millis(950)),
            "a clock behind the caller's never lengthens the call"
        );
        assert_eq!(
            call(1_000, None).time_left(now),
            Some(Duration::from_millis(950))
        );
    }

    #[test]
    fn the_holding_node_answers_before_the_callers_deadline() {
        assert_eq!(
            relay_margin(Duration::from_millis(100)),
            Duration::from_millis(10)
        );
        assert_eq!(
            relay_margin(Duration::from_secs(5)),
            Duration::from_millis(50)
        );
    }
}
