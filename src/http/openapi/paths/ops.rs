//! The operator's reads, events catch-up, cards, webhooks, the WebSocket
//! upgrade, health, metrics and this document (`http::audit`,
//! `http::events`, `http::cards`, `http::admin`, `http::ops`, `http::mod`).

use serde_json::{json, Value};

use super::super::op::Op;
use super::super::schemas::{object, one_of_names, string, time, uuid, Components};
use crate::domain::authz::{Action, Reason};
use crate::protocol::params::MAX_CURSOR;

fn records(record: Value) -> Value {
    object(
        &[("records", json!({"type": "array", "items": record}))],
        &[("nextAfter", uuid())],
    )
}

fn audit_limit() -> Value {
    let cfg = crate::config::AuditConfig::default();
    json!({"type": "integer", "minimum": 1, "maximum": cfg.page_max, "default": cfg.page_default})
}

fn events_page(c: &mut Components) -> Value {
    let envelope = c.of::<crate::protocol::events::Envelope<Value>>();
    let seq = json!({"type": "integer", "minimum": 0});
    c.named(
        "EventsPage",
        object(
            &[
                ("events", json!({"type": "array", "items": envelope})),
                ("nextAfter", seq.clone()),
                ("latestSeq", seq),
                ("hasMore", json!({"type": "boolean"})),
                ("syncEpoch", string()),
            ],
            &[],
        ),
    )
}

fn cards(c: &mut Components) -> (Value, Value, Value) {
    let card = c.of::<crate::domain::card::AppCard>();
    let body = object(
        &[("card", card)],
        &[
            (
                "files",
                json!({"type": "object", "additionalProperties": {"type": "string", "contentEncoding": "base64"}}),
            ),
            ("forceAuthor", json!({"type": "boolean"})),
        ],
    );
    let installed = object(
        &[
            ("id", string()),
            ("version", string()),
            ("author", string()),
        ],
        &[],
    );
    let listed = object(
        &[
            ("id", string()),
            ("version", string()),
            ("author", string()),
            ("primitives", json!({"type": "array", "items": string()})),
            (
                "integrity",
                json!({"type": "object", "additionalProperties": string()}),
            ),
            ("installedAt", time()),
        ],
        &[],
    );
    let list = object(&[("cards", json!({"type": "array", "items": listed}))], &[]);
    (body, installed, list)
}

/// A run as `http::runs::run_json` writes it, without and with its log.
fn run_schemas(c: &mut Components) -> (Value, Value) {
    let required = [
        ("runId", uuid()),
        ("cardId", string()),
        ("version", string()),
        ("appId", uuid()),
        (
            "state",
            one_of_names(["starting", "running", "exited", "failed"]),
        ),
        ("isolated", json!({"type": "boolean"})),
        ("createdAt", time()),
    ];
    let optional = [
        ("reason", string()),
        ("exitCode", json!({"type": "integer"})),
        ("endedAt", time()),
    ];
    let run = c.named("Run", object(&required, &optional));
    let mut with_log = required.to_vec();
    with_log.push(("log", string()));
    let shown = c.named("RunWithLog", object(&with_log, &optional));
    (run, shown)
}

fn webhook_keys() -> Value {
    let key = object(
        &[
            ("keyId", string()),
            ("publicKey", json!({"type": "string", "pattern": "^whpk_"})),
            ("state", one_of_names(["active", "secondary", "retired"])),
            ("validFrom", time()),
        ],
        &[("validUntil", time())],
    );
    object(&[("keys", json!({"type": "array", "items": key}))], &[])
}

