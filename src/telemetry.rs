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
    pub const SERVER_CALLS: &str = "switchboard_server_calls_total";
    pub const SERVER_CALL_DURATION: &str = "switchboard_server_call_duration_seconds";
    pub const UNMATCHED_RESPONSES: &str = "switchboard_unmatched_responses_total";
    pub const FRAMES_REJECTED: &str = "switchboard_frames_rejected_total";
    pub const DISCONNECTS: &str = "switchboard_disconnects_total";
    pub const HTTP_REQUESTS: &str = "switchboard_http_requests_total";
    pub const EVENTS_DELIVERED: &str = "switchboard_events_delivered_total";
    pub const EPHEMERAL_DROPPED: &str = "switchboard_ephemeral_events_dropped_total";
    pub const EVENTS_WRITTEN: &str = "switchboard_events_written_total";
    pub const JOBS: &str = "switchboard_jobs_total";
    pub const GATE_VERDICTS: &str = "switchboard_gate_verdicts_total";
    pub const EGRESS_REQUESTS: &str = "switchboard_egress_requests_total";
    pub const EGRESS_DURATION: &str = "switchboard_egress_request_duration_seconds";
    pub const EGRESS_BLOCKED: &str = "switchboard_egress_blocked_total";
    pub const RECIPIENTS_DROPPED: &str = "switchboard_forward_recipients_dropped_total";
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
        names::UNMATCHED_RESPONSES,
        "Responses that matched no pending hub call (late or unknown id)"
    );
    describe_counter!(names::FRAMES_REJECTED, "Inbound frames refused, by reason");
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
}
