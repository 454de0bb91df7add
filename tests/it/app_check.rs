//! Issue 21: an app's hook health (the app label on the hook metrics, the
//! in-memory window over real gate traffic) and `switchboard app check`
//! against a fake app on a real socket answering well, late, wrongly
//! typed and not at all.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use crate::support::hub::ADMIN_TOKEN;
use crate::support::{werewolf_manifest, RawSocket, TestHub};

const SLOW_MS: u64 = 150;

fn only_task_create_hooked() -> Value {
    let mut manifest = werewolf_manifest();
    manifest["hooks"] = json!({
        "task_create": {"kind": "hook", "timeoutMs": 5000},
        "message_authorize": {"kind": "forwardAllExceptSender"},
        "dispatch_authorize": {"kind": "grant"}
    });
    manifest
}

async fn health(hub: &TestHub, app_id: &str, bearer: &str) -> (u16, Value) {
    let r = hub
        .http
        .get(format!("{}/api/v1/apps/{app_id}/health", hub.base))
        .bearer_auth(bearer)
        .send()
        .await
        .expect("health");
    let status = r.status().as_u16();
    (status, r.json().await.expect("health body"))
}

/// Ten task requests; the app answers the 5th and the 10th after
/// `SLOW_MS`, the others at once.
#[tokio::test]
async fn the_health_window_and_the_app_label_follow_a_scripted_sequence_of_answers() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let (app_id, app_key) = hub.register_app(&only_task_create_hooked()).await;
    let (_, agent_key) = hub.register_agent("asker").await;
    let mut app = RawSocket::connect_app(&hub.ws_url(), &app_key).await;
    let mut agent = RawSocket::connect_agent(&hub.ws_url(), &agent_key).await;
    // A probe is no traffic: the operator's ping shows in no figure.
    let ping = tokio::spawn({
        let (http, base, app_id) = (hub.http.clone(), hub.base.clone(), app_id.clone());
        async move {
            http.post(format!("{base}/api/v1/apps/{app_id}/ping"))
                .bearer_auth(ADMIN_TOKEN)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    });
    let request = app.recv_request().await;
    app.send_json(&json!({"jsonrpc":"2.0","id": request["id"],"result":{"nonce": request["params"]["nonce"]}}))
        .await;
    assert_eq!(ping.await.unwrap()["outcome"], json!("ok"));

    for i in 1..=10u64 {
        agent
            .send_json(&json!({"jsonrpc":"2.0","id": i,"method":"agent/task/request","params":{"appId": app_id, "invitedAgentIds": []}}))
            .await;
        let hook = app.recv_request().await;
        assert_eq!(hook["method"], json!("app/task/create"));
        assert!(hook["params"].get("check").is_none(), "{hook}");
        if i % 5 == 0 {
            tokio::time::sleep_until(Instant::now() + Duration::from_millis(SLOW_MS)).await;
        }
        app.send_json(
            &json!({"jsonrpc":"2.0","id": hook["id"],"result":{"verdict":{"decision":"Accept"}}}),
        )
        .await;
        let answer = loop {
            let frame = agent.recv().await;
            if frame["id"] == json!(i) {
                break frame;
            }
        };
        assert_eq!(
            answer["result"]["task"]["state"],
            json!("active"),
            "{answer}"
        );
    }

    let (status, figures) = health(&hub, &app_id, ADMIN_TOKEN).await;
    assert_eq!(status, 200, "{figures}");
    assert_eq!(figures["windowSeconds"], json!(300));
    let methods = figures["methods"].as_array().unwrap();
    let gate = |name: &str| {
        methods
            .iter()
            .find(|m| m["gate"] == json!(name))
            .unwrap_or_else(|| panic!("{name} in {figures}"))
    };
    let task = gate("task_create");
    assert_eq!(task["method"], json!("app/task/create"));
    assert_eq!(task["policy"], json!("hook"));
    assert_eq!(task["timeoutMs"], json!(5000));
    assert_eq!(task["count"], json!(10));
    assert_eq!(task["outcomes"], json!({"ok": 10}));
    let (p50, p99) = (
        task["p50Ms"].as_f64().unwrap(),
        task["p99Ms"].as_f64().unwrap(),
    );
    assert!(p50 < SLOW_MS as f64, "the median is a fast answer: {task}");
    assert!(
        p99 >= SLOW_MS as f64,
        "the 99th percentile is a slow one: {task}"
    );
    assert!(p99 < 5000.0, "{task}");
    let message = gate("message_authorize");
    assert_eq!(message["policy"], json!("forwardAllExceptSender"));
    assert_eq!(
        (message["count"].clone(), message["p50Ms"].clone()),
        (json!(0), Value::Null)
    );
    assert!(
        methods
            .iter()
            .all(|m| m["method"] != json!("app/network/ping")),
        "{figures}"
    );

    let label = format!("app=\"{app_id}\"");
    assert_eq!(
        hub.metric("switchboard_hook_calls_total", &label).await,
        10.0
    );
    assert_eq!(
        hub.metric(
            "switchboard_hook_calls_total",
            &format!("{label},method=\"app/task/create\",outcome=\"ok\"")
        )
        .await,
        10.0
    );
    assert_eq!(
        hub.metric("switchboard_hook_call_duration_seconds_count", &label)
            .await,
        10.0
    );
    assert_eq!(
        hub.metric(
            "switchboard_server_calls_total",
            "method=\"app/network/ping\""
        )
        .await,
        1.0
    );

    // The app reads its own figures; another app and an agent cannot.
    let (status, own) = health(&hub, &app_id, &app_key).await;
    assert_eq!(
        (status, own["methods"].clone()),
        (200, figures["methods"].clone())
    );
    let (_, other_key) = hub.register_app(&only_task_create_hooked()).await;
    let (status, body) = health(&hub, &app_id, &other_key).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (404, json!("not_found")),
        "{body}"
    );
    let (status, _) = health(&hub, &app_id, &agent_key).await;
    assert_eq!(status, 403);

    // Uninstalled, the app is called no more and its figures are dropped.
    let r = hub
        .http
        .delete(format!("{}/api/v1/apps/{app_id}/installation", hub.base))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    let (status, after) = health(&hub, &app_id, ADMIN_TOKEN).await;
    assert_eq!(status, 200, "{after}");
    for m in after["methods"].as_array().unwrap() {
        assert_eq!(m["count"], json!(0), "{after}");
    }
}

