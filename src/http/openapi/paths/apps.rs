//! An app's ping, installation and manifest (`http::admin::ping_app`,
//! `http::installations`).

use serde_json::{json, Value};

use super::super::op::Op;
use super::super::schemas::{object, one_of_names, reference, string, uuid, Components};
use crate::domain::installation::Scope;

fn scopes() -> Value {
    json!({"type": "array", "items": one_of_names(Scope::ALL.map(Scope::as_str))})
}

/// `app/network/ping`'s outcome as a gate hook sees it.
fn ping_outcome(c: &mut Components) -> Value {
    let error = c.of::<crate::rpc::RpcError>();
    let number = json!({"type": "number", "minimum": 0});
    let outcomes = [
        "ok",
        "remote_error",
        "timeout",
        "disconnected",
        "unavailable",
        "bad_result",
    ];
    c.named(
        "PingOutcome",
        object(
            &[("outcome", one_of_names(outcomes))],
            &[
                ("roundTripMs", number.clone()),
                ("elapsedMs", number),
                ("reason", string()),
                ("error", error),
            ],
        ),
    )
}

/// An install's answer: the installation, with the app's new key (shown
/// once) or, on a replay, `keyWithheld`.
fn installed(c: &mut Components, installation: Value) -> Value {
    c.named(
        "Installed",
        object(
            &[("installation", installation)],
            &[
                ("appKey", json!({"type": "string", "pattern": "^sbk_app_"})),
                ("keyWithheld", json!({"const": true})),
            ],
        ),
    )
}

/// Command names (ADR 0027 §2).
fn names() -> Value {
    json!({"type": "array", "items": {"type": "string"}})
}

/// An app's `interactionsUrl` state (ADR 0032 §2).
pub fn url_state(c: &mut Components) -> Value {
    c.named(
        "InteractionsUrlState",
        object(
            &[("state", one_of_names(["verified", "unverified"]))],
            &[
                ("reason", json!({"type": "string", "description": "Why the last check failed: nonce_mismatch, signature_not_checked, no_signing_key, timeout, transport, blocked, redirect, http_status, too_large."})),
                ("checkedAt", json!({"type": "string", "format": "date-time"})),
            ],
        ),
    )
}

/// A manifest upgrade's answer.
fn manifest_upgraded(c: &mut Components) -> Value {
    let url = url_state(c);
    c.named(
        "ManifestUpgraded",
        object(
            &[
                ("appId", uuid()),
                (
                    "changed",
                    json!({"type": "array", "items": {"type": "string", "pattern": "^/"}}),
                ),
                (
                    "scopes",
                    object(
                        &[
                            ("requested", scopes()),
                            ("granted", scopes()),
                            ("awaitingConsent", scopes()),
                        ],
                        &[],
                    ),
                ),
                (
                    "commands",
                    object(
                        &[
                            ("added", names()),
                            ("changed", names()),
                            ("removed", names()),
                        ],
                        &[],
                    ),
                ),
            ],
            &[("interactionsUrl", url)],
        ),
    )
}

