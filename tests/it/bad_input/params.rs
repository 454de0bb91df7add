//! Every catalogue method's params, driven from `protocol::catalogue()`:
//! for each peer-to-hub method, params that are not an object, an unknown
//! member, the first required member missing and the first member of the
//! wrong type, each answered -32602 naming the field in `data.field`. The
//! hub's own methods and the notifications, called by a peer, are not
//! found. Each row runs on a socket of the method's caller kind, which must
//! still serve afterwards.

use serde_json::{json, Map, Value};
use switchboard::protocol::{catalogue, Caller, Direction, MethodSpec, SpecKind};

use super::{assert_no_failures, options, Health};
use crate::support::world::{person, Member};
use crate::support::{RawSocket, TestHub};

/// What the hub must answer.
pub enum Expect {
    /// This exact error object.
    Error(Value),
    /// -32602 naming `field`, its message starting with `prefix` (the
    /// rest is serde's wording of a type it has no schema name for).
    Names { field: String, prefix: String },
}

pub struct Row {
    pub name: String,
    pub method: &'static str,
    pub caller: Caller,
    pub params: Value,
    pub expect: Expect,
}

fn invalid_params(message: String, field: &str) -> Expect {
    Expect::Error(json!({"code": -32602, "message": message,
        "_tag": "InvalidParamsError", "data": {"field": field}}))
}

fn not_found(method: &str) -> Expect {
    Expect::Error(
        json!({"code": -32601, "message": format!("Method not found: {method}"),
        "_tag": "MethodNotFoundError", "data": {"method": method}}),
    )
}

/// The params type's own schema, as the export writes it.
fn params_schema(spec: &MethodSpec) -> Map<String, Value> {
    let mut g = schemars::SchemaGenerator::default();
    let schema = (spec.params_schema)(&mut g);
    schema.as_value().as_object().cloned().unwrap_or_default()
}

/// What serde says it expected, for the schema shapes it names plainly.
fn expected_type(schema: &Value) -> Option<&'static str> {
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => return None,
    };
    let main = types.iter().find(|t| **t != "null")?;
    match (*main, schema["format"].as_str()) {
        ("string", Some("uuid")) => Some("a formatted UUID string"),
        ("string", None) => Some("a string"),
        ("integer", Some("uint64")) => Some("u64"),
        ("integer", Some("uint32")) => Some("u32"),
        ("array", _) => Some("a sequence"),
        _ => None,
    }
}