/// How the fake app answers a check's calls.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Answer {
    Well,
    Late,
    WronglyTyped,
    Never,
}

const GATE_MS: u64 = 300;

fn every_gate_hooked() -> Value {
    let mut manifest = werewolf_manifest();
    let hook = json!({"kind": "hook", "timeoutMs": GATE_MS});
    manifest["hooks"] = json!({
        "task_create": hook,
        "message_authorize": hook,
        "dispatch_authorize": hook
    });
    manifest
}

fn good_result(method: &str) -> Value {
    match method {
        "app/task/create" => json!({"verdict": {"decision": "Accept"}}),
        "app/message/authorize" => json!({"verdict": {"decision": "Forward", "recipients": []}}),
        _ => json!({"admission": {"decision": "grant"}}),
    }
}

fn wrong_result(method: &str) -> Value {
    match method {
        "app/task/create" => json!({"verdict": {"decision": "Maybe"}}),
        "app/message/authorize" => {
            json!({"verdict": {"decision": "Forward", "recipients": "everyone"}})
        }
        _ => json!({"admission": {"decision": "grant", "leaseTimeoutMs": "soon"}}),
    }
}

/// Serves the three calls of one check as `answer` says, checking each is
/// marked and names nothing real; returns the methods in the order asked.
async fn serve_check(app: &mut RawSocket, answer: Answer) -> Vec<String> {
    let mut methods = Vec::new();
    for _ in 0..3 {
        let call = app.recv_request().await;
        let received = Instant::now();
        let method = call["method"].as_str().unwrap().to_string();
        assert_eq!(call["params"]["check"], json!(true), "{call}");
        let result = match answer {
            Answer::Well => Some(good_result(&method)),
            Answer::Late => {
                let after = Duration::from_millis(GATE_MS + 200);
                tokio::time::sleep_until(received + after).await;
                Some(good_result(&method))
            }
            Answer::WronglyTyped => Some(wrong_result(&method)),
            Answer::Never => None,
        };
        if let Some(result) = result {
            app.send_json(&json!({"jsonrpc":"2.0","id": call["id"],"result": result}))
                .await;
        }
        methods.push(method);
    }
    methods
}

