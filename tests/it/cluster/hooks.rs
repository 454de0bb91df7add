//! Hook calls across nodes (issue 19 part 3, ADR 0035): a task gate on
//! node 2 calls an app whose socket is on node 3, every outcome keeps its
//! meaning, the newest socket anywhere takes the call, and node 3 killed
//! during the call fails the gate closed within the hook's deadline.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchboard::client::{AgentClient, ClientError};
use switchboard::protocol::tasks::{AcceptedTask, AgentTaskRequest, TaskRequestParams};
use uuid::Uuid;

use super::harness::ClusterHarness;
use super::hook_nodes::{eventually, with_env};
use crate::support::agents::agent;
use crate::support::RawSocket;

const RELAYS: &str = "switchboard_cluster_hook_relays_total";

pub(super) fn hooked(timeout_ms: u64) -> Value {
    json!({
        "name": "Gatekeeper",
        "description": "A test app",
        "limits": { "maxParticipants": 4 },
        "conversations": [{ "key": "all", "name": "Everyone", "participantFilter": "all" }],
        "hooks": {
            "task_create": {"kind": "hook", "timeoutMs": timeout_ms},
            "message_authorize": {"kind": "forwardAllExceptSender"},
            "dispatch_authorize": {"kind": "grant"}
        }
    })
}

pub(super) struct Setup {
    app_id: Uuid,
    pub(super) app_key: String,
    invited: Uuid,
    /// The initiator, connected to node 2.
    client: AgentClient,
}

pub(super) async fn setup(nodes: &ClusterHarness, timeout_ms: u64) -> Setup {
    let (app_id, app_key) = nodes.node(1).register_app(&hooked(timeout_ms)).await;
    let initiator = agent(nodes.node(1), "initiator").await;
    let invited = agent(nodes.node(1), "invited").await;
    let client = AgentClient::connect(&nodes.node(2).base, &initiator.key)
        .await
        .unwrap();
    Setup {
        app_id: app_id.parse().unwrap(),
        app_key,
        invited: invited.id,
        client,
    }
}

impl Setup {
    pub(super) async fn request(&self) -> Result<AcceptedTask, ClientError> {
        self.client
            .call::<AgentTaskRequest>(TaskRequestParams {
                app_id: self.app_id,
                invited_agent_ids: vec![self.invited],
                initial_conversation: None,
            })
            .await
    }
}

pub(super) fn failure(result: Result<AcceptedTask, ClientError>) -> (String, Value) {
    let err = result.expect_err("the gate must fail closed");
    let e = err
        .rpc()
        .unwrap_or_else(|| panic!("not an RPC error: {err}"));
    (
        e.tag.clone().unwrap(),
        e.data.as_deref().cloned().unwrap_or(Value::Null)["code"].clone(),
    )
}

/// The app answers one call on `raw` with `answer` (a result or an error).
pub(super) async fn answer_one(raw: &mut RawSocket, answer: &Value) {
    let req = raw.recv_request().await;
    assert_eq!(req["method"], json!("app/task/create"));
    let mut frame = json!({"jsonrpc": "2.0", "id": req["id"]});
    for (k, v) in answer.as_object().unwrap() {
        frame[k] = v.clone();
    }
    raw.send_json(&frame).await;
}

#[tokio::test]
async fn a_task_gate_on_node_2_calls_an_app_on_node_3_and_every_outcome_keeps_its_meaning() {
    let nodes = ClusterHarness::start(3).await;
    let s = setup(&nodes, 1_500).await;

    // Never connected anywhere.
    assert_eq!(failure(s.request().await).1, json!("app_unavailable"));

    let mut raw = RawSocket::connect_app(&nodes.node(3).ws_url(), &s.app_key).await;
    for (answer, expected) in [
        (
            json!({"result": {"verdict": {"decision": "Accept"}}}),
            Ok(()),
        ),
        (
            json!({"result": {"verdict": {"decision": "Reject", "reason": "no"}}}),
            Err("rejected"),
        ),
        (
            json!({"error": {"code": -32000, "message": "boom"}}),
            Err("app_error"),
        ),
        (json!({"result": 42}), Err("invalid_answer")),
    ] {
        let (result, ()) = tokio::join!(s.request(), answer_one(&mut raw, &answer));
        match expected {
            Ok(()) => assert!(result.is_ok(), "{result:?}"),
            Err(code) => assert_eq!(failure(result).1, json!(code)),
        }
    }

    // Late: node 3 gives up before node 2's deadline, and says timeout.
    let started = Instant::now();
    let (result, late) = tokio::join!(s.request(), raw.recv_request());
    assert_eq!(
        failure(result),
        ("TimeoutError".to_string(), json!("timeout"))
    );
    assert!(started.elapsed() < Duration::from_millis(1_500 + 1_000));
    raw.send_json(
        &json!({"jsonrpc": "2.0", "id": late["id"], "result": {"verdict": {"decision": "Accept"}}}),
    )
    .await;

    // Disconnecting mid-call.
    let (result, ()) = tokio::join!(s.request(), async {
        raw.recv_request().await;
        drop(raw);
    });
    assert_eq!(failure(result).1, json!("app_unavailable"));

    let relayed = |outcome: &'static str| {
        let node = nodes.node(2);
        async move { node.metric(RELAYS, &format!("outcome=\"{outcome}\"")).await }
    };
    assert_eq!(
        relayed("ok").await,
        3.0,
        "an accept, a reject and an answer of the wrong type came back"
    );
    assert_eq!(relayed("remote_error").await, 1.0);
    assert_eq!(
        nodes
            .node(2)
            .metric("switchboard_hook_calls_total", "outcome=\"bad_result\"")
            .await,
        1.0,
        "the gate's node decoded the wrong type, as for a local call"
    );
    assert_eq!(
        relayed("timeout").await + relayed("no_reply").await,
        1.0,
        "node 3's timeout, or node 2's own wait when the reply is later"
    );
    assert_eq!(relayed("disconnected").await, 1.0);
    assert_eq!(
        nodes.node(3).metric(RELAYS, "").await,
        0.0,
        "node 3 relayed nothing itself"
    );
}

