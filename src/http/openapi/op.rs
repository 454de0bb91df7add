//! One operation of the document, built in the words of the REST rules
//! (docs/protocol.md, "REST"): who may call it, what it takes, what it
//! answers. The rules every route of a kind follows are added by the step
//! that names the kind (`admin`, `key`, `json_body`, `query`), so a route's
//! declaration lists only what is its own.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::error_schema;

/// One operation, finished into the document by [`Op::finish`].
pub struct Op {
    method: &'static str,
    path: &'static str,
    operation: Map<String, Value>,
    security: Vec<Value>,
    parameters: Vec<Value>,
    answers: BTreeMap<u16, Answer>,
}

/// One status of an operation: the reasons it is answered, what it carries.
#[derive(Default)]
struct Answer {
    reasons: Vec<String>,
    content: Map<String, Value>,
    headers: Map<String, Value>,
}

impl Op {
    fn new(method: &'static str, path: &'static str, id: &str, summary: &str) -> Op {
        let tag = path
            .trim_start_matches("/api/v1/")
            .trim_start_matches('/')
            .split('/')
            .next()
            .unwrap_or("ops");
        let mut operation = Map::new();
        operation.insert("operationId".into(), json!(id));
        operation.insert("summary".into(), json!(summary));
        operation.insert("tags".into(), json!([tag]));
        Op {
            method,
            path,
            operation,
            security: Vec::new(),
            parameters: Vec::new(),
            answers: BTreeMap::new(),
        }
    }

    pub fn get(path: &'static str, id: &str, summary: &str) -> Op {
        Op::new("get", path, id, summary)
    }

    pub fn post(path: &'static str, id: &str, summary: &str) -> Op {
        Op::new("post", path, id, summary)
    }

    pub fn put(path: &'static str, id: &str, summary: &str) -> Op {
        Op::new("put", path, id, summary)
    }

    pub fn patch(path: &'static str, id: &str, summary: &str) -> Op {
        Op::new("patch", path, id, summary)
    }

    pub fn delete(path: &'static str, id: &str, summary: &str) -> Op {
        Op::new("delete", path, id, summary)
    }

    /// The operation's longer text (docs/protocol.md's table says more).
    pub fn describe(mut self, text: &str) -> Op {
        self.operation.insert("description".into(), json!(text));
        self
    }

    /// Callable with no credentials (a health check, the open registration).
    pub fn anonymous(mut self) -> Op {
        self.security.push(json!({}));
        self
    }

    /// The operator's `Bearer <admin.token>`.
    pub fn admin(mut self) -> Op {
        self.security.push(json!({"adminToken": []}));
        self.refusal(
            401,
            "unauthorized: the operator token is missing or wrong",
        )
        .refusal(
            404,
            "not_found: while admin.token is unset the operator routes answer like a missing route",
        )
        .credential_budget()
    }

    /// A principal's `Bearer <key>` (agent, app or person).
    pub fn key(mut self) -> Op {
        self.security.push(json!({"principalKey": []}));
        self.refusal(
            401,
            "unauthorized: the key is missing, malformed, revoked or unknown",
        )
        .credential_budget()
    }

    /// The registration mode: open (no credential), `secret` (the
    /// `X-Registration-Secret` header) or `closed`.
    pub fn registration(mut self) -> Op {
        self.security.push(json!({}));
        self.security.push(json!({"registrationSecret": []}));
        self.refusal(
            401,
            "registration_secret_required: registration.mode = \"secret\" and the header is missing or wrong",
        )
        .refusal(403, "registration_closed: registration.mode = \"closed\"")
        .credential_budget()
    }

    /// A refused key, token or secret spends the source address's budget
    /// (`gateway.failed_connects_per_address`), shared with WebSocket connects.
    fn credential_budget(self) -> Op {
        self.refusal(
            429,
            "rate_limited (with retryAfterMs): the source address spent its budget of refused credentials (gateway.failed_connects_per_address), or the principal its rate class (ratelimit.<class>, with class)",
        )
    }

    /// A path parameter naming a row by id. A value that is no UUID names
    /// nothing: it answers like an unknown id (404).
    pub fn path_id(mut self, name: &str, what: &str) -> Op {
        self.parameters.push(json!({
            "name": name,
            "in": "path",
            "required": true,
            "description": format!("The {what}'s id (a UUID; any other text answers like an unknown id)."),
            "schema": {"type": "string", "format": "uuid"},
        }));
        self
    }

    /// A path parameter naming a row by a text key (a card id); one that
    /// matches no row answers 404.
    pub fn path_key(mut self, name: &str, description: &str, schema: Value) -> Op {
        self.parameters.push(json!({
            "name": name,
            "in": "path",
            "required": true,
            "description": description,
            "schema": schema,
        }));
        self
    }

    /// An optional query parameter. A route that takes any refuses an
    /// unknown or repeated one, or a value of the wrong form, with 400
    /// `invalid_query` naming it.
    pub fn query(mut self, name: &str, schema: Value, description: &str) -> Op {
        self.parameters.push(json!({
            "name": name,
            "in": "query",
            "required": false,
            "description": description,
            "schema": schema,
        }));
        self.refusal(
            400,
            "invalid_query: a parameter unknown, repeated, of the wrong form or out of bounds (the pointer names it)",
        )
    }