/// Runs `switchboard app check ID` as an operator would, in an empty
/// folder with the hub's token in the environment: its exit code and
/// output. The folder stays empty (the check opens no database).
async fn run_check_cli(hub: &TestHub, app_id: &str) -> (i32, String) {
    run_check_cli_with(hub, app_id, ("SWITCHBOARD_ADMIN__TOKEN", ADMIN_TOKEN)).await
}

/// `run_check_cli` with one credential variable: the operator token, or
/// the app's own key (`SWITCHBOARD_APP_KEY`).
async fn run_check_cli_with(
    hub: &TestHub,
    app_id: &str,
    credential: (&str, &str),
) -> (i32, String) {
    let folder = tempfile::tempdir().unwrap();
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["app", "check", app_id, "--hub", &hub.base])
        .current_dir(folder.path())
        .env_remove("SWITCHBOARD_ADMIN__TOKEN")
        .env(credential.0, credential.1)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn switchboard app check");
    let out = child.wait_with_output().await.unwrap();
    let left: Vec<_> = std::fs::read_dir(folder.path()).unwrap().collect();
    assert!(left.is_empty(), "app check wrote {left:?}");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().expect("an exit code"), text)
}

#[tokio::test]
async fn app_check_tells_well_late_wrongly_typed_and_silent_apps_apart() {
    let hub = TestHub::start_with(
        TestHub::fast_options().env("SWITCHBOARD_HOOKS__CHECK_GRACE_MS", 1_500),
    )
    .await;
    let (app_id, app_key) = hub.register_app(&every_gate_hooked()).await;
    let mut app = RawSocket::connect_app(&hub.ws_url(), &app_key).await;
    let cases = [
        (Answer::Well, 0, "ok"),
        (Answer::Late, 4, "late"),
        (Answer::WronglyTyped, 2, "bad_result"),
        (Answer::Never, 5, "timeout"),
    ];
    for (answer, code, outcome) in cases {
        let (cli, methods) =
            tokio::join!(run_check_cli(&hub, &app_id), serve_check(&mut app, answer));
        assert_eq!(
            methods,
            [
                "app/task/create",
                "app/message/authorize",
                "app/dispatch/authorize"
            ]
        );
        let (exit, output) = cli;
        assert_eq!(exit, code, "{answer:?}: {output}");
        let lines: Vec<&str> = output.lines().collect();
        for gate in ["task_create", "message_authorize", "dispatch_authorize"] {
            let line = lines
                .iter()
                .find(|l| l.starts_with(gate))
                .unwrap_or_else(|| panic!("{gate} in {output}"));
            assert!(line.contains(&format!(": {outcome}")), "{answer:?}: {line}");
        }
        match answer {
            Answer::Well => assert!(output.contains("every hook gate answered well in time")),
            Answer::WronglyTyped => {
                // The innermost member the decoder names: inside a tagged
                // verdict it is the verdict itself.
                assert!(
                    output.contains("at /verdict/decision: unknown variant `Maybe`"),
                    "{output}"
                );
                assert!(
                    output.contains("at /verdict: invalid type: string \"everyone\""),
                    "{output}"
                );
                assert!(
                    output.contains("at /admission: invalid type: string \"soon\""),
                    "{output}"
                );
            }
            Answer::Late | Answer::Never => {}
        }
    }
}

async fn check_over_rest(hub: &TestHub, app_id: &str, bearer: &str) -> (u16, Value) {
    let r = hub
        .http
        .post(format!("{}/api/v1/apps/{app_id}/check", hub.base))
        .bearer_auth(bearer)
        .send()
        .await
        .expect("check");
    let status = r.status().as_u16();
    (status, r.json().await.expect("check body"))
}

/// Every row of every table of the hub's SQLite file, by table.
fn row_counts(db: &std::path::Path) -> Vec<(String, i64)> {
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
    let conn = rusqlite::Connection::open_with_flags(db, flags).expect("open the hub's database");
    let mut tables = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap();
    let names: Vec<String> = tables
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    names
        .into_iter()
        .map(|t| {
            let n = conn
                .query_row(&format!("SELECT count(*) FROM \"{t}\""), [], |r| r.get(0))
                .unwrap();
            (t, n)
        })
        .collect()
}

