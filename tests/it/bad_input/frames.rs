//! WebSocket frames: each row is what a client writes on a connected
//! agent's socket and the frame the hub answers (or that it answers
//! nothing, or closes with a code). Rows that should leave the socket open
//! are followed by a good call whose answer must be the very next frame.

use serde_json::{json, Value};

use super::{assert_no_failures, options, Health};
use crate::support::{HandMadeSocket, RawEvent, RawSocket, TestHub};

/// What a row sends.
enum Input {
    Text(String),
    Binary(Vec<u8>),
}

/// What the hub answers.
enum Answer {
    /// This exact frame, then the socket still serves.
    Frame(Value),
    /// No frame at all (an answer to a call never made, a notification);
    /// `unmatched` is how much `switchboard_unmatched_responses_total`
    /// grows. Then the socket still serves.
    Nothing { unmatched: f64 },
}

struct Row {
    name: &'static str,
    input: Input,
    answer: Answer,
}

fn text(name: &'static str, frame: impl Into<String>, answer: Answer) -> Row {
    Row {
        name,
        input: Input::Text(frame.into()),
        answer,
    }
}

fn error(id: Value, code: i64, tag: &str, message: &str) -> Answer {
    Answer::Frame(json!({"jsonrpc": "2.0", "id": id,
        "error": {"code": code, "message": message, "_tag": tag}}))
}

fn error_with(id: Value, code: i64, tag: &str, message: &str, data: Value) -> Answer {
    Answer::Frame(json!({"jsonrpc": "2.0", "id": id,
        "error": {"code": code, "message": message, "_tag": tag, "data": data}}))
}

fn parse_error(message: &str) -> Answer {
    error(Value::Null, -32700, "ParseError", message)
}

fn invalid(id: Value, message: &str) -> Answer {
    error(id, -32600, "InvalidRequestError", message)
}

/// The identity call's frame with `id` written as is.
fn get_with_id(id: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"agent/identity/get"}}"#)
}

const ID_FORM: &str = "Invalid request: id must be a string or an integer";
const NO_FRACTION: &str =
    "Invalid request: id must be a string or an integer (no fraction or exponent)";
const BEYOND_64: &str =
    "Invalid request: id is beyond 64 bits: ids are limited to 64-bit integers or strings";
const BATCH: &str =
    "Invalid request: batch requests are not supported; send one JSON-RPC object per frame";
const NOT_OBJECT: &str = "Invalid request: a frame must be a JSON object";
const JSONRPC: &str = "Invalid request: jsonrpc must be \"2.0\"";
const BY_NAME: &str = "Invalid params: params must be an object (by-name params)";

