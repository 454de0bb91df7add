//! The served primitives' own cases (ADR 0031 §6-§7): `whoami`,
//! `remember`/`recall` per app and sized by config, `coord`'s
//! compare-and-set shared by the runs of one app only.

use super::{card, install, run};

const MEMORY: &str = r#"
from sb import call, out, text
out(whoami=text("whoami"))
out(missing=text("recall", {"key": "k"}))
out(stored=text("remember", {"key": "k", "value": "v1"}))
out(again=text("remember", {"key": "k", "value": "v2"}))
out(recalled=text("recall", {"key": "k"}))
out(big=call("remember", {"key": "big", "value": "x" * 65}))
out(long_key=call("remember", {"key": "k" * 9, "value": "x"}))
out(a=text("coord", {"key": "turn", "expect": None, "value": "alice"}))
out(b=text("coord", {"key": "turn", "expect": None, "value": "bob"}))
out(c=text("coord", {"key": "turn", "expect": "alice", "value": "bob"}))
out(d=text("coord", {"key": "turn", "expect": "alice", "value": "carol"}))
out(e=text("coord", {"key": "turn", "expect": "bob", "value": None}))
out(f=text("coord", {"key": "turn", "expect": None, "value": None}))
out(g=text("coord", {"key": "kept", "expect": None, "value": "1"}))
"#;

const SECOND: &str = r#"
from sb import out, text
out(recalled=text("recall", {"key": "k"}))
out(kept=text("coord", {"key": "kept", "expect": None, "value": "2"}))
"#;

#[tokio::test]
async fn memory_and_coord_serve_the_app_and_only_it() {
    let env = [
        ("SWITCHBOARD_HOSTED__MEMORY_VALUE_MAX_BYTES", "64"),
        ("SWITCHBOARD_HOSTED__MEMORY_KEY_MAX_BYTES", "8"),
    ];
    let prims = ["whoami", "remember", "recall", "coord"];
    let c = card("memory", &prims, MEMORY, &[]);
    install(&c, &c.data());
    let ran = run("memory", &c.data(), &env).await;
    assert!(ran.ok, "{}\n{}", ran.stdout, ran.stderr);
    let who = ran.line("whoami")["whoami"].clone();
    assert_eq!(
        (who["cardId"].as_str(), who["version"].as_str()),
        (Some("memory"), Some("1.0.0"))
    );
    assert!(
        who["appId"].as_str().unwrap().len() == 36 && who["runId"].as_str().unwrap().len() == 36
    );
    assert!(ran.line("missing")["missing"]["value"].is_null());
    assert_eq!(ran.line("stored")["stored"]["stored"], true);
    assert_eq!(ran.line("recalled")["recalled"]["value"], "v2");
    assert_eq!(ran.line("big")["big"]["error"], "bad_request");
    assert!(ran.line("big")["big"]["message"]
        .as_str()
        .unwrap()
        .contains("hosted.memory_value_max_bytes"));
    assert_eq!(ran.line("long_key")["long_key"]["error"], "bad_request");
    let cas = |k: &str| ran.line(k)[k].clone();
    assert_eq!(
        cas("a"),
        serde_json::json!({"swapped": true, "value": "alice", "version": 1})
    );
    assert_eq!(
        cas("b"),
        serde_json::json!({"swapped": false, "value": "alice", "version": 1})
    );
    assert_eq!(
        cas("c"),
        serde_json::json!({"swapped": true, "value": "bob", "version": 2})
    );
    assert_eq!(
        cas("d"),
        serde_json::json!({"swapped": false, "value": "bob", "version": 2})
    );
    assert_eq!(
        cas("e"),
        serde_json::json!({"swapped": true, "value": null, "version": 0})
    );
    assert_eq!(
        cas("f"),
        serde_json::json!({"swapped": true, "value": null, "version": 0})
    );
    // A later run of the same card is the same app: same memory and registers.
    let ran = run("memory", &c.data(), &env).await;
    assert!(ran.ok, "{}", ran.stderr);
    assert_eq!(ran.line("missing")["missing"]["value"], "v2");
    assert_eq!(ran.line("g")["g"]["swapped"], false);
    // Another card is another app: nothing of the first one's memory.
    let other = card("other", &prims, SECOND, &[]);
    install(&other, &c.data());
    let ran = run("other", &c.data(), &env).await;
    assert!(ran.ok, "{}\n{}", ran.stdout, ran.stderr);
    assert!(ran.line("recalled")["recalled"]["value"].is_null());
    assert_eq!(ran.line("kept")["kept"]["swapped"], true);
}
