//! Every broker error code from its own case, over the run's real channel
//! (seed 003's vocabulary, ADR 0031 §5), and the answers keep the
//! request's id and the channel after a refusal.

use super::{card, install, run};

const ERRORS: &str = r#"
import json
from sb import TOKEN, call, raw, out

def answer(r):
    return {"id": r["id"], "ok": r["ok"], "error": r.get("error"), "message": r.get("message")}

out(bad_token=answer(call("whoami", {}, token="0" * 64)))
out(short_token=answer(call("whoami", {}, token="abc")))
out(capability_denied=answer(call("send_message", {"to": "00000000-0000-0000-0000-000000000000", "text": "x"})))
out(unknown_primitive=answer(call("rooms_create", {})))
out(too_large=answer(raw(json.dumps({"token": TOKEN, "id": 99, "method": "whoami", "params": {"pad": "x" * 5000}}).encode() + b"\n")))
out(bad_json=answer(raw(b'{"token": "' + TOKEN.encode() + b'", "id": 7, "method": \n')))
out(bad_json_tail=answer(raw(b'"whoami"}\n')))
out(duplicate=answer(raw(json.dumps({"token": TOKEN, "id": 8, "method": "whoami"}).encode()[:-1] + b', "id": 9}\n')))
out(bad_params=answer(call("remember", {"key": "k"})))
out(extra_param=answer(call("whoami", {"unexpected": 1})))
first = call("remember", {"key": "one", "value": "1"})
out(first=answer(first))
out(error=answer(call("remember", {"key": "two", "value": "2"})))
r = call("whoami", {})
out(still_served=r["ok"], whoami=json.loads(r["text"]))
"#;

#[tokio::test]
async fn every_broker_error_code_comes_from_its_own_case() {
    let c = card("errors", &["whoami", "remember", "recall"], ERRORS, &[]);
    install(&c, &c.data());
    let ran = run(
        c.dir().to_str().unwrap(),
        &c.data(),
        &[
            ("SWITCHBOARD_HOSTED__BROKER_MAX_LINE_BYTES", "1024"),
            // A persona or profile of its maximum, JSON-escaped at its
            // worst (6 times) with 256 bytes of request, must fit in one
            // line: 6 * 128 + 256 = 1024.
            ("SWITCHBOARD_HOSTED__PERSONA_MAX_BYTES", "128"),
            ("SWITCHBOARD_HOSTED__PROFILE_MAX_BYTES", "128"),
            ("SWITCHBOARD_HOSTED__MEMORY_MAX_KEYS", "1"),
        ],
    )
    .await;
    assert!(ran.ok, "{}\n{}", ran.stdout, ran.stderr);
    let code = |key: &str| {
        let l = ran.line(key);
        (
            l[key]["error"].as_str().map(str::to_string),
            l[key]["id"].clone(),
        )
    };
    assert_eq!(code("bad_token"), (Some("bad_token".into()), 1.into()));
    assert_eq!(code("short_token").0.as_deref(), Some("bad_token"));
    assert_eq!(
        code("capability_denied").0.as_deref(),
        Some("capability_denied")
    );
    assert_eq!(
        code("unknown_primitive").0.as_deref(),
        Some("unknown_primitive")
    );
    assert_eq!(
        code("too_large"),
        (Some("too_large".into()), serde_json::Value::Null)
    );
    // A line that is not JSON cannot tell its id.
    assert_eq!(
        code("bad_json"),
        (Some("bad_request".into()), serde_json::Value::Null)
    );
    assert_eq!(code("bad_json_tail").0.as_deref(), Some("bad_request"));
    assert_eq!(code("duplicate").0.as_deref(), Some("bad_request"));
    let params = ran.line("bad_params")["bad_params"].clone();
    assert_eq!(params["error"], "bad_request");
    assert!(
        params["message"].as_str().unwrap().contains("value"),
        "{params}"
    );
    assert!(
        params["id"].is_number(),
        "a call's params refusal keeps its id"
    );
    assert_eq!(code("extra_param").0.as_deref(), Some("bad_request"));
    assert_eq!(ran.line("first")["first"]["ok"], true);
    let error = ran.line("error")["error"].clone();
    assert_eq!(error["error"], "error");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("hosted.memory_max_keys"),
        "{error}"
    );
    let last = ran.line("still_served");
    assert_eq!(last["still_served"], true);
    assert_eq!(last["whoami"]["cardId"], "errors");
    assert!(
        ran.end().contains(" exited ") && ran.end().contains("exit=0"),
        "{}",
        ran.end()
    );
    // Nothing of the broker's traffic reaches the hub's own log.
    assert!(!ran.stderr.contains("remember"), "{}", ran.stderr);
}
