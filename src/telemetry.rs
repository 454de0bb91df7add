//! Logs and metrics. Nothing secret and no message content is ever recorded:
//! log lines carry ids, method names, outcomes and sizes, never keys, params
//! or payloads. Metric labels are bounded (method names come from the
//! catalogue; anything else is `unknown`).

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;

use crate::config::{LogConfig, LogFormat};

pub mod names {
    pub const CONNECTIONS: &str = "switchboard_connections";
    pub const RPC_CALLS: &str = "switchboard_rpc_calls_total";
    pub const RPC_DURATION: &str = "switchboard_rpc_call_duration_seconds";
    pub const RPC_PANICS: &str = "switchboard_rpc_handler_panics_total";
    pub const SERVER_CALLS: &str = "switchboard_server_calls_total";
    pub const SERVER_CALL_DURATION: &str = "switchboard_server_call_duration_seconds";
    /// The hub's live calls to apps by `app` (its id: bounded by the
    /// installed apps), `method` and `outcome`; probes are not counted.
    pub const HOOK_CALLS: &str = "switchboard_hook_calls_total";
    /// Their latency by `app` and `method`.
    pub const HOOK_CALL_DURATION: &str = "switchboard_hook_call_duration_seconds";
    pub const UNMATCHED_RESPONSES: &str = "switchboard_unmatched_responses_total";
    pub const FRAMES_REJECTED: &str = "switchboard_frames_rejected_total";
    pub const DISCONNECTS: &str = "switchboard_disconnects_total";
    pub const HTTP_REQUESTS: &str = "switchboard_http_requests_total";
    /// HTTP connections closed by the hub, by `reason` (`idle_timeout`,
    /// `max_connections`, `max_connections_per_address`).
    pub const CONNECTIONS_CLOSED: &str = "switchboard_http_connections_closed_total";
    pub const ACCEPT_ERRORS: &str = "switchboard_accept_errors_total";
    pub const EVENTS_DELIVERED: &str = "switchboard_events_delivered_total";
    /// Live sockets offered an event out of order, so they read the log.
    pub const EVENT_GAPS: &str = "switchboard_event_gaps_total";
    pub const EPHEMERAL_DROPPED: &str = "switchboard_ephemeral_events_dropped_total";
    pub const EVENTS_WRITTEN: &str = "switchboard_events_written_total";
    pub const JOBS: &str = "switchboard_jobs_total";
    /// Command invocations handed on by `app_command_dispatch`, by
    /// `outcome` (`gateway`, `url_unverified`, `inactive`, `missing`).
    pub const COMMAND_DISPATCHES: &str = "switchboard_command_dispatches_total";
    /// Autocomplete requests by `outcome` (`answered`, `deferred_answered`,
    /// `invalid`, `timeout`, `unavailable`, `error`).
    pub const AUTOCOMPLETES: &str = "switchboard_command_autocompletes_total";
    pub const GATE_VERDICTS: &str = "switchboard_gate_verdicts_total";
    pub const EGRESS_REQUESTS: &str = "switchboard_egress_requests_total";
    pub const EGRESS_DURATION: &str = "switchboard_egress_request_duration_seconds";
    pub const EGRESS_BLOCKED: &str = "switchboard_egress_blocked_total";
    pub const RECIPIENTS_DROPPED: &str = "switchboard_forward_recipients_dropped_total";
    /// Authorization denials by `action`, `reason` and `mode` (ADR 0020 §4).
    pub const AUTHZ_DENIALS: &str = "switchboard_authz_denials_total";
    pub const AUDIT_RECORDS_FLUSHED: &str = "switchboard_audit_records_flushed_total";
    pub const AUDIT_DENIALS_DROPPED: &str = "switchboard_audit_denials_dropped_total";
    /// Installation lifecycle actions by `action` (ADR 0023 §11).
    pub const APP_LIFECYCLE: &str = "switchboard_app_lifecycle_total";
    /// Console logins by `outcome` (`accepted`, `refused`, `rate_limited`).
    pub const CONSOLE_LOGINS: &str = "switchboard_console_logins_total";
    /// Requests to apps' `interactionsUrl` by `app` (its id), `kind`
    /// (`command`, `interaction`, `autocomplete`, `verification`),
    /// `outcome` and `reason` (ADR 0032 §6).
    pub const INTERACTION_DELIVERIES: &str = "switchboard_interaction_deliveries_total";
    /// Webhook subscription attempts by `app` and `outcome` (ADR 0033).
    pub const WEBHOOK_ATTEMPTS: &str = "switchboard_webhook_attempts_total";
    /// Their duration by `outcome`.
    pub const WEBHOOK_ATTEMPT_DURATION: &str = "switchboard_webhook_attempt_duration_seconds";
    /// Subscriptions disabled, by `reason`.
    pub const WEBHOOK_DISABLED: &str = "switchboard_webhook_subscriptions_disabled_total";
    /// Messages this node sent to or took from NATS, by `direction`
    /// (`published`, `received`) and `kind` (`wake`, `ephemeral`,
    /// `control`, `hook`) (ADR 0034).
    pub const CLUSTER_MESSAGES: &str = "switchboard_cluster_messages_total";
    /// What went wrong on the node's link to NATS, by `kind` (`dropped`:
    /// the outbox was full; `publish`, `subscribe`, `decode`, `disconnected`,
    /// `server`, `client`, `slow_consumer`).
    pub const CLUSTER_ERRORS: &str = "switchboard_cluster_errors_total";
    /// 1 while the node is connected to NATS, 0 otherwise (`nats` mode).
    pub const CLUSTER_CONNECTED: &str = "switchboard_cluster_connected";
    /// Live sockets the periodic log check found behind their log: each is
    /// a wake-up that was lost or is late (ADR 0034 §3).
    pub const CLUSTER_POLL_CATCHUPS: &str = "switchboard_cluster_poll_catchups_total";
    /// Hook calls this node relayed to the node holding the app's socket
    /// (ADR 0035), by `outcome`: the six hook outcomes, `no_responders`
    /// (the node is gone), `no_reply` (no answer within the deadline),
    /// `nats_error` and `gone` (the socket closed since the presence read).
    pub const CLUSTER_HOOK_RELAYS: &str = "switchboard_cluster_hook_relays_total";
    /// Relayed hook calls this node dropped unanswered by the app because
    /// they arrived after the caller's deadline (ADR 0035, review fixes).
    pub const CLUSTER_LATE_HOOK_CALLS: &str = "switchboard_cluster_late_hook_calls_total";
}

