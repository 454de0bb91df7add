//! An app's webhook subscriptions and their delivery log
//! (`http::webhook_subscriptions`, ADR 0033).

use serde_json::{json, Value};

use super::super::op::Op;
use super::super::schemas::{object, one_of_names, string, time, uuid, Components};
use crate::domain::webhook::Outcome;

const FORBIDDEN: &str = "forbidden (with reason): a person's or agent's key (subject_kind_not_allowed), scope_missing (events:subscribe), or the installation is not active";
const HIDDEN: &str = "not_found: no such subscription, or another app's (answered exactly alike)";

fn subscription(c: &mut Components) -> Value {
    c.named(
        "WebhookSubscription",
        object(
            &[
                ("id", uuid()),
                ("url", json!({"type": "string", "format": "uri"})),
                ("eventTypes", json!({"type": "array", "items": string(), "minItems": 1})),
                ("source", one_of_names(["api", "manifest"])),
                ("hmac", json!({"type": "boolean", "description": "Requests carry a v1 (HMAC) signature besides v1a."})),
                ("state", one_of_names(["active", "disabled"])),
                ("cursor", json!({"type": "integer", "minimum": 0, "description": "The last seq of the app's log this subscription is done with."})),
                ("attempts", json!({"type": "integer", "minimum": 0, "description": "Failed attempts at the event after the cursor."})),
                ("nextAttemptAt", time()),
                ("createdAt", time()),
            ],
            &[
                ("disabledReason", one_of_names(["gone", "failing", "operator"])),
                ("failingSince", time()),
            ],
        ),
    )
}

fn attempt(c: &mut Components) -> Value {
    c.named(
        "WebhookAttempt",
        object(
            &[
                ("seq", json!({"type": "integer", "minimum": 0})),
                ("attempt", json!({"type": "integer", "minimum": 1})),
                ("at", time()),
                ("durationMs", json!({"type": "integer", "minimum": 0})),
                ("outcome", one_of_names(Outcome::ALL.map(Outcome::as_str))),
            ],
            &[
                ("eventId", uuid()),
                (
                    "status",
                    json!({"type": "integer", "minimum": 100, "maximum": 599}),
                ),
                ("nextAttemptAt", time()),
            ],
        ),
    )
}

pub fn ops(c: &mut Components) -> Vec<Op> {
    let sub = subscription(c);
    let log = attempt(c);
    let body = object(
        &[
            (
                "url",
                json!({"type": "string", "format": "uri", "minLength": 1, "maxLength": 2048, "description": "https, no user info, a host name (not an IP literal) whose host and port are on egress.allowlist."}),
            ),
            (
                "eventTypes",
                json!({"type": "array", "items": string(), "minItems": 1, "uniqueItems": true, "description": "Event types the app audience receives (the catalogue's hub-to-app notifications)."}),
            ),
        ],
        &[(
            "hmac",
            json!({"type": "boolean", "default": false, "description": "Also sign with a v1 HMAC secret, answered once."}),
        )],
    );
    vec![
        Op::post("/api/v1/webhooks/subscriptions", "createWebhookSubscription", "Subscribe event types of the app's log to an https URL")
            .describe("Delivered at least once, in seq order, with webhook-id = the event id, signed v1a (and v1 with hmac). The subscription takes the events written after it; earlier ones are in the catch-up.")
            .key()
            .no_query()
            .json_body(body, true)
            .idempotency()
            .answer(201, "the subscription, and with hmac its whsec_ secret (shown this once; a replay under the same Idempotency-Key has secretWithheld instead)", object(&[("subscription", sub.clone())], &[("secret", json!({"type": "string", "pattern": "^whsec_"})), ("secretWithheld", json!({"type": "boolean", "const": true}))]))
            .refusal(400, "invalid_request: pointers under /url, /eventTypes, /hmac")
            .refusal(403, FORBIDDEN)
            .refusal(409, "subscription_limit (webhooks.max_subscriptions_per_app), no_signing_key (before the first switchboard keys rotate), or hmac_unavailable (no webhooks.key_encryption_key)"),
        Op::get("/api/v1/webhooks/subscriptions", "listWebhookSubscriptions", "The app's webhook subscriptions")
            .key()
            .no_query()
            .answer(200, "its subscriptions, oldest first", object(&[("subscriptions", json!({"type": "array", "items": sub.clone()}))], &[]))
            .refusal(403, FORBIDDEN),
        Op::get("/api/v1/webhooks/subscriptions/{subscriptionId}", "getWebhookSubscription", "One of the app's webhook subscriptions")
            .key()
            .path_id("subscriptionId", "subscription")
            .no_query()
            .answer(200, "the subscription", object(&[("subscription", sub)], &[]))
            .refusal(403, FORBIDDEN)
            .refusal(404, HIDDEN),
        Op::delete("/api/v1/webhooks/subscriptions/{subscriptionId}", "deleteWebhookSubscription", "Delete one of the app's webhook subscriptions")
            .key()
            .path_id("subscriptionId", "subscription")
            .no_query()
            .empty(204, "deleted, with its delivery log")
            .refusal(403, FORBIDDEN)
            .refusal(404, HIDDEN)
            .refusal(409, "manifest_subscription: it follows the app's manifest"),
        Op::get("/api/v1/webhooks/subscriptions/{subscriptionId}/attempts", "listWebhookAttempts", "A subscription's delivery log, newest first")
            .describe("One entry per attempt: outcome, HTTP status, duration, and when the next attempt is due after a failure. Never a body or a header. Kept webhooks.delivery_log_retention_hours.")
            .key()
            .path_id("subscriptionId", "subscription")
            .query("limit", json!({"type": "integer", "minimum": 1, "maximum": 500, "default": 50}), "1 to 500 (default 50).")
            .answer(200, "the attempts", object(&[("attempts", json!({"type": "array", "items": log}))], &[]))
            .refusal(400, "invalid_limit or invalid_query")
            .refusal(403, FORBIDDEN)
            .refusal(404, HIDDEN),
    ]
}
