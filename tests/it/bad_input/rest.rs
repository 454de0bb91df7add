//! Every REST route's bodies, headers, queries and auth: each row is a
//! request and its exact status and JSON body. The rows that read the
//! store (a missing id's 404) make the table run on SQLite and on a
//! throwaway PostgreSQL.

use serde_json::{json, Value};

use super::{assert_no_failures, options, Health};
use crate::support::hub::{Options, ADMIN_TOKEN};
use crate::support::TestHub;

/// Who a row's request presents itself as.
#[derive(Clone, Copy)]
enum Auth {
    None,
    Operator,
    Agent,
    /// A Bearer that is no key at all.
    Garbage,
    /// This exact `Authorization` header.
    Header(&'static str),
}

struct Row {
    method: &'static str,
    /// `{Z}` is the nil UUID (no such resource).
    path: &'static str,
    auth: Auth,
    /// A JSON body (sent as application/json), or none.
    body: Option<String>,
    status: u16,
    answer: Value,
    /// Headers beyond the auth and the JSON body's Content-Type.
    headers: Vec<(&'static str, String)>,
}

impl Row {
    fn with(mut self, name: &'static str, value: impl Into<String>) -> Row {
        self.headers.push((name, value.into()));
        self
    }
}

const Z: &str = "00000000-0000-0000-0000-000000000000";

fn err(code: &str, message: &str) -> Value {
    json!({"error": {"code": code, "message": message}})
}

fn fields(code: &str, message: &str, pointer: &str, problem: &str) -> Value {
    json!({"error": {"code": code, "message": message,
        "details": [{"pointer": pointer, "message": problem}]}})
}

fn invalid_field(pointer: &str, problem: &str) -> Value {
    fields(
        "invalid_request",
        "the request has invalid fields",
        pointer,
        problem,
    )
}

fn query(name: &str, problem: &str) -> Value {
    fields(
        "invalid_query",
        &format!("query parameter {name} {problem}"),
        &format!("/{name}"),
        problem,
    )
}

fn row(
    method: &'static str,
    path: &'static str,
    auth: Auth,
    body: Option<&str>,
    status: u16,
    answer: Value,
) -> Row {
    Row {
        method,
        path,
        auth,
        body: body.map(str::to_string),
        status,
        answer,
        headers: Vec::new(),
    }
}

const NEED_BEARER: &str = "an Authorization: Bearer <key> header is required";
/// Two `Authorization` headers count as none, even when they agree.
const SEVERAL: &str = "send one Authorization header: this request has several";
const BAD_KEY: &str = "invalid or revoked key";
const NEED_OPERATOR: &str = "a valid operator token is required";

#[rustfmt::skip]
fn auth_rows() -> Vec<Row> {
    use Auth::*;
    let unauthorized = |m: &str| err("unauthorized", m);
    vec![
        row("POST", "/api/v1/keys/rotate", None, Option::None, 401, unauthorized(NEED_BEARER)),
        row("POST", "/api/v1/keys/rotate", Garbage, Option::None, 401, unauthorized(BAD_KEY)),
        row("POST", "/api/v1/keys/rotate", Operator, Option::None, 401, unauthorized(BAD_KEY)),
        row("POST", "/api/v1/keys/rotate", Header("Basic abc"), Option::None, 401, unauthorized(NEED_BEARER)),
        row("POST", "/api/v1/keys/rotate", Header("Bearer"), Option::None, 401, unauthorized(NEED_BEARER)),
        row("POST", "/api/v1/keys/revoke", None, Option::None, 401, unauthorized(NEED_BEARER)),
        row("POST", "/api/v1/apps/{Z}/ping", None, Option::None, 401, unauthorized(NEED_OPERATOR)),
        row("POST", "/api/v1/apps/{Z}/ping", Agent, Option::None, 401, unauthorized(NEED_OPERATOR)),
        row("POST", "/api/v1/people", None, Some(r#"{"name":"x"}"#), 401, unauthorized(NEED_OPERATOR)),
        row("POST", "/api/v1/people", Agent, Some(r#"{"name":"x"}"#), 401, unauthorized(NEED_OPERATOR)),
        row("GET", "/api/v1/people/me/agents", None, Option::None, 401, unauthorized(NEED_BEARER)),
        row("GET", "/api/v1/people/me/agents", Agent, Option::None, 403, err("forbidden", "only a person owns agents: use a person's key")),
        row("GET", "/api/v1/people/me/agents", Operator, Option::None, 401, unauthorized(BAD_KEY)),
        row("POST", "/api/v1/spaces", None, Some(r#"{"name":"s"}"#), 401, unauthorized(NEED_OPERATOR)),
        row("GET", "/api/v1/spaces/{Z}", Operator, Option::None, 401, unauthorized(BAD_KEY)),
        row("GET", "/api/v1/conversations/{Z}", Operator, Option::None, 401, unauthorized(BAD_KEY)),
        row("GET", "/api/v1/audit", None, Option::None, 401, unauthorized(NEED_OPERATOR)),
        row("GET", "/api/v1/audit", Agent, Option::None, 401, unauthorized(NEED_OPERATOR)),
        row("GET", "/api/v1/events", None, Option::None, 401, unauthorized(NEED_BEARER)),
        row("GET", "/api/v1/events", Garbage, Option::None, 401, unauthorized(BAD_KEY)),
        row("POST", "/api/v1/cards", None, Some(r#"{"card":{}}"#), 401, unauthorized(NEED_OPERATOR)),
        row("POST", "/api/v1/webhooks/test", None, Some(r#"{"url":"https://x.example"}"#), 401, unauthorized(NEED_OPERATOR)),
        row("POST", "/api/v1/agents/register", Garbage, Some(r#"{"name":"x"}"#), 401, unauthorized(BAD_KEY)),
        row("POST", "/api/v1/messages/{Z}/interactions", None, Some("{}"), 401, unauthorized(NEED_BEARER)),
        row("POST", "/api/v1/interactions/{Z}/response", Garbage, Some("{}"), 401, unauthorized(BAD_KEY)),
    ]
}

#[rustfmt::skip]
fn body_rows() -> Vec<Row> {
    use Auth::*;
    let register = "/api/v1/agents/register";
    let name_rule = "is required: 1 to 80 characters, not blank, no control characters";
    vec![
        row("POST", register, None, Some("{}"), 400, invalid_field("/name", "is required")),
        row("POST", register, None, Some(r#"{"name":5}"#), 400, invalid_field("/name", "must be a string")),
        row("POST", register, None, Some(r#"{"name":""}"#), 400, invalid_field("/name", "must be 1 to 100 characters long")),
        row("POST", register, None, Some(r#"{"name":"a\u0000b"}"#), 400, invalid_field("/name", "must not contain control characters")),
        row("POST", register, None, Some(r#"{"name":"x","zz":1}"#), 400, invalid_field("/zz", "unknown member")),
        row("POST", register, None, Some("[]"), 400, invalid_field("", "must be an object")),
        row("POST", register, None, Some("nope"), 400, err("invalid_json", "the body is not valid JSON: expected ident at line 1 column 2")),
        row("POST", "/api/v1/apps/register", None, Some("{}"), 400, fields("invalid_manifest", "the manifest is invalid", "/manifest", "is required")),
        row("POST", "/api/v1/apps/register", None, Some(r#"{"manifest":5}"#), 400, fields("invalid_manifest", "the manifest is invalid", "/manifest", "must be an object")),
        row("POST", "/api/v1/people", Operator, Some("{}"), 400, invalid_field("/name", "is required")),
        row("POST", "/api/v1/people", Operator, Some(r#"{"name":7}"#), 400, invalid_field("/name", "must be a string")),
        row("PUT", "/api/v1/agents/{Z}/owner", Operator, Some("{}"), 400, invalid_field("/ownerId", "is required: a person's id")),
        row("PUT", "/api/v1/agents/{Z}/owner", Operator, Some(r#"{"ownerId":"x"}"#), 400, invalid_field("/ownerId", "is required: a person's id")),
        row("POST", "/api/v1/spaces", Operator, Some("{}"), 400, invalid_field("/name", name_rule)),
        row("POST", "/api/v1/spaces", Operator, Some(r#"{"name":""}"#), 400, invalid_field("/name", name_rule)),
        row("PATCH", "/api/v1/channels/{Z}", Operator, Some("{}"), 400, invalid_field("/name", "name or state is required")),
        row("PATCH", "/api/v1/channels/{Z}", Operator, Some(r#"{"state":"bogus"}"#), 400, invalid_field("/state", "must be open, read_only or archived")),
        row("POST", "/api/v1/conversations/{Z}/messages", Agent, Some("{}"), 400, fields("invalid_request", "the request has invalid fields", "/parts", "is required")),
        row("POST", "/api/v1/messages/{Z}/interactions", Agent, Some("{}"), 400, fields("invalid_request", "the request has invalid fields", "/componentId", "is required")),
        row("POST", "/api/v1/messages/{Z}/interactions", Agent, Some(r#"{"messageId":"x"}"#), 400, invalid_field("/messageId", "is the path's: leave it out")),
        row("PATCH", "/api/v1/messages/{Z}/components/{Z}", Agent, Some(r#"{"state":"used"}"#), 400, fields("invalid_request", "the request has invalid fields", "/state", "unknown variant `used`, expected `active` or `disabled`")),
        row("POST", "/api/v1/grants", Operator, Some("{}"), 400, invalid_field("/subject", "is required: an object with one of principalId, groupId")),
        row("POST", "/api/v1/grants", Operator, Some(r#"{"subject":{"principalId":"00000000-0000-0000-0000-000000000000","groupId":"00000000-0000-0000-0000-000000000000"}}"#), 400, invalid_field("/subject", "names principalId and groupId: give exactly one of principalId, groupId")),
        row("POST", "/api/v1/grants", Operator, Some(r#"{"subject":{"principalId":"00000000-0000-0000-0000-000000000000"},"place":{"spaceId":"00000000-0000-0000-0000-000000000000"},"level":"x"}"#), 400, invalid_field("/level", "is required: read, write, trigger or admin")),
        row("POST", "/api/v1/groups", Operator, Some("{}"), 400, invalid_field("/name", name_rule)),
        row("POST", "/api/v1/webhooks/test", Operator, Some("{}"), 400, fields("invalid_body", "the body is invalid: url is required", "/url", "is required")),
        row("POST", "/api/v1/webhooks/test", Operator, Some(r#"{"url":5}"#), 400, fields("invalid_body", "the body is invalid: url: invalid type: integer `5`, expected a string", "/url", "invalid type: integer `5`, expected a string")),
        row("POST", "/api/v1/webhooks/test", Operator, Some("[]"), 400, fields("invalid_body", "the body is invalid: the body must be a JSON object", "", "must be an object")),
        row("POST", "/api/v1/commands/{Z}/invocations", Agent, Some("{}"), 400, fields("invalid_request", "the request has invalid fields", "/conversationId", "is required")),
        row("POST", "/api/v1/commands/{Z}/invocations", Agent, Some(r#"{"commandId":"00000000-0000-0000-0000-000000000000"}"#), 400, invalid_field("/commandId", "is the path's: leave it out")),
        row("POST", "/api/v1/commands/{Z}/invocations", Agent, Some(r#"{"conversationId":"00000000-0000-0000-0000-000000000000","clientInvocationId":""}"#), 400, fields("invalid_request", "the request has invalid fields", "/clientInvocationId", "must be 1 to 64 characters")),
        row("POST", "/api/v1/commands/{Z}/autocomplete", Agent, Some(r#"{"conversationId":"00000000-0000-0000-0000-000000000000","option":"o"}"#), 400, fields("invalid_request", "the request has invalid fields", "/value", "is required")),
        row("POST", "/api/v1/webhooks/test", Operator, Some(r#"{"url":"http://127.0.0.1:1/x"}"#), 400, json!({"error": {"code": "invalid_url", "message": "url cannot be sent to: not_https", "details": [{"pointer": "/url", "message": "is refused (not_https)"}], "reason": "not_https"}})),
    ]
}

/// Rows whose answer depends on what the store holds (nothing, here).
#[rustfmt::skip]
fn store_rows() -> Vec<Row> {
    use Auth::*;
    let not_found = |m: &str| err("not_found", m);
    vec![
        row("POST", "/api/v1/apps/{Z}/ping", Operator, Option::None, 404, not_found("no such app")),
        row("POST", "/api/v1/apps/not-a-uuid/ping", Operator, Option::None, 404, not_found("no such app")),
        row("DELETE", "/api/v1/agents/{Z}/owner", Operator, Option::None, 404, not_found("agent not found")),
        row("POST", "/api/v1/agents/{Z}/keys/revoke", Operator, Option::None, 404, not_found("agent not found")),
        row("POST", "/api/v1/people/{Z}/disable", Operator, Option::None, 404, not_found("person not found")),
        row("POST", "/api/v1/people/xyz/disable", Operator, Option::None, 404, not_found("person not found")),
        row("POST", "/api/v1/spaces/{Z}/channels", Operator, Some(r#"{"name":"c"}"#), 404, not_found("space not found")),
        row("GET", "/api/v1/conversations/{Z}", Agent, Option::None, 404, not_found("conversation not found")),
        row("GET", "/api/v1/conversations/{Z}/messages", Agent, Option::None, 404, not_found("conversation not found")),
        row("POST", "/api/v1/conversations/{Z}/messages", Agent, Some(r#"{"parts":[]}"#), 404, not_found("conversation not found")),
        row("POST", "/api/v1/grants", Operator, Some(r#"{"subject":{"principalId":"00000000-0000-0000-0000-000000000000"},"place":{"spaceId":"00000000-0000-0000-0000-000000000000"},"level":"read"}"#), 404, not_found("space not found")),
        row("DELETE", "/api/v1/grants/{Z}", Operator, Option::None, 404, not_found("grant not found")),
        row("POST", "/api/v1/messages/{Z}/interactions", Agent, Some(r#"{"componentId":"00000000-0000-0000-0000-000000000000"}"#), 404, not_found("message not found")),
        row("POST", "/api/v1/interactions/{Z}/response", Agent, Some(r#"{"state":"acknowledged"}"#), 403, json!({"error": {"code": "forbidden", "message": "interaction.respond refused: subject_kind_not_allowed", "reason": "subject_kind_not_allowed"}})),
        row("PUT", "/api/v1/groups/{Z}/members/{Z}", Operator, Option::None, 404, not_found("group or principal not found")),
        row("DELETE", "/api/v1/groups/{Z}/members/{Z}", Operator, Option::None, 404, not_found("group or principal not found")),
        row("GET", "/api/v1/conversations/{Z}/commands", Agent, Option::None, 404, not_found("conversation not found")),
        row("POST", "/api/v1/commands/{Z}/invocations", Agent, Some(r#"{"conversationId":"00000000-0000-0000-0000-000000000000"}"#), 404, not_found("command not found")),
        row("POST", "/api/v1/commands/not-a-uuid/invocations", Agent, Some(r#"{"conversationId":"00000000-0000-0000-0000-000000000000"}"#), 404, not_found("command not found")),
        row("POST", "/api/v1/commands/{Z}/autocomplete", Agent, Some(r#"{"conversationId":"00000000-0000-0000-0000-000000000000","option":"o","value":"v"}"#), 404, not_found("command not found")),
        row("GET", "/api/v1/apps/{Z}/commands", Agent, Option::None, 404, not_found("app not found")),
        row("DELETE", "/api/v1/apps/{Z}/commands/{Z}", Agent, Option::None, 404, not_found("app not found")),
    ]
}

#[rustfmt::skip]
fn query_rows() -> Vec<Row> {
    use Auth::*;
    let cursor = err(
        "invalid_cursor",
        "after must be an integer from 0 to 9223372036854775807",
    );
    let none_here = "is not known here (this route takes no query parameters)";
    vec![
        row("GET", "/api/v1/conversations/{Z}/messages?limit=abc", Agent, Option::None, 400, query("limit", "must be a non-negative integer")),
        row("GET", "/api/v1/audit?limit=-1", Operator, Option::None, 400, query("limit", "must be a non-negative integer")),
        row("GET", "/api/v1/audit?zz=1", Operator, Option::None, 400, query("zz", "is not known here (known: after, limit, actorId, action, reason)")),
        row("GET", "/api/v1/audit?actorId=nope", Operator, Option::None, 400, query("actorId", "must be a UUID")),
        row("GET", "/api/v1/audit?after=x", Operator, Option::None, 400, query("after", "must be a UUID")),
        row("GET", "/api/v1/grants", Operator, Option::None, 400, invalid_field("/spaceId", "give exactly one of spaceId, channelId")),
        row("GET", "/api/v1/grants?spaceId=x", Operator, Option::None, 400, query("spaceId", "must be a UUID")),
        row("GET", "/api/v1/events?after=-1", Agent, Option::None, 400, cursor.clone()),
        row("GET", "/api/v1/events?after=abc", Agent, Option::None, 400, cursor.clone()),
        row("GET", "/api/v1/events?after=99999999999999999999", Agent, Option::None, 400, cursor),
        row("GET", "/api/v1/events?after=1&after=2", Agent, Option::None, 400, query("after", "is given more than once")),
        row("GET", "/api/v1/events?wait=99999", Agent, Option::None, 400, err("invalid_query", "wait must be from 0 to 30 seconds (events.max_wait_seconds)")),
        row("GET", "/api/v1/events?wait=-1", Agent, Option::None, 400, err("invalid_query", "wait must be from 0 to 30 seconds (events.max_wait_seconds)")),
        row("GET", "/api/v1/events?limit=0", Agent, Option::None, 400, err("invalid_limit", "limit must be from 1 to 1000 (events.page_max)")),
        row("GET", "/api/v1/events?limit=1001", Agent, Option::None, 400, err("invalid_limit", "limit must be from 1 to 1000 (events.page_max)")),
        row("GET", "/api/v1/events?limit=-1", Agent, Option::None, 400, err("invalid_limit", "limit must be from 1 to 1000 (events.page_max)")),
        row("GET", "/api/v1/events?zz=1", Agent, Option::None, 400, err("invalid_query", "unknown query parameter \"zz\"")),
        row("GET", "/api/v1/cards?zz=1", None, Option::None, 400, query("zz", none_here)),
        row("GET", "/api/v1/webhooks/keys?zz=1", None, Option::None, 400, query("zz", none_here)),
        row("GET", "/nope", None, Option::None, 404, err("not_found", "no such route")),
        row("DELETE", "/api/v1/events", Agent, Option::None, 405, err("method_not_allowed", "DELETE is not allowed on this route; it allows GET, HEAD")),
        row("PUT", "/api/v1/agents/register", None, Some("{}"), 405, err("method_not_allowed", "PUT is not allowed on this route; it allows POST")),
    ]
}

#[rustfmt::skip]
fn header_rows() -> Vec<Row> {
    use Auth::*;
    let register = "/api/v1/agents/register";
    let idempotency = err(
        "invalid_idempotency_key",
        "Idempotency-Key must be 1 to 255 printable ASCII characters",
    );
    vec![
        row("POST", register, None, Some(r#"{"name":"x"}"#), 400, idempotency.clone()).with("idempotency-key", "k".repeat(256)),
        row("POST", register, None, Some(r#"{"name":"x"}"#), 400, idempotency).with("idempotency-key", "a b"),
        row("POST", "/api/v1/conversations/{Z}/messages", Agent, Some(r#"{"parts":[]}"#), 400, err("idempotency_key_not_taken", "Idempotency-Key is not taken by a send: give clientMsgId (a retry with the same one returns the original message)")).with("idempotency-key", "abc"),
        row("POST", "/api/v1/commands/{Z}/invocations", Agent, Some("{}"), 400, err("invalid_idempotency_key", "Idempotency-Key must be 1 to 255 printable ASCII characters")).with("idempotency-key", "a b"),
        row("POST", register, Agent, Some(r#"{"name":"x"}"#), 403, err("forbidden", "only a person's key registers agents it owns; register without Authorization")),
        row("POST", "/api/v1/keys/rotate", Agent, Option::None, 401, err("unauthorized", SEVERAL)).with("authorization", "Bearer sbk_agent_x_y"),
        row("GET", "/api/v1/audit", Operator, Option::None, 401, err("unauthorized", SEVERAL)).with("authorization", format!("Bearer {ADMIN_TOKEN}")),
        row("GET", "/ws", None, Option::None, 400, err("invalid_request", "Connection header did not include 'upgrade'")),
        row("GET", "/ws", None, Option::None, 400, err("invalid_request", "`Sec-WebSocket-Key` header missing")).with("upgrade", "websocket").with("connection", "upgrade"),
    ]
}

/// Rows in the test below, not in the tables: a body that is not labelled
/// JSON, and one over `server.max_http_body_bytes`.
const OTHER_ROWS: usize = 2;

fn rows() -> Vec<Row> {
    let mut rows = auth_rows();
    rows.extend(body_rows());
    rows.extend(store_rows());
    rows.extend(query_rows());
    rows.extend(header_rows());
    rows
}

pub fn row_count() -> usize {
    rows().len() + OTHER_ROWS
}

async fn answer_of(hub: &TestHub, row: &Row, agent_key: &str) -> (u16, Value) {
    let path = row.path.replace("{Z}", Z);
    let method = reqwest::Method::from_bytes(row.method.as_bytes()).expect("method");
    let mut request = hub.http.request(method, format!("{}{path}", hub.base));
    let bearer = |k: &str| format!("Bearer {k}");
    let header = match row.auth {
        Auth::None => Option::None,
        Auth::Operator => Some(bearer(ADMIN_TOKEN)),
        Auth::Agent => Some(bearer(agent_key)),
        Auth::Garbage => Some(bearer("not-a-key")),
        Auth::Header(h) => Some(h.to_string()),
    };
    if let Some(h) = header {
        request = request.header("authorization", h);
    }
    for (name, value) in &row.headers {
        request = request.header(*name, value);
    }
    if let Some(body) = &row.body {
        request = request
            .header("content-type", "application/json")
            .body(body.clone());
    }
    let r = request.send().await.expect("REST call");
    let status = r.status().as_u16();
    let text = r.text().await.expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

async fn run_table(options: Options) {
    let hub = TestHub::start_with(options).await;
    let (_, agent_key) = hub.register_agent("matrix-rest").await;
    let mut health = Health::new(&hub);
    let rows = rows();
    let mut failures = Vec::new();
    for row in &rows {
        let name = format!(
            "{} {} ({} body)",
            row.method,
            row.path,
            row.body.as_deref().unwrap_or("no")
        );
        let (status, answer) = answer_of(&hub, row, &agent_key).await;
        if (status, &answer) != (row.status, &row.answer) {
            failures.push(format!(
                "{name}: answered {status} {answer}, expected {} {}",
                row.status, row.answer
            ));
        }
        failures.extend(health.faults(&hub, &name).await);
    }

    // A JSON body not labelled as one, and one over the size limit.
    let url = format!("{}/api/v1/agents/register", hub.base);
    let r = hub
        .http
        .post(&url)
        .body(r#"{"name":"x"}"#)
        .send()
        .await
        .unwrap();
    let got = (r.status().as_u16(), r.json::<Value>().await.unwrap());
    let expected = (
        415,
        err(
            "unsupported_media_type",
            "this route takes a JSON body: send Content-Type: application/json",
        ),
    );
    if got != expected {
        failures.push(format!("an unlabelled body: {got:?}"));
    }
    let big = format!(r#"{{"name":"{}"}}"#, "a".repeat(2 * 1024 * 1024));
    let r = hub
        .http
        .post(&url)
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    let got = (r.status().as_u16(), r.json::<Value>().await.unwrap());
    let expected = (
        413,
        err(
            "payload_too_large",
            "the body exceeds server.max_http_body_bytes (1048576)",
        ),
    );
    if got != expected {
        failures.push(format!("a body over the limit: {got:?}"));
    }
    failures.extend(health.faults(&hub, "unlabelled and oversized bodies").await);
    assert_no_failures("rest", row_count(), &failures);
}

#[tokio::test]
async fn rest_bad_inputs_get_their_exact_answer_on_sqlite() {
    run_table(options()).await;
}

#[tokio::test]
async fn rest_bad_inputs_get_their_exact_answer_on_postgres() {
    let url = crate::support::pg::fresh_database().await;
    run_table(Options {
        database_url: Some(url),
        ..options()
    })
    .await;
}