pub fn init_logging(config: &LogConfig) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(config.level.clone()));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = match config.format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
    // A second init (tests, embedded use) keeps the first subscriber.
    let _ = result;
}

static PROMETHEUS: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the process-wide metrics recorder once and returns its handle.
pub fn metrics_handle() -> PrometheusHandle {
    PROMETHEUS
        .get_or_init(|| {
            let buckets = [
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                10.0, 30.0,
            ];
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &buckets)
                .expect("valid buckets")
                .build_recorder();
            let handle = recorder.handle();
            // Fails only if another recorder is installed; then ours renders empty.
            let _ = metrics::set_global_recorder(recorder);
            describe();
            handle
        })
        .clone()
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_gauge!(names::CONNECTIONS, "Open WebSocket connections by kind");
    describe_counter!(names::RPC_CALLS, "Peer-to-hub calls by method and outcome");
    describe_counter!(
        names::CONSOLE_LOGINS,
        "Console logins by outcome (accepted, refused, rate_limited)"
    );
    describe_histogram!(names::RPC_DURATION, "Peer-to-hub call latency by method");
    describe_counter!(
        names::SERVER_CALLS,
        "Hub-to-peer calls by method and outcome"
    );
    describe_histogram!(
        names::SERVER_CALL_DURATION,
        "Hub-to-peer call latency by method"
    );
    describe_counter!(
        names::HOOK_CALLS,
        "Hub-to-app live calls (gates, autocomplete) by app, method and outcome"
    );
    describe_histogram!(
        names::HOOK_CALL_DURATION,
        "Hub-to-app live call latency by app and method"
    );
    describe_counter!(
        names::UNMATCHED_RESPONSES,
        "Responses that matched no pending hub call (late or unknown id)"
    );
    describe_counter!(names::FRAMES_REJECTED, "Inbound frames refused, by reason");
    describe_counter!(
        names::RPC_PANICS,
        "RPC handlers that panicked (answered -32603), by method"
    );
    describe_counter!(
        names::DISCONNECTS,
        "Connections closed by the hub, by reason"
    );
    describe_counter!(names::HTTP_REQUESTS, "REST requests by route and status");
    describe_counter!(
        names::EVENTS_DELIVERED,
        "Events sent on sockets, by path (live or replay)"
    );
    describe_counter!(
        names::EVENT_GAPS,
        "Live sockets that were offered an event out of order and went back to reading the log"
    );
    describe_counter!(
        names::EPHEMERAL_DROPPED,
        "Ephemeral events dropped for sockets with a nearly full queue"
    );
    describe_counter!(
        names::EVENTS_WRITTEN,
        "Events written to the log, by type (the event method, from the catalogue)"
    );
    describe_counter!(names::JOBS, "Jobs run by kind and outcome");
    describe_counter!(names::GATE_VERDICTS, "Gate verdicts by gate and verdict");
    describe_counter!(
        names::RECIPIENTS_DROPPED,
        "Forward recipients dropped because they were not participants"
    );
    describe_counter!(
        names::AUDIT_RECORDS_FLUSHED,
        "Aggregated denial records written to the audit"
    );
    describe_counter!(
        names::AUDIT_DENIALS_DROPPED,
        "Denials not audited because audit.max_open_records were open"
    );
    describe_counter!(
        names::INTERACTION_DELIVERIES,
        "Requests to apps' interactionsUrl by app, kind, outcome and reason"
    );
    describe_counter!(
        names::WEBHOOK_ATTEMPTS,
        "Webhook subscription delivery attempts by app and outcome"
    );
    describe_histogram!(
        names::WEBHOOK_ATTEMPT_DURATION,
        "Webhook subscription delivery attempt latency by outcome"
    );
    describe_counter!(
        names::WEBHOOK_DISABLED,
        "Webhook subscriptions disabled, by reason"
    );
    describe_counter!(
        names::CLUSTER_MESSAGES,
        "Messages sent to or taken from NATS, by direction and kind"
    );
    describe_counter!(
        names::CLUSTER_ERRORS,
        "Failures of the node's link to NATS, by kind"
    );
    describe_gauge!(
        names::CLUSTER_CONNECTED,
        "1 while the node is connected to NATS"
    );
    describe_counter!(
        names::CLUSTER_POLL_CATCHUPS,
        "Live sockets the periodic log check found behind their log"
    );
    describe_counter!(
        names::CLUSTER_HOOK_RELAYS,
        "Hook calls relayed to the node holding the app's socket, by outcome"
    );
    describe_counter!(
        names::CLUSTER_LATE_HOOK_CALLS,
        "Relayed hook calls dropped because they arrived after their deadline"
    );
}