/// `webhooks::egress::Outcome` (tagged by `outcome`) with the webhook's id.
fn webhook_test_outcome() -> Value {
    let id = ("webhookId", json!({"type": "string", "pattern": "^msg_"}));
    let status = (
        "status",
        json!({"type": "integer", "minimum": 100, "maximum": 599}),
    );
    let tag = |name: &str| ("outcome", json!({"const": name}));
    let reasons = crate::domain::egress_policy::BlockReason::ALL.map(|r| r.label());
    json!({"oneOf": [
        object(&[id.clone(), tag("ok"), status.clone()], &[]),
        object(&[id.clone(), tag("timeout")], &[]),
        object(&[id.clone(), tag("blocked"), ("reason", one_of_names(reasons))], &[]),
        object(&[id.clone(), tag("redirect"), status], &[]),
        object(&[id.clone(), tag("too_large")], &[]),
        object(&[id, tag("transport"), ("stage", one_of_names(["resolve", "connect", "request", "body"]))], &[]),
    ]})
}

pub fn ops(c: &mut Components) -> Vec<Op> {
    let events = crate::config::EventsConfig::default();
    let denial = c.denial_record();
    let action = c.action_record();
    let page = events_page(c);
    let (card_body, card_installed, card_list) = cards(c);
    let runs = run_schemas(c);
    let cursor = json!({"type": "integer", "minimum": 0, "maximum": MAX_CURSOR});
    vec![
        Op::get("/api/v1/audit", "listDenials", "The audit of denials, by record id")
            .admin()
            .query("after", uuid(), "The last record id of the previous page.")
            .query("limit", audit_limit(), "1 to audit.page_max (default audit.page_default; given at their defaults).")
            .query("actorId", uuid(), "Only this actor's denials.")
            .query("action", one_of_names(Action::ALL.map(Action::as_str)), "Only this action.")
            .query("reason", one_of_names(Reason::ALL.map(Reason::as_str)), "Only this reason.")
            .answer(200, "a page of records; nextAfter when the page is full", records(denial)),
        Op::get("/api/v1/audit/actions", "listOwnerActions", "The owner actions on apps, by record id")
            .admin()
            .query("after", uuid(), "The last record id of the previous page.")
            .query("limit", audit_limit(), "1 to audit.page_max (default audit.page_default; given at their defaults).")
            .query("appId", uuid(), "Only this app's records.")
            .answer(200, "a page of records; nextAfter when the page is full", records(action)),
        Op::get("/api/v1/events", "catchUpEvents", "A page of the caller's events after a seq")
            .key()
            .query("after", cursor.clone(), "The seq to read after (default: the acked seq).")
            .query("limit", json!({"type": "integer", "minimum": 1, "maximum": events.page_max, "default": events.page_default}), "1 to events.page_max (default events.page_default; given at their defaults).")
            .query("wait", json!({"type": "integer", "minimum": 0, "maximum": events.max_wait_seconds}), "Long-poll seconds while the page would be empty, up to events.max_wait_seconds (given at its default).")
            .query("syncEpoch", string(), "The log's epoch the cursor belongs to; another is 410.")
            .answer(200, "the page", page)
            .refusal(400, "invalid_cursor (after beyond the latest seq, or out of range), invalid_limit, invalid_query")
            .refusal(403, "forbidden: an app without events:subscribe, or whose installation is not active")
            .refusal(410, "resync_required (with syncEpoch, oldestSeq, latestSeq, ackedSeq): the events after the cursor were pruned, or the epoch changed"),
        Op::post("/api/v1/cards", "installCard", "Install an App Card with its files")
            .admin()
            .json_body(card_body, true)
            .answer(201, "the card installed", card_installed)
            .refusal(400, "the card's refusal code (missing_file, bad_signature, ...)")
            .refusal(409, "card_conflict: another author, or the same version with other contents"),
        Op::get("/api/v1/cards", "listCards", "The installed App Cards")
            .anonymous()
            .no_query()
            .answer(200, "the cards", card_list),
        Op::post("/api/v1/cards/{cardId}/runs", "startRun", "Start a hub-managed run of an installed App Card")
            .describe("Verifies the card and its kept files again, makes or reuses the card's app principal, and starts the entry as an isolated child under a per-run capability broker (ADR 0031).")
            .admin()
            .path_key("cardId", "The card's id.", json!({"type": "string"}))
            .json_body(object(&[], &[]), false)
            .answer(201, "the run, running", runs.0.clone())
            .refusal(404, "card_not_found: no card of this id is installed")
            .refusal(409, "the refusal's code: integrity_mismatch (or another card check's code), card_not_installed, package_missing, no_entry, app_not_installed, app_suspended, no_interpreter, network_isolation_unavailable or file_isolation_unavailable (with runId)")
            .refusal(503, "too_many_runs: hosted.max_live_runs runs are alive in this hub"),
        Op::get("/api/v1/runs", "listRuns", "The hosted runs, newest first")
            .admin()
            .query("cardId", string(), "Only this card's runs.")
            .query("limit", json!({"type": "integer", "minimum": 1, "maximum": crate::http::runs::RUNS_PAGE_MAX, "default": 100}), "1 to 500 (default 100).")
            .answer(200, "the runs", object(&[("runs", json!({"type": "array", "items": runs.0.clone()}))], &[])),
        Op::get("/api/v1/runs/{runId}", "getRun", "One hosted run, with its log")
            .admin()
            .path_id("runId", "run")
            .no_query()
            .answer(200, "the run and its capped log", runs.1)
            .refusal(404, "not_found: no such run"),
        Op::post("/api/v1/runs/{runId}/stop", "stopRun", "Stop a live hosted run")
            .admin()
            .path_id("runId", "run")
            .no_query()
            .answer(202, "the run is stopping (it ends failed, reason stopped)", object(&[("runId", uuid()), ("stopping", json!({"const": true}))], &[]))
            .refusal(404, "not_found: no such run")
            .refusal(409, "run_not_live (with state): the run has ended"),
        Op::get("/api/v1/webhooks/keys", "webhookKeys", "The public keys that sign the hub's webhooks")
            .anonymous()
            .no_query()
            .answer(200, "the keys", webhook_keys()),
        Op::post("/api/v1/webhooks/test", "testWebhook", "Send a signed webhook.test event to a URL")
            .admin()
            .json_body(object(&[("url", json!({"type": "string", "format": "uri", "description": "An https URL without user info, naming a host (not an IP literal); egress.allowlist and the addresses it resolves to decide the outcome (blocked)."}))], &[]), true)
            .answer(200, "what became of the send", webhook_test_outcome())
            .refusal(400, "invalid_url (pointer /url, with reason) or invalid_body naming the member")
            .refusal(409, "no_signing_key: before the first switchboard keys rotate"),
        Op::get("/api/v1/openapi.json", "openapi", "This document")
            .anonymous()
            .no_query()
            .answer(200, "the OpenAPI 3.1 document (rpc/openapi.json)", json!({"type": "object"})),
        Op::get("/ws", "websocket", "The JSON-RPC 2.0 WebSocket (rpc/openrpc.json)")
            .describe("An upgrade that carries an Origin not in gateway.allowed_origins is refused.")
            .anonymous()
            .empty(101, "switching to the WebSocket protocol")
            .refusal(400, "invalid_request: not a WebSocket upgrade (a header is missing or wrong)")
            .refusal(403, "origin_not_allowed: the Origin is not in gateway.allowed_origins")
            .refusal(426, "invalid_request: the connection cannot be upgraded")
            .refusal(503, "unavailable: the hub is shutting down"),
        Op::get("/healthz", "healthz", "Liveness")
            .anonymous()
            .text(200, "the process runs"),
        Op::get("/readyz", "readyz", "Readiness")
            .anonymous()
            .text(200, "the database answers and the hub is not draining; the body is `ready`, then `node: <cluster.node_id>` and `cluster: single` or `cluster: nats connected|disconnected`, one a line")
            .text(503, "shutting down, or the database does not answer"),
        Op::get("/metrics", "metrics", "Prometheus metrics")
            .anonymous()
            .text(200, "the Prometheus text format"),
    ]
}
