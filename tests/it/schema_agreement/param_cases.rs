//! The params corpus: for each method, cases at and just past every bound,
//! wrong types, missing and unknown members, and the rules beyond the
//! schema ([`HubOnly`]).

use serde_json::{json, Value};
use uuid::Uuid;

use super::params::{Caller, Group, World, FRESH_TASK};
use super::Verdict::{HubOnly, Invalid, Valid};
use super::{case, chars, with, without, Case};

fn page_cases(base: &Value) -> Vec<Case> {
    let mut out = Vec::new();
    for (n, verdict) in [(0, Invalid), (1, Valid), (200, Valid), (201, Invalid)] {
        out.push(case(
            format!("limit {n}"),
            with(base, "/limit", json!(n)),
            verdict,
        ));
    }
    out.push(case(
        "limit string",
        with(base, "/limit", json!("9")),
        Invalid,
    ));
    out.push(case("limit -1", with(base, "/limit", json!(-1)), Invalid));
    out.push(case(
        "after not a uuid",
        with(base, "/after", json!("nope")),
        Invalid,
    ));
    out.push(case(
        "unknown member",
        with(base, "/extra", json!(1)),
        Invalid,
    ));
    out.push(case("no params", base.clone(), Valid));
    out
}

pub(super) fn conversation_create(w: &World) -> Group {
    let b = w.others[0].id;
    let c = w.others[1].id;
    let group = json!({"kind": "group", "participants": [b]});
    let all: Vec<Uuid> = w.others.iter().map(|a| a.id).collect();
    let mut too_many = all.clone();
    too_many.push(Uuid::now_v7());
    let mut cases = vec![
        case(
            "direct",
            json!({"kind": "direct", "participants": [b]}),
            Valid,
        ),
        case(
            "direct none",
            json!({"kind": "direct", "participants": []}),
            Invalid,
        ),
        case(
            "direct two",
            json!({"kind": "direct", "participants": [b, c]}),
            Invalid,
        ),
        case(
            "direct named",
            json!({"kind": "direct", "participants": [b], "name": "x"}),
            Invalid,
        ),
        case(
            "direct name null",
            json!({"kind": "direct", "participants": [b], "name": null}),
            Valid,
        ),
        case("group", group.clone(), Valid),
        case(
            "group none",
            with(&group, "/participants", json!([])),
            Invalid,
        ),
        case(
            "group twice",
            with(&group, "/participants", json!([b, b])),
            Invalid,
        ),
        case(
            "group 255 others",
            with(&group, "/participants", json!(all)),
            Valid,
        ),
        case(
            "group 256 others",
            with(&group, "/participants", json!(too_many)),
            Invalid,
        ),
        case(
            "group with the caller",
            with(&group, "/participants", json!([b, w.caller.id])),
            HubOnly,
        ),
        case(
            "participant not a uuid",
            with(&group, "/participants", json!(["x"])),
            Invalid,
        ),
        case(
            "kind other",
            with(&group, "/kind", json!("channel")),
            Invalid,
        ),
        case("missing kind", without(&group, "/kind"), Invalid),
        case("unknown member", with(&group, "/extra", json!(1)), Invalid),
        case("name null", with(&group, "/name", Value::Null), Valid),
    ];
    name_cases(&mut cases, &group, "/name");
    Group {
        method: "agent/conversation/create",
        caller: Caller::Agent,
        cases,
    }
}

/// A name of 1 to 100 characters without control characters.
fn name_cases(out: &mut Vec<Case>, doc: &Value, at: &str) {
    out.push(case(
        format!("{at} empty"),
        with(doc, at, json!("")),
        Invalid,
    ));
    out.push(case(
        format!("{at} 100"),
        with(doc, at, json!(chars('n', 100))),
        Valid,
    ));
    out.push(case(
        format!("{at} 100 é"),
        with(doc, at, json!(chars('é', 100))),
        Valid,
    ));
    out.push(case(
        format!("{at} 101"),
        with(doc, at, json!(chars('n', 101))),
        Invalid,
    ));
    out.push(case(
        format!("{at} U+001F"),
        with(doc, at, json!("a\u{1f}")),
        Invalid,
    ));
    out.push(case(
        format!("{at} U+007F"),
        with(doc, at, json!("a\u{7f}")),
        Invalid,
    ));
    out.push(case(
        format!("{at} number"),
        with(doc, at, json!(1)),
        Invalid,
    ));
}

