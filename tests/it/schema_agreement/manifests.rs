//! Manifests: `schemas/manifest.schema.json` against
//! `POST /api/v1/apps/register`.

use serde_json::{json, Value};

use super::Verdict::{HubOnly, Invalid, Valid};
use super::{case, chars, judge, validator, with, without, Case};
use crate::support::TestHub;

fn base() -> Value {
    json!({
        "name": "Bounds",
        "description": "An app at the edges",
        "limits": { "maxParticipants": 4 },
        "hooks": {
            "dispatch_authorize": { "kind": "grant" },
            "message_authorize": { "kind": "forwardAllExceptSender" },
            "task_create": { "kind": "accept" }
        }
    })
}

/// A string member of `1..=max` characters without control characters,
/// at each edge, in multi-byte characters (code points are what count),
/// and of the wrong type.
fn text_bounds(out: &mut Vec<Case>, doc: &Value, at: &str, max: usize) {
    let c = |v: Value| with(doc, at, v);
    out.push(case(format!("{at} empty"), c(json!("")), Invalid));
    out.push(case(format!("{at} 1"), c(json!("a")), Valid));
    out.push(case(
        format!("{at} {max}"),
        c(json!(chars('a', max))),
        Valid,
    ));
    out.push(case(
        format!("{at} {max} é"),
        c(json!(chars('é', max))),
        Valid,
    ));
    out.push(case(
        format!("{at} {}", max + 1),
        c(json!(chars('a', max + 1))),
        Invalid,
    ));
    out.push(case(format!("{at} U+0007"), c(json!("a\u{7}b")), Invalid));
    out.push(case(format!("{at} U+009F"), c(json!("a\u{9f}b")), Invalid));
    out.push(case(format!("{at} U+00A0"), c(json!("a\u{a0}b")), Valid));
    out.push(case(format!("{at} number"), c(json!(5)), Invalid));
}

/// An integer member of `min..=max`.
fn integer_bounds(out: &mut Vec<Case>, doc: &Value, at: &str, min: u64, max: u64) {
    let c = |v: Value| with(doc, at, v);
    out.push(case(format!("{at} {min}"), c(json!(min)), Valid));
    out.push(case(format!("{at} {max}"), c(json!(max)), Valid));
    out.push(case(
        format!("{at} {}", max + 1),
        c(json!(max + 1)),
        Invalid,
    ));
    if min > 0 {
        out.push(case(
            format!("{at} {}", min - 1),
            c(json!(min - 1)),
            Invalid,
        ));
    }
    out.push(case(format!("{at} -1"), c(json!(-1)), Invalid));
    out.push(case(format!("{at} 2.5"), c(json!(2.5)), Invalid));
    out.push(case(format!("{at} string"), c(json!("5")), Invalid));
}

fn top_level(out: &mut Vec<Case>) {
    let b = base();
    out.push(case("base", b.clone(), Valid));
    text_bounds(out, &b, "/name", 100);
    text_bounds(out, &b, "/description", 2000);
    integer_bounds(out, &b, "/limits/maxParticipants", 1, 1000);
    for member in ["/name", "/description", "/limits", "/hooks"] {
        out.push(case(
            format!("missing {member}"),
            without(&b, member),
            Invalid,
        ));
    }
    out.push(case(
        "missing /limits/maxParticipants",
        with(&b, "/limits", json!({})),
        Invalid,
    ));
    out.push(case(
        "unknown member",
        with(&b, "/extra", json!(1)),
        Invalid,
    ));
    out.push(case(
        "unknown /limits member",
        with(&b, "/limits/extra", json!(1)),
        Invalid,
    ));
    out.push(case("not an object", json!([1]), Invalid));
    out.push(case(
        "callbackNames moltzap-v1",
        with(&b, "/callbackNames", json!("moltzap-v1")),
        Valid,
    ));
    out.push(case(
        "callbackNames other",
        with(&b, "/callbackNames", json!("v2")),
        Invalid,
    ));
}

