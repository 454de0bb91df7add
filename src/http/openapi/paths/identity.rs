//! Registration, keys, people and owned agents (`http::identity`,
//! `http::people`).

use serde_json::{json, Value};

use super::super::op::Op;
use super::super::schemas::{bounded_text, object, time, uuid, Components};

/// `{name, description?}`, as `domain::agent::validate_registration` reads it.
fn registration_body() -> Value {
    object(
        &[("name", bounded_text(1, 100))],
        &[("description", bounded_text(0, 2000))],
    )
}

pub fn ops(c: &mut Components) -> Vec<Op> {
    let register = c.named("RegistrationBody", registration_body());
    let agent = c.created_with_key(
        "AgentRegistered",
        ("agentId", "agentKey", "agent"),
        &[("ownerId", uuid())],
    );
    let summary = c.installation_summary();
    let url = super::apps::url_state(c);
    let app = c.created_with_key(
        "AppRegistered",
        ("appId", "appKey", "app"),
        &[("installation", summary), ("interactionsUrl", url)],
    );
    let manifest = c.of::<crate::domain::manifest::Manifest>();
    let person = c.created_with_key("PersonCreated", ("personId", "personKey", "person"), &[]);
    let rotated = c.rotated_key();
    let owned = owned_agents(c);
    vec![
        Op::post("/api/v1/agents/register", "registerAgent", "Register an agent")
            .describe("Without Authorization the registration mode applies; with a person's key the person owns the agent, in every mode (ADR 0020 §1).")
            .registration()
            .key()
            .idempotency()
            .json_body(register.clone(), true)
            .answer_with_key(201, "the agent and its key (shown once); with a person's key also ownerId", agent, false)
            .refusal(403, "forbidden: a Bearer key that is not a person's"),
        Op::post("/api/v1/apps/register", "registerApp", "Register an app with its manifest")
            .describe("installation is present when registration.install = \"auto\" (the default), absent when \"pending\".")
            .registration()
            .idempotency()
            .json_body(object(&[("manifest", manifest)], &[]), true)
            .answer_with_key(201, "the app and its key (shown once)", app, false)
            .refusal(400, "invalid_manifest: a pointer per problem, from /manifest"),
        Op::post("/api/v1/keys/rotate", "rotateKey", "Issue a new key for the caller and revoke its others")
            .describe("Sockets on the revoked keys are closed (4003).")
            .key()
            .answer_with_key(200, "the new key", rotated, true)
            .refusal(403, "forbidden: an app whose installation is not active (reason app_suspended or app_not_installed)"),
        Op::post("/api/v1/keys/revoke", "revokeKeys", "Revoke every key of the caller")
            .key()
            .empty(204, "every key of the caller revoked, its sockets closed (4003)")
            .refusal(403, "forbidden: an app whose installation is not active"),
        Op::post("/api/v1/people", "createPerson", "Create a person")
            .admin()
            .idempotency()
            .json_body(register, true)
            .answer_with_key(201, "the person and its key (shown once)", person, false),
        Op::post("/api/v1/people/{personId}/disable", "disablePerson", "Disable a person for good")
            .admin()
            .path_id("personId", "person")
            .empty(204, "every key revoked, sockets closed (4003), out of every fan-out")
            .refusal(404, "not_found: no such person"),
        Op::get("/api/v1/people/me/agents", "myAgents", "The agents the caller (a person) owns")
            .key()
            .answer_with_key(200, "the owned agents and their keys' ids (never a key)", owned, true)
            .refusal(403, "forbidden: not a person's key"),
        Op::put("/api/v1/agents/{agentId}/owner", "setOwner", "Set an agent's owner")
            .admin()
            .path_id("agentId", "agent")
            .json_body(object(&[("ownerId", uuid())], &[]), true)
            .answer(200, "the agent and its owner", object(&[("agentId", uuid()), ("ownerId", uuid())], &[]))
            .refusal(400, "invalid_request: /ownerId names no active person")
            .refusal(404, "not_found: no such agent"),
        Op::delete("/api/v1/agents/{agentId}/owner", "clearOwner", "Leave an agent without owner")
            .admin()
            .path_id("agentId", "agent")
            .empty(204, "the agent has no owner")
            .refusal(404, "not_found: no such agent"),
        Op::post("/api/v1/agents/{agentId}/keys/revoke", "revokeAgentKeys", "Revoke every key of an agent")
            .describe("By its owner's key (agent.keys.revoke: an agent that is not the person's answers like an unknown one) or the operator.")
            .admin()
            .key()
            .path_id("agentId", "agent")
            .empty(204, "every key of the agent revoked, its sockets closed (4003)")
            .refusal(403, "forbidden: an agent's or app's key (subject_kind_not_allowed)")
            .refusal(404, "not_found: no such agent, or not the caller's"),
    ]
}

fn owned_agents(c: &mut Components) -> Value {
    let key = object(
        &[("keyId", json!({"type": "string"})), ("createdAt", time())],
        &[("revokedAt", time())],
    );
    let agent = object(
        &[
            ("agentId", uuid()),
            ("name", json!({"type": "string"})),
            ("createdAt", time()),
            ("keys", json!({"type": "array", "items": key})),
        ],
        &[],
    );
    c.named(
        "OwnedAgents",
        object(&[("agents", json!({"type": "array", "items": agent}))], &[]),
    )
}