fn text(s: &str) -> Value {
    json!({"type": "text", "text": s})
}

fn data(v: Value) -> Value {
    json!({"type": "data", "data": v})
}

pub(super) fn message_send(w: &World) -> Group {
    let base = json!({"conversationId": w.direct, "parts": [text("hi")]});
    let parts = |n: usize| json!((0..n).map(|i| text(&format!("p{i}"))).collect::<Vec<_>>());
    let mut deep = json!(1);
    for _ in 0..121 {
        deep = json!([deep]);
    }
    let mime = |m: Value| json!([{"type": "data", "data": {"a": 1}, "mimeType": m}]);
    let p = "/parts";
    let mut cases = vec![
        case("one text part", base.clone(), Valid),
        case("no parts", with(&base, p, json!([])), Invalid),
        case("16 parts", with(&base, p, parts(16)), Valid),
        case("17 parts", with(&base, p, parts(17)), Invalid),
        case("parts not an array", with(&base, p, json!("hi")), Invalid),
        case("text empty", with(&base, p, json!([text("")])), Invalid),
        case(
            "text number",
            with(&base, p, json!([{"type": "text", "text": 1}])),
            Invalid,
        ),
        case(
            "text missing",
            with(&base, p, json!([{"type": "text"}])),
            Invalid,
        ),
        case(
            "part type other",
            with(&base, p, json!([{"type": "image", "text": "x"}])),
            Invalid,
        ),
        case(
            "text part extra member",
            with(&base, p, json!([{"type": "text", "text": "x", "y": 1}])),
            Invalid,
        ),
        case(
            "text part with mimeType",
            with(
                &base,
                p,
                json!([{"type": "text", "text": "x", "mimeType": "a/b"}]),
            ),
            Invalid,
        ),
        case(
            "data object",
            with(&base, p, json!([data(json!({"a": [1, "b", true]}))])),
            Valid,
        ),
        case(
            "data scalar",
            with(&base, p, json!([data(json!(7))])),
            Valid,
        ),
        case(
            "data null",
            with(&base, p, json!([data(Value::Null)])),
            Invalid,
        ),
        case(
            "data nested null",
            with(&base, p, json!([data(json!({"a": null}))])),
            Invalid,
        ),
        case(
            "data null in array",
            with(&base, p, json!([data(json!([1, [null]]))])),
            Invalid,
        ),
        case(
            "data missing",
            with(&base, p, json!([{"type": "data"}])),
            Invalid,
        ),
        case(
            "data 121 deep",
            with(&base, p, json!([data(deep)])),
            HubOnly,
        ),
        case(
            "65537 text bytes",
            with(&base, p, json!([text(&chars('b', 65_537))])),
            HubOnly,
        ),
        case("mimeType empty", with(&base, p, mime(json!(""))), Invalid),
        case(
            "mimeType 255",
            with(&base, p, mime(json!(chars('m', 255)))),
            Valid,
        ),
        case(
            "mimeType 255 é",
            with(&base, p, mime(json!(chars('é', 255)))),
            Valid,
        ),
        case(
            "mimeType 256",
            with(&base, p, mime(json!(chars('m', 256)))),
            Invalid,
        ),
        case("mimeType null", with(&base, p, mime(Value::Null)), Valid),
        case(
            "conversationId not a uuid",
            with(&base, "/conversationId", json!("c")),
            Invalid,
        ),
        case(
            "missing conversationId",
            without(&base, "/conversationId"),
            Invalid,
        ),
        case("missing parts", without(&base, p), Invalid),
        case("unknown member", with(&base, "/extra", json!(1)), Invalid),
        case(
            "replyTo not a uuid",
            with(&base, "/replyTo", json!("r")),
            Invalid,
        ),
    ];
    let id = "/clientMsgId";
    cases.extend([
        case("clientMsgId empty", with(&base, id, json!("")), Invalid),
        case("clientMsgId 1", with(&base, id, json!("1")), Valid),
        case(
            "clientMsgId 128",
            with(&base, id, json!(chars('i', 128))),
            Valid,
        ),
        case(
            "clientMsgId 128 é",
            with(&base, id, json!(chars('é', 128))),
            Valid,
        ),
        case(
            "clientMsgId 129",
            with(&base, id, json!(chars('i', 129))),
            Invalid,
        ),
        case(
            "clientMsgId U+0000",
            with(&base, id, json!("a\u{0}")),
            Invalid,
        ),
        case("clientMsgId number", with(&base, id, json!(5)), Invalid),
    ]);
    Group {
        method: "agent/message/send",
        caller: Caller::Agent,
        cases,
    }
}

