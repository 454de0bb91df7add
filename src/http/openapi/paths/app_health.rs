//! An app's hook health and check (`http::app_health`).

use serde_json::{json, Value};

use super::super::op::Op;
use super::super::schemas::{object, one_of_names, string, uuid, Components};
use crate::hooks::check::CheckOutcome;
use crate::hub::hook_health::OUTCOMES;

fn milliseconds() -> Value {
    json!({"type": ["number", "null"], "minimum": 0})
}

/// One method's figures over the window.
fn method_health(c: &mut Components) -> Value {
    let outcomes: serde_json::Map<String, Value> = OUTCOMES
        .iter()
        .map(|o| (o.to_string(), json!({"type": "integer", "minimum": 1})))
        .collect();
    c.named(
        "MethodHealth",
        object(
            &[
                ("method", string()),
                ("count", json!({"type": "integer", "minimum": 0})),
                (
                    "outcomes",
                    json!({"type": "object", "properties": outcomes, "additionalProperties": false}),
                ),
                ("p50Ms", milliseconds()),
                ("p99Ms", milliseconds()),
            ],
            &[
                (
                    "gate",
                    one_of_names(["task_create", "message_authorize", "dispatch_authorize"]),
                ),
                ("policy", string()),
                ("timeoutMs", json!({"type": "integer", "minimum": 1})),
            ],
        ),
    )
}

fn app_health(c: &mut Components) -> Value {
    let method = method_health(c);
    c.named(
        "AppHealth",
        object(
            &[
                ("appId", uuid()),
                ("windowSeconds", json!({"type": "integer", "minimum": 1})),
                ("methods", json!({"type": "array", "items": method})),
            ],
            &[],
        ),
    )
}

fn gate_check(c: &mut Components) -> Value {
    let error = c.of::<crate::rpc::RpcError>();
    c.named(
        "GateCheck",
        object(
            &[
                (
                    "gate",
                    one_of_names(["task_create", "message_authorize", "dispatch_authorize"]),
                ),
                ("method", string()),
                ("timeoutMs", json!({"type": "integer", "minimum": 1})),
                (
                    "outcome",
                    one_of_names(CheckOutcome::ALL.map(CheckOutcome::as_str)),
                ),
            ],
            &[
                ("latencyMs", json!({"type": "number", "minimum": 0})),
                ("decodes", json!({"type": "boolean"})),
                (
                    "decodeError",
                    object(&[("pointer", string()), ("message", string())], &[]),
                ),
                ("error", error),
                ("reason", string()),
            ],
        ),
    )
}

fn app_check(c: &mut Components) -> Value {
    let gate = gate_check(c);
    c.named(
        "AppCheck",
        object(
            &[
                ("appId", uuid()),
                ("ok", json!({"type": "boolean"})),
                ("gates", json!({"type": "array", "items": gate})),
            ],
            &[],
        ),
    )
}

pub fn ops(c: &mut Components) -> Vec<Op> {
    let health = app_health(c);
    let check = app_check(c);
    let not_found = "not_found: app not found (also any other app's id with an app's key)";
    let forbidden = "forbidden: another kind of key, or the app's installation is not active";
    vec![
        Op::get("/api/v1/apps/{appId}/health", "readAppHealth", "Read an app's hook health")
            .describe("Per method, the hub's calls of the last hooks.health_window_secs (in memory only): count, outcomes, p50 and p99 latency. The three gates are always listed with their policy; other methods once called.")
            .admin()
            .key()
            .path_id("appId", "app")
            .answer(200, "the figures", health)
            .refusal(403, forbidden)
            .refusal(404, not_found),
        Op::post("/api/v1/apps/{appId}/check", "checkApp", "Check an app's hook gates")
            .describe("One synthetic call (params with check: true, a task, conversation, message and lease that exist nowhere) per hook gate of the manifest, waiting timeoutMs plus hooks.check_grace_ms. Nothing is stored and no agent hears of it. ok is true only when every gate answered well within its timeoutMs.")
            .admin()
            .key()
            .path_id("appId", "app")
            .json_body(object(&[], &[]), false)
            .answer(200, "each gate's result", check)
            .refusal(403, forbidden)
            .refusal(404, not_found),
    ]
}