fn template(key: &str) -> Value {
    json!({ "key": key, "name": "Room", "participantFilter": "all" })
}

fn conversations(out: &mut Vec<Case>) {
    let b = with(&base(), "/conversations", json!([template("room")]));
    out.push(case("one conversation", b.clone(), Valid));
    let many = |n: usize| {
        json!((0..n)
            .map(|i| template(&format!("k{i}")))
            .collect::<Vec<_>>())
    };
    out.push(case(
        "32 conversations",
        with(&b, "/conversations", many(32)),
        Valid,
    ));
    out.push(case(
        "33 conversations",
        with(&b, "/conversations", many(33)),
        Invalid,
    ));
    out.push(case(
        "conversations not an array",
        with(&b, "/conversations", json!({})),
        Invalid,
    ));
    let key = "/conversations/0/key";
    out.push(case("key empty", with(&b, key, json!("")), Invalid));
    out.push(case("key 64", with(&b, key, json!(chars('k', 64))), Valid));
    out.push(case(
        "key 65",
        with(&b, key, json!(chars('k', 65))),
        Invalid,
    ));
    out.push(case("key a-b_c9", with(&b, key, json!("a-b_c9")), Valid));
    out.push(case("key uppercase", with(&b, key, json!("Room")), Invalid));
    out.push(case("key space", with(&b, key, json!("a b")), Invalid));
    text_bounds(out, &b, "/conversations/0/name", 100);
    let filter = "/conversations/0/participantFilter";
    out.push(case(
        "participantFilter none",
        with(&b, filter, json!("none")),
        Valid,
    ));
    out.push(case(
        "participantFilter some",
        with(&b, filter, json!("some")),
        Invalid,
    ));
    out.push(case(
        "template missing name",
        without(&b, "/conversations/0/name"),
        Invalid,
    ));
    out.push(case(
        "template unknown member",
        with(&b, "/conversations/0/x", json!(1)),
        Invalid,
    ));
    let twice = json!([template("room"), template("room")]);
    out.push(case(
        "duplicate keys",
        with(&b, "/conversations", twice),
        HubOnly,
    ));
}

fn hooks(out: &mut Vec<Case>) {
    let b = base();
    for gate in ["dispatch_authorize", "message_authorize", "task_create"] {
        let at = format!("/hooks/{gate}");
        let hook = with(&b, &at, json!({ "kind": "hook", "timeoutMs": 10 }));
        integer_bounds(out, &hook, &format!("{at}/timeoutMs"), 10, 60_000);
        out.push(case(
            format!("{gate} hook without timeoutMs"),
            with(&b, &at, json!({"kind": "hook"})),
            Invalid,
        ));
        out.push(case(
            format!("{gate} kind other"),
            with(&b, &at, json!({"kind": "maybe"})),
            Invalid,
        ));
        out.push(case(format!("missing {gate}"), without(&b, &at), Invalid));
        let refusing = if gate == "task_create" {
            "reject"
        } else {
            "deny"
        };
        let refused = with(&b, &at, json!({ "kind": refusing, "reason": "no" }));
        out.push(case(format!("{gate} {refusing}"), refused.clone(), Valid));
        out.push(case(
            format!("{gate} {refusing} without reason"),
            with(&b, &at, json!({"kind": refusing})),
            Invalid,
        ));
        out.push(case(
            format!("{gate} {refusing} with timeoutMs"),
            with(&refused, &format!("{at}/timeoutMs"), json!(10)),
            Invalid,
        ));
        if gate == "task_create" {
            text_bounds(out, &refused, &format!("{at}/reason"), 500);
        } else {
            out.push(case(
                format!("{gate} reason 500"),
                with(&refused, &format!("{at}/reason"), json!(chars('r', 500))),
                Valid,
            ));
            out.push(case(
                format!("{gate} reason 501"),
                with(&refused, &format!("{at}/reason"), json!(chars('r', 501))),
                Invalid,
            ));
        }
    }
    out.push(case(
        "hooks unknown gate",
        with(&b, "/hooks/other", json!({"kind": "grant"})),
        Invalid,
    ));
}