pub(super) fn message_list(w: &World) -> Group {
    let base = json!({"conversationId": w.direct});
    let max = i64::MAX as u64;
    let mut cases: Vec<Case> = page_cases(&base)
        .into_iter()
        .filter(|c| !c.name.starts_with("after") && c.name != "no params")
        .collect();
    cases.extend([
        case("after i64 max", with(&base, "/after", json!(max)), Valid),
        case(
            "after i64 max + 1",
            with(&base, "/after", json!(max + 1)),
            Invalid,
        ),
        case("before i64 max", with(&base, "/before", json!(max)), Valid),
        case(
            "before i64 max + 1",
            with(&base, "/before", json!(max + 1)),
            Invalid,
        ),
        case("after -1", with(&base, "/after", json!(-1)), Invalid),
        case(
            "after and before",
            with(&with(&base, "/after", json!(1)), "/before", json!(9)),
            Invalid,
        ),
        case(
            "after null and before",
            with(&with(&base, "/after", Value::Null), "/before", json!(9)),
            Valid,
        ),
        case(
            "threadId outside a channel",
            with(&base, "/threadId", json!(Uuid::now_v7())),
            HubOnly,
        ),
        case("missing conversationId", json!({}), Invalid),
    ]);
    Group {
        method: "agent/message/list",
        caller: Caller::Agent,
        cases,
    }
}

pub(super) fn lists() -> Vec<Group> {
    let base = json!({});
    [
        "agent/conversation/list",
        "agent/task/list",
        "agent/channel/list",
    ]
    .into_iter()
    .map(|method| Group {
        method,
        caller: Caller::Agent,
        cases: page_cases(&base),
    })
    .collect()
}

pub(super) fn event_ack() -> Group {
    let max = i64::MAX as u64;
    let cases = vec![
        case("seq 0", json!({"seq": 0}), Valid),
        case("seq i64 max", json!({"seq": max}), HubOnly),
        case("seq i64 max + 1", json!({"seq": max + 1}), Invalid),
        case("seq -1", json!({"seq": -1}), Invalid),
        case("seq string", json!({"seq": "1"}), Invalid),
        case("missing seq", json!({}), Invalid),
    ];
    Group {
        method: "agent/event/ack",
        caller: Caller::Agent,
        cases,
    }
}

pub(super) fn task_request(w: &World) -> Group {
    let b = w.others[0].id;
    let base = json!({"appId": w.app_id, "invitedAgentIds": [b]});
    let ic = with(
        &base,
        "/initialConversation",
        json!({"name": "Start", "participants": [w.caller.id, b]}),
    );
    let four: Vec<Uuid> = w.others[..4].iter().map(|a| a.id).collect();
    let mut cases = vec![
        case("one invited", base.clone(), Valid),
        case(
            "nobody invited",
            with(&base, "/invitedAgentIds", json!([])),
            Valid,
        ),
        case(
            "invited twice",
            with(&base, "/invitedAgentIds", json!([b, b])),
            Invalid,
        ),
        case(
            "the caller invited",
            with(&base, "/invitedAgentIds", json!([w.caller.id])),
            HubOnly,
        ),
        case(
            "beyond the app's maxParticipants",
            with(&base, "/invitedAgentIds", json!(four)),
            HubOnly,
        ),
        case(
            "appId not a uuid",
            with(&base, "/appId", json!("app")),
            Invalid,
        ),
        case(
            "missing invitedAgentIds",
            without(&base, "/invitedAgentIds"),
            Invalid,
        ),
        case("initialConversation", ic.clone(), Valid),
        case(
            "initialConversation twice",
            with(&ic, "/initialConversation/participants", json!([b, b])),
            Invalid,
        ),
        case(
            "initialConversation outsider",
            with(
                &ic,
                "/initialConversation/participants",
                json!([w.others[1].id]),
            ),
            HubOnly,
        ),
        case(
            "initialConversation unknown member",
            with(&ic, "/initialConversation/x", json!(1)),
            Invalid,
        ),
    ];
    name_cases(&mut cases, &ic, "/initialConversation/name");
    Group {
        method: "agent/task/request",
        caller: Caller::Agent,
        cases,
    }
}