fn request_rows(spec: &MethodSpec) -> Vec<Row> {
    let schema = params_schema(spec);
    let row = |case: &str, params: Value, expect: Expect| Row {
        name: format!("{} {case}", spec.name),
        method: spec.name,
        caller: spec.caller,
        params,
        expect,
    };
    let by_name = "Invalid params: params must be an object (by-name params)";
    let mut rows = vec![
        row(
            "params an array",
            json!([]),
            invalid_params(by_name.into(), "params"),
        ),
        row(
            "params a number",
            json!(42),
            invalid_params(by_name.into(), "params"),
        ),
        row(
            "an unknown member",
            json!({"zzUnknownMember": 1}),
            invalid_params(
                "Invalid params: zzUnknownMember is not a known member".into(),
                "zzUnknownMember",
            ),
        ),
    ];
    let required = schema.get("required").and_then(Value::as_array);
    if let Some(first) = required.and_then(|r| r.first()).and_then(Value::as_str) {
        rows.push(row(
            &format!("without {first}"),
            json!({}),
            invalid_params(format!("Invalid params: {first} is required"), first),
        ));
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    if let Some((name, prop)) = properties.and_then(|p| p.iter().next()) {
        let prefix = format!("Invalid params: {name}: invalid type: boolean `true`, expected ");
        let expect = match expected_type(prop) {
            Some(t) => invalid_params(format!("{prefix}{t}"), name),
            None => Expect::Names {
                field: name.clone(),
                prefix,
            },
        };
        rows.push(row(
            &format!("{name} of the wrong type"),
            json!({ name: true }),
            expect,
        ));
    }
    rows
}

/// The rows, from the catalogue alone.
pub fn rows() -> Vec<Row> {
    let mut rows = Vec::new();
    for spec in catalogue() {
        match (spec.direction, spec.kind) {
            (Direction::ToHub, SpecKind::Request) => rows.extend(request_rows(&spec)),
            // The hub's calls and the notifications are not a peer's to call.
            _ => rows.push(Row {
                name: format!("{} called by its receiver", spec.name),
                method: spec.name,
                caller: spec.caller,
                params: json!({}),
                expect: not_found(spec.name),
            }),
        }
    }
    rows
}

/// One socket per caller kind, connected once; a connect's rows run on a
/// socket that is not connected.
struct Sockets {
    agent: RawSocket,
    app: RawSocket,
    person: RawSocket,
    stranger: RawSocket,
}

impl Sockets {
    async fn open(hub: &TestHub, keys: &Keys) -> Sockets {
        let url = hub.ws_url();
        let mut person = RawSocket::connect(&url).await;
        let r = person
            .call(
                json!("c"),
                "person/network/connect",
                json!({"personKey": keys.person.key}),
            )
            .await;
        assert!(r.get("result").is_some(), "{r}");
        Sockets {
            agent: RawSocket::connect_agent(&url, &keys.agent).await,
            app: RawSocket::connect_app(&url, &keys.app).await,
            person,
            stranger: RawSocket::connect(&url).await,
        }
    }

    fn of(&mut self, caller: Caller) -> (&mut RawSocket, &'static str) {
        match caller {
            Caller::Agent => (&mut self.agent, "agent/identity/get"),
            Caller::App => (&mut self.app, "app/identity/get"),
            Caller::Person => (&mut self.person, "person/identity/get"),
            // Alive and still a stranger: asking who it is is refused.
            Caller::Unauthenticated => (&mut self.stranger, "agent/identity/get"),
        }
    }
}

struct Keys {
    agent: String,
    app: String,
    person: Member,
}

fn check(expect: &Expect, answer: &Value) -> Result<(), String> {
    let error = &answer["error"];
    match expect {
        Expect::Error(e) if error == e => Ok(()),
        Expect::Error(e) => Err(format!("answered {answer}, expected {e}")),
        Expect::Names { field, prefix } => {
            let message = error["message"].as_str().unwrap_or("");
            let named = error["code"] == json!(-32602)
                && error["data"]["field"] == json!(field)
                && message.starts_with(prefix.as_str());
            named
                .then_some(())
                .ok_or_else(|| format!("answered {answer}, expected {field} named by `{prefix}…`"))
        }
    }
}

async fn run_row(s: &mut RawSocket, alive: &str, row: &Row, i: usize) -> Result<(), String> {
    let id = json!(format!("row-{i}"));
    s.send_json(&json!({"jsonrpc": "2.0", "id": id, "method": row.method, "params": row.params}))
        .await;
    let answer = s.recv().await;
    if answer["id"] != id {
        return Err(format!("the next frame was {answer}"));
    }
    check(&row.expect, &answer)?;
    let id = json!(format!("alive-{i}"));
    s.send_json(&json!({"jsonrpc": "2.0", "id": id, "method": alive}))
        .await;
    let next = s.recv().await;
    let served = next["id"] == id
        && (next.get("result").is_some() || next["error"]["_tag"] == json!("UnauthorizedError"));
    served
        .then_some(())
        .ok_or_else(|| format!("the socket did not serve afterwards: {next}"))
}

#[tokio::test]
async fn every_methods_bad_params_name_the_field_and_the_socket_survives() {
    let hub = TestHub::start_with(options()).await;
    let keys = Keys {
        agent: hub.register_agent("matrix-agent").await.1,
        app: hub
            .register_app(&crate::support::werewolf_manifest())
            .await
            .1,
        person: person(&hub, "matrix-person").await,
    };
    let mut sockets = Sockets::open(&hub, &keys).await;
    let mut health = Health::new(&hub);
    let rows = rows();
    let mut failures = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        if row.caller == Caller::Unauthenticated {
            // A stranger's socket may send only a few frames
            // (gateway.max_unauthenticated_frames): a fresh one per row.
            sockets.stranger = RawSocket::connect(&hub.ws_url()).await;
        }
        let (s, alive) = sockets.of(row.caller);
        if let Err(e) = run_row(s, alive, row, i).await {
            failures.push(format!("{}: {e}", row.name));
            sockets = Sockets::open(&hub, &keys).await;
        }
        failures.extend(health.faults(&hub, &row.name).await);
    }
    assert_no_failures("params", rows.len(), &failures);
}