#[tokio::test]
async fn the_newest_socket_on_any_node_takes_the_call() {
    let nodes = ClusterHarness::start(3).await;
    let s = setup(&nodes, 3_000).await;
    let mut older = RawSocket::connect_app(&nodes.node(3).ws_url(), &s.app_key).await;
    let mut newer = RawSocket::connect_app(&nodes.node(1).ws_url(), &s.app_key).await;
    let accept = json!({"result": {"verdict": {"decision": "Accept"}}});

    let (result, ()) = tokio::join!(s.request(), answer_one(&mut newer, &accept));
    assert!(result.is_ok(), "the newest socket, on node 1, answered");

    drop(newer);
    eventually("node 1 to see its app socket close", || async {
        nodes
            .node(1)
            .metric("switchboard_connections", "kind=\"app\"")
            .await
            == 0.0
    })
    .await;
    let (result, ()) = tokio::join!(s.request(), answer_one(&mut older, &accept));
    assert!(result.is_ok(), "the older socket, on node 3, took over");

    let newest = RawSocket::connect_app(&nodes.node(2).ws_url(), &s.app_key).await;
    let mut newest = newest;
    let (result, ()) = tokio::join!(s.request(), answer_one(&mut newest, &accept));
    assert!(
        result.is_ok(),
        "a socket on the gate's own node is called directly"
    );
}

#[tokio::test]
async fn node_3_killed_during_the_call_fails_the_gate_closed_in_time() {
    let deadline_ms = 2_000;
    let mut nodes = ClusterHarness::start_with(
        3,
        with_env(&[
            ("SWITCHBOARD_CLUSTER__PRESENCE_LEASE_MS", "6000"),
            ("SWITCHBOARD_CLUSTER__PRESENCE_RENEW_MS", "500"),
        ]),
    )
    .await;
    let s = setup(&nodes, deadline_ms).await;
    let mut raw = RawSocket::connect_app(&nodes.node(3).ws_url(), &s.app_key).await;

    let started = Instant::now();
    let (result, ()) = tokio::join!(s.request(), async {
        raw.recv_request().await;
        nodes.kill(3).await;
    });
    let took = started.elapsed();
    assert_eq!(
        failure(result),
        ("TimeoutError".to_string(), json!("timeout")),
        "no reply: a deny with its reason"
    );
    assert!(
        took < Duration::from_millis(deadline_ms + 1_000),
        "failed closed at the hook's deadline, not later: {took:?}"
    );
    let relays = |outcome: &'static str| {
        let node = nodes.node(2);
        async move { node.metric(RELAYS, &format!("outcome=\"{outcome}\"")).await }
    };
    assert_eq!(relays("no_reply").await, 1.0);

    // Node 3's lease is still live: its subject has no responder now.
    let started = Instant::now();
    let first = s.request().await;
    assert_eq!(failure(first).1, json!("app_unavailable"));
    assert!(started.elapsed() < Duration::from_millis(deadline_ms));

    // Once the lease lapses, no node holds the app: refused without a relay.
    eventually("node 3's presence lease to lapse", || async {
        let before = nodes.node(2).metric(RELAYS, "").await;
        let code = failure(s.request().await).1;
        assert_eq!(code, json!("app_unavailable"));
        nodes.node(2).metric(RELAYS, "").await == before
    })
    .await;
    assert!(relays("no_responders").await >= 1.0);
}

/// Review fix (ADR 0035): a gate whose node is cut off from NATS answers
/// `app_unavailable` at once, and its call never reaches the app later,
/// when the client reconnects and would flush what it queued.
#[tokio::test]
async fn a_gate_cut_off_from_nats_is_unavailable_and_its_call_never_reaches_the_app() {
    let deadline_ms = 2_000;
    let mut nodes = ClusterHarness::start(3).await;
    let s = setup(&nodes, deadline_ms).await;
    let mut raw = RawSocket::connect_app(&nodes.node(3).ws_url(), &s.app_key).await;

    nodes.stop_nats().await;
    eventually("node 2 to see NATS gone", || async {
        nodes.readyz(2).await.1.contains("nats disconnected")
    })
    .await;
    let started = Instant::now();
    assert_eq!(failure(s.request().await).1, json!("app_unavailable"));
    assert!(
        started.elapsed() < Duration::from_millis(deadline_ms),
        "refused without waiting out the deadline"
    );

    nodes.start_nats().await;
    let accept = json!({"result": {"verdict": {"decision": "Accept"}}});
    let (result, ()) = tokio::join!(s.request(), answer_one(&mut raw, &accept));
    assert!(
        result.is_ok(),
        "the first call the app sees is this one: {result:?}"
    );
    assert_eq!(
        nodes
            .node(3)
            .metric(
                "switchboard_cluster_messages_total",
                "direction=\"received\",kind=\"hook\""
            )
            .await,
        1.0,
        "nothing queued during the outage reached node 3"
    );
}