#[rustfmt::skip]
fn not_json_rows() -> Vec<Row> {
    vec![
        text("not JSON: a broken object", "{not json", parse_error("Parse error: key must be a string at line 1 column 2")),
        text("not JSON: a bare word", "nope", parse_error("Parse error: expected ident at line 1 column 2")),
        text("not JSON: an empty frame", "", parse_error("Parse error: EOF while parsing a value at line 1 column 0")),
        text("not JSON: only whitespace", "   ", parse_error("Parse error: EOF while parsing a value at line 1 column 3")),
        text("not JSON: a byte-order mark first", format!("\u{feff}{}", get_with_id("1")), parse_error("Parse error: expected value at line 1 column 1")),
        text("not JSON: trailing characters", format!("{} trailing", get_with_id("1")), parse_error("Parse error: trailing characters at line 1 column 56")),
        text("not JSON: a cut-off frame", r#"{"jsonrpc":"2.0","id":1,"#, parse_error("Parse error: EOF while parsing a value at line 1 column 24")),
        text("not JSON: a raw control character in a string", "{\"jsonrpc\":\"2.0\",\"id\":\"a\u{0}b\",\"method\":\"agent/identity/get\"}", parse_error("Parse error: control character (\\u0000-\\u001F) found while parsing a string at line 1 column 25")),
        text("not JSON: a lone surrogate escape", r#"{"jsonrpc":"2.0","id":"s","method":"agent/identity/get","params":{"\udc00":1}}"#, parse_error("Parse error: lone leading surrogate in hex escape at line 1 column 73")),
        text("not an object: a number", "42", invalid(Value::Null, NOT_OBJECT)),
        text("not an object: null", "null", invalid(Value::Null, NOT_OBJECT)),
        text("not an object: a string", r#""str""#, invalid(Value::Null, NOT_OBJECT)),
        text("not an object: true", "true", invalid(Value::Null, NOT_OBJECT)),
        text("batch: empty", "[]", invalid(Value::Null, BATCH)),
        text("batch: of numbers", "[1,2]", invalid(Value::Null, BATCH)),
        text("batch: of one good request", format!("[{}]", get_with_id("1")), invalid(Value::Null, BATCH)),
    ]
}

#[rustfmt::skip]
fn envelope_rows() -> Vec<Row> {
    vec![
        text("envelope: empty object", "{}", invalid(Value::Null, JSONRPC)),
        text("envelope: no jsonrpc, the id is echoed", r#"{"id":1,"method":"agent/identity/get"}"#, invalid(json!(1), JSONRPC)),
        text("envelope: jsonrpc 1.0", r#"{"jsonrpc":"1.0","id":1,"method":"agent/identity/get"}"#, invalid(json!(1), JSONRPC)),
        text("envelope: jsonrpc a number", r#"{"jsonrpc":2,"id":1,"method":"agent/identity/get"}"#, invalid(json!(1), JSONRPC)),
        text("envelope: method a number", r#"{"jsonrpc":"2.0","id":1,"method":5}"#, invalid(json!(1), "Invalid request: method must be a non-empty string")),
        text("envelope: method empty", r#"{"jsonrpc":"2.0","id":"x","method":""}"#, invalid(json!("x"), "Invalid request: method must be a non-empty string")),
        text("envelope: no method and no result", r#"{"jsonrpc":"2.0","id":1}"#, invalid(json!(1), "Invalid request: method is required")),
        text("envelope: an unknown member", r#"{"jsonrpc":"2.0","id":1,"method":"agent/identity/get","extra":1}"#, invalid(json!(1), "Invalid request: unknown member `extra` in request frame")),
        text("envelope: a `type` member", r#"{"jsonrpc":"2.0","id":"t","type":"request","method":"agent/identity/get"}"#, invalid(json!("t"), "Invalid request: unknown member `type` in request frame")),
        text("envelope: params null", r#"{"jsonrpc":"2.0","id":1,"method":"agent/identity/get","params":null}"#, error_with(json!(1), -32602, "InvalidParamsError", BY_NAME, json!({"field": "params"}))),
        text("envelope: params a string", r#"{"jsonrpc":"2.0","id":1,"method":"agent/identity/get","params":"x"}"#, error_with(json!(1), -32602, "InvalidParamsError", BY_NAME, json!({"field": "params"}))),
        text("method: unknown", r#"{"jsonrpc":"2.0","id":7,"method":"agent/does/not-exist","params":{}}"#, error_with(json!(7), -32601, "MethodNotFoundError", "Method not found: agent/does/not-exist", json!({"method": "agent/does/not-exist"}))),
        text("method: a 5000-character name is cut to 100 in the answer", format!(r#"{{"jsonrpc":"2.0","id":"lm","method":"{}"}}"#, "m".repeat(5000)), error_with(json!("lm"), -32601, "MethodNotFoundError", &format!("Method not found: {}", "m".repeat(100)), json!({"method": "m".repeat(100)}))),
        text("method: JSON-RPC's reserved rpc.discover", r#"{"jsonrpc":"2.0","id":"x","method":"rpc.discover"}"#, error_with(json!("x"), -32601, "MethodNotFoundError", "Method not found: rpc.discover", json!({"method": "rpc.discover"}))),
        text("method: another kind's method", r#"{"jsonrpc":"2.0","id":"x","method":"app/identity/get"}"#, error_with(json!("x"), -32003, "ForbiddenError", "app/identity/get may be called only by an app", json!({"reason": "subject_kind_not_allowed"}))),
        text("notification: no id gets no answer", r#"{"jsonrpc":"2.0","method":"agent/identity/get"}"#, Answer::Nothing {unmatched: 0.0}),
    ]
}

#[rustfmt::skip]
fn id_rows() -> Vec<Row> {
    let ok = |id: Value| {
        Answer::Frame(json!({"jsonrpc": "2.0", "id": id, "result": {"identity": "matrix"}}))
    };
    vec![
        text("id: a string", get_with_id(r#""abc""#), ok(json!("abc"))),
        text("id: an empty string", get_with_id(r#""""#), ok(json!(""))),
        text("id: a number", get_with_id("12"), ok(json!(12))),
        text("id: negative", get_with_id("-1"), ok(json!(-1))),
        text("id: zero", get_with_id("0"), ok(json!(0))),
        text("id: u64::MAX", get_with_id("18446744073709551615"), ok(json!(u64::MAX))),
        text("id: i64::MIN", get_with_id("-9223372036854775808"), ok(json!(i64::MIN))),
        text("id: 256 bytes", get_with_id(&format!("\"{}\"", "i".repeat(256))), ok(json!("i".repeat(256)))),
        text("id: 257 bytes is refused and not echoed", get_with_id(&format!("\"{}\"", "i".repeat(257))), error_with(Value::Null, -32600, "InvalidRequestError", "Invalid request: request id of 257 bytes exceeds 256 bytes; use a shorter string id", json!({"limit": 256, "size": 257}))),
        text("id: null", get_with_id("null"), invalid(Value::Null, ID_FORM)),
        text("id: an object", get_with_id(r#"{"a":1}"#), invalid(Value::Null, ID_FORM)),
        text("id: an array", get_with_id("[1]"), invalid(Value::Null, ID_FORM)),
        text("id: true", get_with_id("true"), invalid(Value::Null, ID_FORM)),
        text("id: a fraction", get_with_id("1.5"), invalid(Value::Null, NO_FRACTION)),
        text("id: 1.0", get_with_id("1.0"), invalid(Value::Null, NO_FRACTION)),
        text("id: an exponent", get_with_id("1e2"), invalid(Value::Null, NO_FRACTION)),
        text("id: minus zero", get_with_id("-0"), invalid(Value::Null, "Invalid request: id -0 cannot be echoed as written; send 0 or a string")),
        text("id: 2^64", get_with_id("18446744073709551616"), invalid(Value::Null, BEYOND_64)),
        text("id: i64::MIN - 1", get_with_id("-9223372036854775809"), invalid(Value::Null, BEYOND_64)),
        text("id: thirty digits", get_with_id("123456789012345678901234567890"), invalid(Value::Null, BEYOND_64)),
        text("id: 1e30", get_with_id("1e30"), invalid(Value::Null, BEYOND_64)),
    ]
}

#[rustfmt::skip]
fn shape_rows() -> Vec<Row> {
    let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let params_with = |x: String| {
        format!(
            r#"{{"jsonrpc":"2.0","id":"d","method":"agent/identity/get","params":{{"x":{x}}}}}"#
        )
    };
    let unknown_x = error_with(
        json!("d"),
        -32602,
        "InvalidParamsError",
        "Invalid params: x is not a known member",
        json!({"field": "x"}),
    );
    vec![
        text("nesting: 100 arrays deep is read, then refused by name", params_with(nested(100)), unknown_x),
        text("nesting: 130 arrays deep", params_with(nested(130)), parse_error("Parse error: recursion limit exceeded at line 1 column 196")),
        text("nesting: 5000 arrays deep", params_with(nested(5000)), parse_error("Parse error: recursion limit exceeded at line 1 column 196")),
        text("nesting: 5000 objects deep", format!(r#"{{"jsonrpc":"2.0","id":"o","method":"agent/identity/get","params":{}1{}}}"#, r#"{"a":"#.repeat(5000), "}".repeat(5000)), parse_error("Parse error: recursion limit exceeded at line 1 column 696")),
        text("size: a frame over gateway.max_frame_bytes", params_with(format!("\"{}\"", "y".repeat(1_100_000))), error_with(Value::Null, -32600, "InvalidRequestError", "Invalid request: frame of 1100074 bytes exceeds gateway.max_frame_bytes (1048576)", json!({"limit": 1048576, "size": 1100074}))),
        Row {name: "binary: a binary frame", input: Input::Binary(b"{}".to_vec()), answer: invalid(Value::Null, "Invalid request: binary frames are not supported; send JSON text frames")},
        text("answer: a result for an id never sent", r#"{"jsonrpc":"2.0","id":"hub-999","result":{}}"#, Answer::Nothing {unmatched: 1.0}),
        text("answer: an error for an id never sent", r#"{"jsonrpc":"2.0","id":"hub-1","error":{"code":1,"message":"x"}}"#, Answer::Nothing {unmatched: 1.0}),
        text("answer: a number id never sent", r#"{"jsonrpc":"2.0","id":77,"result":null}"#, Answer::Nothing {unmatched: 1.0}),
        text("answer: both result and error", r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}"#, Answer::Nothing {unmatched: 1.0}),
    ]
}

fn rows() -> Vec<Row> {
    let mut rows = not_json_rows();
    rows.extend(envelope_rows());
    rows.extend(id_rows());
    rows.extend(shape_rows());
    rows
}

/// Broken WebSocket frames, written byte by byte on a fresh socket each,
/// and the close code each gets (RFC 6455 §7.4.1).
#[rustfmt::skip]
fn transport_rows() -> Vec<(&'static str, u8, bool, Vec<u8>, u16)> {
    vec![
        ("invalid UTF-8 text", 0x81, true, vec![b'"', 0xff, 0xfe, b'"'], 1007),
        ("invalid UTF-8 across fragments", 0x01, true, vec![b'"', 0xe2], 1007),
        ("unmasked frame", 0x81, false, b"{}".to_vec(), 1002),
        ("reserved opcode", 0x83, true, b"{}".to_vec(), 1002),
        ("RSV1 bit", 0xc1, true, b"{}".to_vec(), 1002),
        ("oversized ping", 0x89, true, vec![0u8; 126], 1002),
        ("lone continuation", 0x80, true, b"{}".to_vec(), 1002),
    ]
}

/// Rows of the flood and size tests below, which are not in the tables.
const OTHER_ROWS: usize = 5;

pub fn row_count() -> usize {
    rows().len() + transport_rows().len() + OTHER_ROWS
}

async fn matrix_agent(hub: &TestHub) -> RawSocket {
    let (_, key) = hub.register_agent("matrix").await;
    RawSocket::connect_agent(&hub.ws_url(), &key).await
}

/// The next frame on `s`, or what ended the socket.
async fn next_frame(s: &mut RawSocket) -> Result<Value, String> {
    match s.next_event().await {
        RawEvent::Text(v) => Ok(v),
        other => Err(format!("{other:?}")),
    }
}

/// The identity answer, with the fields that vary between runs replaced so
/// a row can name it exactly.
fn normalized(mut frame: Value) -> Value {
    if let Some(result) = frame
        .get_mut("result")
        .filter(|r| r.get("agentId").is_some())
    {
        *result = json!({"identity": "matrix"});
    }
    frame
}

/// Runs one row on `s`; `Err` says how the answer differed.
async fn run_row(hub: &TestHub, s: &mut RawSocket, row: &Row, alive: usize) -> Result<(), String> {
    let unmatched = hub
        .metric("switchboard_unmatched_responses_total", "")
        .await;
    match &row.input {
        Input::Text(t) => s.send_text(t.clone()).await,
        Input::Binary(b) => s.send_binary(b.clone()).await,
    }
    if let Answer::Frame(expected) = &row.answer {
        let got = normalized(next_frame(s).await?);
        if &got != expected {
            return Err(format!("answered {got}, expected {expected}"));
        }
    }
    // Survival, and nothing else was sent: the next frame is this answer.
    let id = format!("alive-{alive}");
    s.send_json(&json!({"jsonrpc": "2.0", "id": id, "method": "agent/identity/get"}))
        .await;
    let next = next_frame(s).await?;
    if next["id"] != json!(id) || next.get("result").is_none() {
        return Err(format!("the socket did not serve afterwards: {next}"));
    }
    if let Answer::Nothing { unmatched: grew } = row.answer {
        let now = hub
            .metric("switchboard_unmatched_responses_total", "")
            .await;
        if now - unmatched != grew {
            return Err(format!(
                "unmatched answers grew by {}, expected {grew}",
                now - unmatched
            ));
        }
    }
    Ok(())
}

/// Broken WebSocket frames, each on a fresh socket of `hub`.
async fn run_transport_rows(hub: &TestHub, health: &mut Health, failures: &mut Vec<String>) {
    for (what, first, masked, payload, expected) in &transport_rows() {
        let mut s = HandMadeSocket::open(&hub.ws_url()).await;
        s.frame(*first, *masked, payload).await;
        if *what == "invalid UTF-8 across fragments" {
            // The rest of the character never comes: a bad continuation byte.
            s.frame(0x80, true, b"x\"").await;
        }
        let code = s.close_code().await;
        if code != Some(*expected) {
            failures.push(format!("{what}: closed with {code:?}, expected {expected}"));
        }
        failures.extend(health.faults(hub, what).await);
    }
}

#[tokio::test]
async fn frames_get_their_exact_answer_and_the_socket_survives_or_closes_with_its_code() {
    let hub = TestHub::start_with(options()).await;
    let mut s = matrix_agent(&hub).await;
    let mut health = Health::new(&hub);
    let rows = rows();
    let mut failures = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        if let Err(e) = run_row(&hub, &mut s, row, i).await {
            failures.push(format!("{}: {e}", row.name));
            s = matrix_agent(&hub).await;
        }
        failures.extend(health.faults(&hub, row.name).await);
    }
    run_transport_rows(&hub, &mut health, &mut failures).await;
    assert_no_failures("frames", rows.len() + transport_rows().len(), &failures);
}

/// Five rows of their own: a frame the transport cannot read closes the
/// socket with 1009, and so does a stranger's frame over
/// `gateway.unauthenticated_max_frame_bytes`; a stranger's socket closes
/// with 1008 after `gateway.max_unauthenticated_frames`; a flood of requests is answered one for one; a flood
/// of answers to ids never sent gets no answer and the socket serves.
#[tokio::test]
async fn huge_frames_close_with_1009_and_floods_are_served_in_order() {
    let hub = TestHub::start_with(
        options()
            .env("SWITCHBOARD_GATEWAY__MAX_FRAME_BYTES", 4096)
            .env("SWITCHBOARD_GATEWAY__TRANSPORT_MAX_FRAME_BYTES", 8192)
            .env("SWITCHBOARD_GATEWAY__UNAUTHENTICATED_MAX_FRAME_BYTES", 2048)
            // Room for every answer of the flood, which is written before
            // one is read: a full queue is the slow-consumer test's row.
            .env("SWITCHBOARD_GATEWAY__OUTBOUND_QUEUE_CAPACITY", 4096),
    )
    .await;
    let mut health = Health::new(&hub);
    let mut failures = Vec::new();

    let mut s = matrix_agent(&hub).await;
    // Beyond gateway.transport_max_frame_bytes.
    s.send_text(format!("\"{}\"", "z".repeat(20_000))).await;
    let close = s.closed().await.map(|c| c.0);
    if close != Some(1009) {
        failures.push(format!(
            "a frame beyond the transport limit closed with {close:?}"
        ));
    }
    failures.extend(
        health
            .faults(&hub, "size: beyond the transport limit")
            .await,
    );

    let mut s = RawSocket::connect(&hub.ws_url()).await;
    s.send_text(format!("\"{}\"", "z".repeat(3_000))).await;
    let close = s.closed().await.map(|c| c.0);
    if close != Some(1009) {
        failures.push(format!("a stranger's large frame closed with {close:?}"));
    }
    failures.extend(
        health
            .faults(&hub, "size: a stranger's frame over its limit")
            .await,
    );

    let mut s = RawSocket::connect(&hub.ws_url()).await;
    for i in 0..17 {
        if !s.try_send_text(get_with_id(&i.to_string())).await {
            break;
        }
    }
    let close = s.closed().await;
    let expected = (
        1008,
        "too many frames before a connect (gateway.max_unauthenticated_frames)",
    );
    if close.as_ref().map(|(c, r)| (*c, r.as_str())) != Some(expected) {
        failures.push(format!("17 frames before a connect closed with {close:?}"));
    }
    failures.extend(health.faults(&hub, "flood: frames before a connect").await);

    let mut s = matrix_agent(&hub).await;
    let n = 2_000;
    for i in 0..n {
        s.send_json(&json!({"jsonrpc": "2.0", "id": i, "method": "agent/identity/get"}))
            .await;
    }
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < n {
        let f = s.recv().await;
        let id = f["id"].as_u64().unwrap_or_else(|| panic!("flood: {f}"));
        // Past gateway.max_in_flight_requests a request is refused, by id.
        let in_flight = json!({"code": -32029, "_tag": "RateLimitedError", "data": {"limit": 64},
            "message": "too many requests in flight on this socket (gateway.max_in_flight_requests = 64)"});
        let answered = f.get("result").is_some() || f["error"] == in_flight;
        if !answered || !seen.insert(id) {
            failures.push(format!(
                "flood of requests: {f} (answered twice or not served)"
            ));
            break;
        }
    }
    failures.extend(health.faults(&hub, "flood: 2000 pipelined requests").await);

    let before = hub
        .metric("switchboard_unmatched_responses_total", "")
        .await;
    for i in 0..2_000 {
        s.send_json(&json!({"jsonrpc": "2.0", "id": format!("never-{i}"), "result": {}}))
            .await;
    }
    let r = s
        .call(json!("after"), "agent/identity/get", json!({}))
        .await;
    let after = hub
        .metric("switchboard_unmatched_responses_total", "")
        .await;
    if r.get("result").is_none() || after - before != 2_000.0 {
        failures.push(format!("flood of answers: {r}, counted {}", after - before));
    }
    failures.extend(
        health
            .faults(&hub, "flood: 2000 answers to ids never sent")
            .await,
    );
    assert_no_failures("sizes and floods", OTHER_ROWS, &failures);
}