fn scopes_and_members(out: &mut Vec<Case>) {
    let b = base();
    out.push(case("scopes empty", with(&b, "/scopes", json!([])), Valid));
    out.push(case(
        "scopes events:subscribe",
        with(&b, "/scopes", json!(["events:subscribe"])),
        Valid,
    ));
    out.push(case(
        "scopes twice",
        with(
            &b,
            "/scopes",
            json!(["events:subscribe", "events:subscribe"]),
        ),
        Invalid,
    ));
    out.push(case(
        "scopes unknown",
        with(&b, "/scopes", json!(["everything"])),
        Invalid,
    ));
    let hook = with(
        &b,
        "/hooks/task_create",
        json!({"kind": "hook", "timeoutMs": 100}),
    );
    out.push(case(
        "hook gate, scopes without events:subscribe",
        with(&hook, "/scopes", json!([])),
        Invalid,
    ));
    out.push(case("hook gate, no scopes member", hook.clone(), Valid));
    let subs = with(&b, "/eventSubscriptions", json!(["app/task/activated"]));
    out.push(case("eventSubscriptions known", subs.clone(), Valid));
    out.push(case(
        "eventSubscriptions without events:subscribe",
        with(&subs, "/scopes", json!([])),
        Invalid,
    ));
    out.push(case(
        "eventSubscriptions unknown",
        with(&b, "/eventSubscriptions", json!(["agent/message/received"])),
        Invalid,
    ));
    out.push(case(
        "eventSubscriptions twice",
        with(
            &b,
            "/eventSubscriptions",
            json!(["app/task/activated", "app/task/activated"]),
        ),
        Invalid,
    ));
    out.push(case(
        "components",
        with(&b, "/components", json!(["button", "form"])),
        Valid,
    ));
    out.push(case(
        "components twice",
        with(&b, "/components", json!(["button", "button"])),
        Invalid,
    ));
    out.push(case(
        "components unknown",
        with(&b, "/components", json!(["slider"])),
        Invalid,
    ));
    out.push(case(
        "delivery gateway",
        with(&b, "/delivery", json!({"mode": "gateway"})),
        Valid,
    ));
    let url = json!({"mode": "gateway", "interactionsUrl": "https://app.example/i"});
    out.push(case(
        "delivery gateway with a URL",
        with(&b, "/delivery", url),
        Invalid,
    ));
    out.push(case(
        "delivery interactions_url without a URL",
        with(&b, "/delivery", json!({"mode": "interactions_url"})),
        Invalid,
    ));
    let null_url = json!({"mode": "interactions_url", "interactionsUrl": null});
    out.push(case(
        "delivery interactions_url null",
        with(&b, "/delivery", null_url),
        Invalid,
    ));
    // The default egress.allowlist is empty: no host is allowed.
    let url = json!({"mode": "interactions_url", "interactionsUrl": "https://app.example/i"});
    out.push(case(
        "delivery interactions_url",
        with(&b, "/delivery", url),
        HubOnly,
    ));
    // Not a URL, or not https, or with user info: the schema refuses what
    // the hub refuses.
    for (name, url) in [
        ("\"0\"", "0"),
        ("http", "http://app.example/i"),
        ("no host", "https:///i"),
        ("user info", "https://me@app.example/i"),
    ] {
        let url = json!({"mode": "interactions_url", "interactionsUrl": url});
        out.push(case(
            format!("delivery interactions_url {name}"),
            with(&b, "/delivery", url),
            Invalid,
        ));
    }
    // An eventsUrl: the same URL rules as an interactionsUrl, in any mode.
    let events = |url: &str| {
        let mut m = with(
            &b,
            "/delivery",
            json!({"mode": "gateway", "eventsUrl": url}),
        );
        m["eventSubscriptions"] = json!(["app/installation/changed"]);
        m
    };
    out.push(case(
        "delivery eventsUrl",
        events("https://app.example/e"),
        HubOnly,
    ));
    for (name, url) in [
        ("\"0\"", "0"),
        ("http", "http://app.example/e"),
        ("no host", "https:///e"),
        ("user info", "https://me@app.example/e"),
    ] {
        out.push(case(
            format!("delivery eventsUrl {name}"),
            events(url),
            Invalid,
        ));
    }
    out.push(case(
        "delivery mode other",
        with(&b, "/delivery", json!({"mode": "carrier-pigeon"})),
        Invalid,
    ));
    out.push(case(
        "delivery unknown member",
        with(&b, "/delivery", json!({"mode": "gateway", "x": 1})),
        Invalid,
    ));
}