pub(super) fn task_close() -> Group {
    let base = json!({"taskId": FRESH_TASK});
    let r = "/reason";
    let cases = vec![
        case("no reason", base.clone(), Valid),
        case("reason empty", with(&base, r, json!("")), Valid),
        case("reason 500", with(&base, r, json!(chars('r', 500))), Valid),
        case(
            "reason 500 é",
            with(&base, r, json!(chars('é', 500))),
            Valid,
        ),
        case(
            "reason 501",
            with(&base, r, json!(chars('r', 501))),
            Invalid,
        ),
        case("reason number", with(&base, r, json!(5)), Invalid),
        case("taskId not a uuid", json!({"taskId": "t"}), Invalid),
        case("unknown member", with(&base, "/extra", json!(1)), Invalid),
    ];
    Group {
        method: "app/task/close",
        caller: Caller::App,
        cases,
    }
}

pub(super) fn app_conversations(w: &World) -> Vec<Group> {
    let a = w.caller.id;
    let base = json!({"taskId": w.task, "name": "Side", "participants": [a]});
    let mut create = vec![
        case("one participant", base.clone(), Valid),
        case(
            "participant twice",
            with(&base, "/participants", json!([a, a])),
            Invalid,
        ),
        case("missing name", without(&base, "/name"), Invalid),
        case(
            "missing participants",
            without(&base, "/participants"),
            Invalid,
        ),
    ];
    name_cases(&mut create, &base, "/name");
    let add = json!({"conversationId": w.task_conversation, "participants": [a]});
    let add_cases = vec![
        case("one participant", add.clone(), Valid),
        case(
            "participant twice",
            with(&add, "/participants", json!([a, a])),
            Invalid,
        ),
        case(
            "participant not a uuid",
            with(&add, "/participants", json!([1])),
            Invalid,
        ),
        case("unknown member", with(&add, "/extra", json!(1)), Invalid),
    ];
    vec![
        Group {
            method: "app/conversation/create",
            caller: Caller::App,
            cases: create,
        },
        Group {
            method: "app/conversation/add",
            caller: Caller::App,
            cases: add_cases,
        },
    ]
}

pub(super) fn connect(w: &World) -> Group {
    let key = json!({"agentKey": w.caller.key});
    let max = i64::MAX as u64;
    let resume = |after: Value| with(&key, "/resume", json!({"after": after, "syncEpoch": "e"}));
    let cases = vec![
        case("key", key.clone(), Valid),
        case(
            "protocol 1..1",
            with(&key, "/protocol", json!({"min": 1, "max": 1})),
            Valid,
        ),
        case(
            "protocol min above max",
            with(&key, "/protocol", json!({"min": 2, "max": 1})),
            HubOnly,
        ),
        case(
            "protocol min -1",
            with(&key, "/protocol", json!({"min": -1, "max": 1})),
            Invalid,
        ),
        case(
            "protocol missing max",
            with(&key, "/protocol", json!({"min": 1})),
            Invalid,
        ),
        case("resume after i64 max + 1", resume(json!(max + 1)), Invalid),
        case(
            "resume missing syncEpoch",
            with(&key, "/resume", json!({"after": 1})),
            Invalid,
        ),
        case("agentKey number", json!({"agentKey": 5}), Invalid),
        case("missing agentKey", json!({}), Invalid),
        case("unknown member", with(&key, "/extra", json!(1)), Invalid),
    ];
    Group {
        method: "agent/network/connect",
        caller: Caller::NewSocket,
        cases,
    }
}