#[tokio::test]
async fn a_check_writes_nothing_and_reaches_no_agent() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let (app_id, app_key) = hub.register_app(&every_gate_hooked()).await;
    let (_, agent_key) = hub.register_agent("bystander").await;
    let mut app = RawSocket::connect_app(&hub.ws_url(), &app_key).await;
    let mut agent = RawSocket::connect_agent(&hub.ws_url(), &agent_key).await;
    let db = hub.dir.path().join("data").join("switchboard.db");
    let before = row_counts(&db);
    assert!(
        before.iter().any(|(t, n)| t == "principals" && *n == 2),
        "{before:?}"
    );

    // The app checks itself with its own key; the operator checks it too.
    for bearer in [app_key.as_str(), ADMIN_TOKEN] {
        let (rest, methods) = tokio::join!(
            check_over_rest(&hub, &app_id, bearer),
            serve_check(&mut app, Answer::Well)
        );
        assert_eq!(methods.len(), 3);
        let (status, body) = rest;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["ok"], json!(true), "{body}");
        for gate in body["gates"].as_array().unwrap() {
            assert_eq!(gate["outcome"], json!("ok"), "{body}");
            assert_eq!(gate["decodes"], json!(true), "{body}");
            assert_eq!(gate["timeoutMs"], json!(GATE_MS));
            assert!(gate["latencyMs"].as_f64().unwrap() <= GATE_MS as f64);
        }
    }
    assert_eq!(row_counts(&db), before, "a check wrote to the store");
    // Anything sent to the agent would arrive before this answer.
    agent
        .send_json(&json!({"jsonrpc":"2.0","id":"after","method":"agent/identity/get","params":{}}))
        .await;
    let first = agent.recv().await;
    assert_eq!(
        first["id"],
        json!("after"),
        "the agent heard of the check: {first}"
    );
    // Nor does it show in the app's live figures.
    let (_, figures) = health(&hub, &app_id, ADMIN_TOKEN).await;
    for m in figures["methods"].as_array().unwrap() {
        assert_eq!(m["count"], json!(0), "{figures}");
    }

    // Another app's key names no app here; an agent's is refused.
    let (_, other_key) = hub.register_app(&every_gate_hooked()).await;
    let (status, _) = check_over_rest(&hub, &app_id, &other_key).await;
    assert_eq!(status, 404);
    let (status, _) = check_over_rest(&hub, &app_id, &agent_key).await;
    assert_eq!(status, 403);
}

#[tokio::test]
async fn a_check_of_an_app_with_no_socket_says_so() {
    let hub = TestHub::start().await;
    let (app_id, _) = hub.register_app(&every_gate_hooked()).await;
    let (exit, output) = run_check_cli(&hub, &app_id).await;
    assert_eq!(exit, 7, "{output}");
    assert_eq!(output.matches(": unavailable").count(), 3, "{output}");
    let (status, body) =
        check_over_rest(&hub, &uuid::Uuid::new_v4().to_string(), ADMIN_TOKEN).await;
    assert_eq!(
        (status, body["error"]["message"].clone()),
        (404, json!("app not found"))
    );
}

#[tokio::test]
async fn an_app_checks_itself_from_the_command_line_with_its_own_key() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let (app_id, app_key) = hub.register_app(&every_gate_hooked()).await;
    let (other_id, _) = hub.register_app(&every_gate_hooked()).await;
    let mut app = RawSocket::connect_app(&hub.ws_url(), &app_key).await;
    let (cli, methods) = tokio::join!(
        run_check_cli_with(&hub, &app_id, ("SWITCHBOARD_APP_KEY", &app_key)),
        serve_check(&mut app, Answer::Well)
    );
    assert_eq!(methods.len(), 3);
    let (code, text) = cli;
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("ok: every hook gate answered well in time"),
        "{text}"
    );
    // Another app's key names no app here: the missing app's answer.
    let (code, text) = run_check_cli_with(&hub, &other_id, ("SWITCHBOARD_APP_KEY", &app_key)).await;
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("404") && text.contains("app not found"),
        "{text}"
    );
    assert!(!text.contains(&app_key), "the key is never printed: {text}");
    // Without a key or a token it says how to give one.
    let (code, text) = run_check_cli_with(&hub, &app_id, ("SWITCHBOARD_LOG__LEVEL", "info")).await;
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("SWITCHBOARD_APP_KEY"), "{text}");
}