fn command(name: &str) -> Value {
    json!({ "name": name, "description": "Does a thing" })
}

fn option(kind: &str) -> Value {
    json!({ "name": "opt", "type": kind, "description": "An option" })
}

fn commands(out: &mut Vec<Case>) {
    let b = with(&base(), "/commands", json!([command("roll")]));
    out.push(case("one command", b.clone(), Valid));
    let many = |n: usize| {
        json!((0..n)
            .map(|i| command(&format!("c{i}")))
            .collect::<Vec<_>>())
    };
    out.push(case(
        "100 commands",
        with(&b, "/commands", many(100)),
        Valid,
    ));
    out.push(case(
        "101 commands",
        with(&b, "/commands", many(101)),
        Invalid,
    ));
    let name = "/commands/0/name";
    out.push(case(
        "command name empty",
        with(&b, name, json!("")),
        Invalid,
    ));
    out.push(case(
        "command name 32",
        with(&b, name, json!(chars('n', 32))),
        Valid,
    ));
    out.push(case(
        "command name 33",
        with(&b, name, json!(chars('n', 33))),
        Invalid,
    ));
    out.push(case(
        "command name uppercase",
        with(&b, name, json!("Roll")),
        Invalid,
    ));
    text_bounds(out, &b, "/commands/0/description", 100);
    out.push(case(
        "requiredLevel other",
        with(&b, "/commands/0/requiredLevel", json!("god")),
        Invalid,
    ));
    out.push(case(
        "command unknown member",
        with(&b, "/commands/0/x", json!(1)),
        Invalid,
    ));
    let twice = json!([command("roll"), command("roll")]);
    out.push(case(
        "duplicate command names",
        with(&b, "/commands", twice),
        HubOnly,
    ));
    let o = with(&b, "/commands/0/options", json!([option("string")]));
    out.push(case("one option", o.clone(), Valid));
    let opts = |n: usize| {
        json!((0..n)
            .map(|i| with(&option("string"), "/name", json!(format!("o{i}"))))
            .collect::<Vec<_>>())
    };
    out.push(case(
        "25 options",
        with(&o, "/commands/0/options", opts(25)),
        Valid,
    ));
    out.push(case(
        "26 options",
        with(&o, "/commands/0/options", opts(26)),
        Invalid,
    ));
    out.push(case(
        "option name 33",
        with(&o, "/commands/0/options/0/name", json!(chars('o', 33))),
        Invalid,
    ));
    out.push(case(
        "option type other",
        with(&o, "/commands/0/options/0/type", json!("date")),
        Invalid,
    ));
    out.push(case(
        "option description 101",
        with(
            &o,
            "/commands/0/options/0/description",
            json!(chars('d', 101)),
        ),
        Invalid,
    ));
    out.push(case(
        "option required string",
        with(&o, "/commands/0/options/0/required", json!("yes")),
        Invalid,
    ));
    option_choices(out, &o);
}