pub fn ops(c: &mut Components) -> Vec<Op> {
    let hooks = crate::config::HooksConfig::default();
    let ping = ping_outcome(c);
    let installation = c.installation();
    let wrapped = c.named(
        "InstallationAnswer",
        object(&[("installation", installation.clone())], &[]),
    );
    let installed = installed(c, installation);
    let manifest = c.of::<crate::domain::manifest::Manifest>();
    let upgraded = manifest_upgraded(c);
    let not_found = "not_found: app not found, or installation not found (no live installation)";
    let conflict = "conflict (with state): the installation's state forbids it, or a lost race";
    let mut ops = vec![
        Op::post("/api/v1/apps/{appId}/ping", "pingApp", "Ping an app's callback socket")
            .admin()
            .path_id("appId", "app")
            .query(
                "timeoutMs",
                json!({"type": "integer", "minimum": hooks.min_timeout_ms, "maximum": hooks.max_timeout_ms, "default": 5000}),
                "The deadline, within hooks.min_timeout_ms and hooks.max_timeout_ms (given at their defaults).",
            )
            .answer(200, "the outcome, as a gate hook would see it", ping)
            .refusal(404, "not_found: no such app"),
    ];
    ops.extend(super::app_health::ops(c));
    ops.extend([
        Op::post("/api/v1/apps/{appId}/installation", "installApp", "Install an app without a live installation")
            .describe("appKey (Cache-Control: no-store) only when the app has no active key.")
            .admin()
            .path_id("appId", "app")
            .idempotency()
            .json_body(object(&[], &[("scopes", scopes())]), false)
            .answer_with_key(201, "the installation, active", installed, false)
            .refusal(404, "not_found: app not found")
            .refusal(409, conflict),
        Op::get("/api/v1/apps/{appId}/installation", "readInstallation", "Read an app's live installation")
            .admin()
            .key()
            .path_id("appId", "app")
            .answer(200, "the installation", reference("Installation"))
            .refusal(403, "forbidden: another kind of key (subject_kind_not_allowed)")
            .refusal(404, not_found),
        Op::delete("/api/v1/apps/{appId}/installation", "uninstallApp", "Uninstall an app")
            .describe("In one transaction: keys revoked, grants deleted, its tasks failed app_uninstalled, leases ended; then its sockets closed (4012).")
            .admin()
            .path_id("appId", "app")
            .empty(204, "uninstalled")
            .refusal(404, not_found)
            .refusal(409, conflict),
        Op::put("/api/v1/apps/{appId}/installation/scopes", "setInstallationScopes", "Replace an installation's granted scopes")
            .admin()
            .path_id("appId", "app")
            .json_body(object(&[("scopes", scopes())], &[]), true)
            .answer(200, "the installation", wrapped.clone())
            .refusal(404, not_found)
            .refusal(409, conflict),
        Op::post("/api/v1/apps/{appId}/installation/suspend", "suspendInstallation", "Suspend an installation")
            .admin()
            .path_id("appId", "app")
            .json_body(object(&[], &[]), false)
            .answer(200, "the installation, suspended (unchanged when it was)", wrapped.clone())
            .refusal(404, not_found)
            .refusal(409, conflict),
        Op::post("/api/v1/apps/{appId}/installation/resume", "resumeInstallation", "Resume an installation")
            .admin()
            .path_id("appId", "app")
            .json_body(object(&[], &[]), false)
            .answer(200, "the installation, active (unchanged when it was)", wrapped)
            .refusal(404, not_found)
            .refusal(409, conflict),
        Op::put("/api/v1/apps/{appId}/manifest", "upgradeManifest", "Replace an app's manifest")
            .describe("By the app's own key (spending write) or the operator; validated as at registration.")
            .admin()
            .key()
            .path_id("appId", "app")
            .json_body(manifest, true)
            .answer(200, "what changed, and the scopes it leaves", upgraded)
            .refusal(400, "invalid_manifest: a pointer per problem")
            .refusal(403, "forbidden: another kind of key, or the app's installation is not active")
            .refusal(404, "not_found: app not found (also any other app's id with an app's key)"),
    ]);
    let state = url_state(c);
    let no_app = "not_found: app not found (also any other app's id with an app's key)";
    let no_url = "no_interactions_url: the app's delivery.mode is gateway";
    ops.extend([
        Op::get("/api/v1/apps/{appId}/interactions-url", "readInteractionsUrl", "Read the state of an app's interactionsUrl")
            .describe("verified once the app echoed the hub's signed ping and refused a request with a bad signature (401); an upgrade that changes the URL resets it (ADR 0032).")
            .admin()
            .key()
            .path_id("appId", "app")
            .answer(200, "the state", state.clone())
            .refusal(403, "forbidden: another kind of key, or the app's installation is not active")
            .refusal(404, no_app)
            .refusal(409, no_url),
        Op::post("/api/v1/apps/{appId}/interactions-url/verify", "verifyInteractionsUrl", "Check an app's interactionsUrl again")
            .describe("Sends the signed ping (its nonce must be echoed) and a request with a bad signature (it must get 401), each within app.interaction_timeout_ms, and answers the state they leave.")
            .admin()
            .key()
            .path_id("appId", "app")
            .answer(200, "the state the check left", state)
            .refusal(403, "forbidden: another kind of key, or the app's installation is not active")
            .refusal(404, no_app)
            .refusal(409, no_url),
    ]);
    ops
}