/// A budget for one kind of warning that a peer can cause: at most
/// `per_minute` lines a minute, the rest counted and reported with the next
/// line that is let through. No client can flood the log this way.
pub struct LogBudget {
    per_minute: u64,
    state: std::sync::Mutex<Option<BudgetWindow>>,
}

struct BudgetWindow {
    started: std::time::Instant,
    logged: u64,
    suppressed: u64,
}

impl LogBudget {
    pub const fn new(per_minute: u64) -> LogBudget {
        LogBudget {
            per_minute,
            state: std::sync::Mutex::new(None),
        }
    }

    /// `Some(suppressed since the last line)` when this one may be logged.
    pub fn admit(&self) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = std::time::Instant::now();
        let w = state.get_or_insert(BudgetWindow {
            started: now,
            logged: 0,
            suppressed: 0,
        });
        if now.duration_since(w.started) >= std::time::Duration::from_secs(60) {
            w.started = now;
            w.logged = 0;
        }
        if w.logged >= self.per_minute {
            w.suppressed += 1;
            return None;
        }
        w.logged += 1;
        Some(std::mem::take(&mut w.suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::LogBudget;

    #[test]
    fn a_log_budget_lets_a_few_through_and_counts_the_rest() {
        let budget = LogBudget::new(2);
        assert_eq!(budget.admit(), Some(0));
        assert_eq!(budget.admit(), Some(0));
        assert_eq!(budget.admit(), None);
        assert_eq!(budget.admit(), None);
    }
}