fn option_choices(out: &mut Vec<Case>, o: &Value) {
    let at = "/commands/0/options/0";
    let choice = |v: Value| json!({ "name": "pick", "value": v });
    let choices = |n: usize| {
        json!((0..n)
            .map(|i| choice(json!(format!("v{i}"))))
            .collect::<Vec<_>>())
    };
    let c = with(o, &format!("{at}/choices"), choices(1));
    out.push(case("choices 1", c.clone(), Valid));
    out.push(case(
        "choices 0",
        with(o, &format!("{at}/choices"), json!([])),
        Invalid,
    ));
    out.push(case(
        "choices 25",
        with(o, &format!("{at}/choices"), choices(25)),
        Valid,
    ));
    out.push(case(
        "choices 26",
        with(o, &format!("{at}/choices"), choices(26)),
        Invalid,
    ));
    text_bounds(out, &c, &format!("{at}/choices/0/name"), 100);
    out.push(case(
        "string choice value empty",
        with(&c, &format!("{at}/choices/0/value"), json!("")),
        Invalid,
    ));
    out.push(case(
        "string choice value 101",
        with(&c, &format!("{at}/choices/0/value"), json!(chars('v', 101))),
        Invalid,
    ));
    out.push(case(
        "string option, integer value",
        with(&c, &format!("{at}/choices/0/value"), json!(3)),
        Invalid,
    ));
    let int = with(&c, &format!("{at}/type"), json!("integer"));
    out.push(case("integer option, string value", int.clone(), Invalid));
    out.push(case(
        "integer option, integer value",
        with(&int, &format!("{at}/choices/0/value"), json!(3)),
        Valid,
    ));
    out.push(case(
        "integer option, fraction",
        with(&int, &format!("{at}/choices/0/value"), json!(3.5)),
        Invalid,
    ));
    let num = with(&c, &format!("{at}/type"), json!("number"));
    out.push(case(
        "number option, number value",
        with(&num, &format!("{at}/choices/0/value"), json!(3.5)),
        Valid,
    ));
    out.push(case("number option, string value", num, Invalid));
    out.push(case(
        "boolean option with choices",
        with(&c, &format!("{at}/type"), json!("boolean")),
        Invalid,
    ));
    let auto = with(o, &format!("{at}/autocomplete"), json!(true));
    out.push(case("string option autocomplete", auto.clone(), Valid));
    out.push(case(
        "autocomplete and choices",
        with(&auto, &format!("{at}/choices"), choices(1)),
        Invalid,
    ));
    out.push(case(
        "principal option autocomplete",
        with(&auto, &format!("{at}/type"), json!("principal")),
        Invalid,
    ));
    let off = with(o, &format!("{at}/autocomplete"), json!(false));
    out.push(case(
        "channel option autocomplete false",
        with(&off, &format!("{at}/type"), json!("channel")),
        Valid,
    ));
}

pub fn corpus() -> Vec<Case> {
    let mut out = Vec::new();
    top_level(&mut out);
    conversations(&mut out);
    hooks(&mut out);
    scopes_and_members(&mut out);
    commands(&mut out);
    out
}

#[tokio::test]
async fn manifests_agree_with_the_hub_on_every_case() {
    let hub = TestHub::start_with(TestHub::fast_options()).await;
    let schema = validator("manifest.schema.json");
    let corpus = corpus();
    let mut problems = Vec::new();
    for c in &corpus {
        let schema_valid = schema.is_valid(&c.doc);
        let (status, body) = hub
            .post("/api/v1/apps/register", &json!({ "manifest": c.doc }))
            .await;
        let hub_valid = match status {
            201 => true,
            400 if body["error"]["code"] == "invalid_manifest" => false,
            _ => panic!("{}: the hub answered {status} {body}", c.name),
        };
        problems.extend(judge(c, schema_valid, hub_valid));
    }
    eprintln!("schema agreement: {} manifest cases", corpus.len());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