    /// A JSON body (`schema`), `required` or not; the rules every JSON route
    /// follows come with it.
    pub fn json_body(mut self, schema: Value, required: bool) -> Op {
        self.operation.insert(
            "requestBody".into(),
            json!({
                "required": required,
                "content": {"application/json": {"schema": schema}},
            }),
        );
        self.refusal(
            400,
            "invalid_json, duplicate_key (the second occurrence's pointer) or invalid_request (a pointer per field at fault)",
        )
        .refusal(
            408,
            "request_timeout: the body did not arrive within server.body_read_timeout_ms",
        )
        .refusal(
            413,
            "payload_too_large: the body exceeds server.max_http_body_bytes",
        )
        .refusal(
            415,
            "unsupported_media_type: the body is not sent as application/json",
        )
    }

    /// A JSON answer.
    pub fn answer(mut self, status: u16, why: &str, schema: Value) -> Op {
        let answer = self.answers.entry(status).or_default();
        answer.reasons.push(why.to_string());
        answer
            .content
            .insert("application/json".into(), json!({"schema": schema}));
        self
    }

    /// A JSON answer that may carry a key: `Cache-Control: no-store` when
    /// it does (`always`: every such answer carries one; a replay under an
    /// Idempotency-Key withholds the key, and so the header).
    pub fn answer_with_key(self, status: u16, why: &str, schema: Value, always: bool) -> Op {
        let mut op = self.answer(status, why, schema);
        let answer = op.answers.get_mut(&status).expect("just added");
        answer.headers.insert(
            "Cache-Control".into(),
            json!({
                "description": "no-store on an answer that carries a key (shown once)",
                "required": always,
                "schema": {"type": "string", "const": "no-store"},
            }),
        );
        op
    }

    /// The create takes an `Idempotency-Key` (ADR 0008): a retry with the
    /// same key and body answers the first answer again, the key withheld.
    pub fn idempotency(mut self) -> Op {
        self.parameters.push(json!({
            "name": "Idempotency-Key",
            "in": "header",
            "required": false,
            "description": "1 to 255 printable ASCII characters, the client's own; its scope is the caller.",
            "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]+$"},
        }));
        self.refusal(
            400,
            "invalid_idempotency_key: not 1 to 255 printable ASCII characters",
        )
        .refusal(
            409,
            "idempotency_conflict: the Idempotency-Key was used with another body",
        )
    }

    /// A route that takes no query parameter refuses any (400 naming it).
    pub fn no_query(self) -> Op {
        self.refusal(
            400,
            "invalid_query: this route takes no query parameters (the pointer names the one given)",
        )
    }

    /// A plain-text answer (health checks, metrics).
    pub fn text(mut self, status: u16, why: &str) -> Op {
        let answer = self.answers.entry(status).or_default();
        answer.reasons.push(why.to_string());
        answer
            .content
            .insert("text/plain".into(), json!({"schema": {"type": "string"}}));
        self
    }

    /// An answer without a body (204, 101).
    pub fn empty(mut self, status: u16, why: &str) -> Op {
        self.answers
            .entry(status)
            .or_default()
            .reasons
            .push(why.to_string());
        self
    }

    /// An error answer, in the ApiError shape.
    pub fn refusal(mut self, status: u16, why: &str) -> Op {
        let answer = self.answers.entry(status).or_default();
        if !answer.reasons.iter().any(|r| r == why) {
            answer.reasons.push(why.to_string());
        }
        answer
            .content
            .insert("application/json".into(), json!({"schema": error_schema()}));
        if status == 401 {
            answer.headers.insert(
                "WWW-Authenticate".into(),
                json!({"required": true, "schema": {"type": "string", "const": "Bearer"}}),
            );
        }
        self
    }

    /// The path as the router spells it, the method, and the operation.
    pub fn finish(mut self) -> (String, &'static str, Value) {
        self = self.refusal(
            503,
            "too_many_connections: beyond server.max_connections or server.max_connections_per_address (best effort, then closed)",
        );
        if !self.security.is_empty() {
            self.operation
                .insert("security".into(), Value::Array(self.security));
        }
        if !self.parameters.is_empty() {
            self.operation
                .insert("parameters".into(), Value::Array(self.parameters));
        }
        let responses: Map<String, Value> = self
            .answers
            .into_iter()
            .map(|(status, a)| {
                let mut r = json!({"description": a.reasons.join("; ")});
                if !a.content.is_empty() {
                    r["content"] = Value::Object(a.content);
                }
                if !a.headers.is_empty() {
                    r["headers"] = Value::Object(a.headers);
                }
                (status.to_string(), r)
            })
            .collect();
        self.operation
            .insert("responses".into(), Value::Object(responses));
        (
            self.path.to_string(),
            self.method,
            Value::Object(self.operation),
        )
    }
}
