//! TestAppAutocomplete over the gateway (ADR 0027 §8): the app answers
//! directly, or defers and answers with `app/autocomplete/answer`; at the
//! deadline the asker gets `[]` and never waits past it; an invalid answer
//! gives `[]`; more choices than `command.autocomplete_max_choices` are
//! cut to it. The options typed so far are checked as an invoke's are.
//! Nothing is stored.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use uuid::Uuid;

use super::{both, setup, Setup};
use crate::support::hub::Options;
use crate::support::RawSocket;

const TIMEOUT_MS: u64 = 800;
/// How late past the deadline an answer may come on a busy 2-core
/// machine and still count as "at the deadline": the hub answers on its
/// timer, this is only the scheduler's slack.
const SLACK: Duration = Duration::from_secs(5);
const MAX_CHOICES: usize = 2;

fn fast(options: Options) -> Options {
    options
        .env("SWITCHBOARD_COMMAND__AUTOCOMPLETE_TIMEOUT_MS", TIMEOUT_MS)
        .env("SWITCHBOARD_COMMAND__AUTOCOMPLETE_MAX_CHOICES", MAX_CHOICES)
}

fn ask(find: Uuid, conversation: Uuid, value: &str) -> Value {
    json!({"commandId": find, "conversationId": conversation, "option": "who", "value": value,
           "options": {"n": 3}})
}

/// Sends the ask on `asker` and returns its request id in flight.
async fn send_ask(asker: &mut RawSocket, id: &str, params: Value) {
    asker
        .send_json(&json!({"jsonrpc": "2.0", "id": id, "method": "person/command/autocomplete", "params": params}))
        .await;
}

async fn answer_of(asker: &mut RawSocket, id: &str) -> Value {
    loop {
        let f = asker.recv().await;
        if f["id"] == json!(id) {
            return f;
        }
    }
}

/// The hub's `app/command/autocomplete` call on the app's socket.
async fn hub_call(app: &mut RawSocket) -> Value {
    let call = app.recv_request().await;
    assert_eq!(call["method"], json!("app/command/autocomplete"), "{call}");
    call
}

async fn reply(app: &mut RawSocket, call: &Value, result: Value) {
    app.send_json(&json!({"jsonrpc": "2.0", "id": call["id"], "result": result}))
        .await;
}

async fn app_autocomplete(options: Options) {
    let s: Setup = setup(fast(options)).await;
    let find = s.command_id("find").await;
    let mut app = RawSocket::connect_app(&s.w.hub.ws_url(), &s.poll.key).await;
    let mut alex = s.w.connect(&s.w.alex).await;

    // Directly: three choices, cut to command.autocomplete_max_choices.
    send_ask(&mut alex, "a1", ask(find, s.w.general, "ro")).await;
    let call = hub_call(&mut app).await;
    let p = &call["params"];
    assert_eq!(p["commandId"], json!(find));
    assert_eq!(p["commandName"], json!("find"));
    assert_eq!(
        (p["option"].clone(), p["value"].clone()),
        (json!("who"), json!("ro"))
    );
    assert_eq!(p["options"], json!({"n": 3}));
    assert_eq!(
        p["invokedBy"],
        json!({"principalId": s.w.alex.id, "kind": "person"})
    );
    assert_eq!(p["deadlineMs"], json!(TIMEOUT_MS));
    let choices = json!([{"name": "Robin", "value": "robin"}, {"name": "Rowan", "value": "rowan"},
                         {"name": "Roy", "value": "roy"}]);
    reply(&mut app, &call, json!({"choices": choices})).await;
    let r = answer_of(&mut alex, "a1").await;
    let shown = json!([{"name": "Robin", "value": "robin"}, {"name": "Rowan", "value": "rowan"}]);
    assert_eq!(r["result"]["choices"], shown, "{r}");
    assert_eq!(shown.as_array().unwrap().len(), MAX_CHOICES);

    // Deferred, then answered before the deadline.
    send_ask(&mut alex, "a2", ask(find, s.w.general, "sa")).await;
    let call = hub_call(&mut app).await;
    reply(&mut app, &call, json!({"deferred": true})).await;
    let request = call["params"]["requestId"].clone();
    let late = json!([{"name": "Sam", "value": "sam"}]);
    let a = app
        .call(
            json!("ans"),
            "app/autocomplete/answer",
            json!({"requestId": request, "choices": late}),
        )
        .await;
    assert_eq!(a["result"]["accepted"], json!(true), "{a}");
    let r = answer_of(&mut alex, "a2").await;
    assert_eq!(r["result"]["choices"], late, "{r}");
    // A second answer to it finds nothing open.
    let a = app
        .call(
            json!("ans2"),
            "app/autocomplete/answer",
            json!({"requestId": request, "choices": late}),
        )
        .await;
    assert_eq!(a["error"]["_tag"], json!("NotFoundError"), "{a}");
    assert_eq!(a["error"]["data"], json!({"requestId": request}));

    // No answer at all: [] at the deadline, never later.
    let started = Instant::now();
    send_ask(&mut alex, "a3", ask(find, s.w.general, "x")).await;
    let _ignored = hub_call(&mut app).await;
    let r = answer_of(&mut alex, "a3").await;
    let waited = started.elapsed();
    assert_eq!(r["result"]["choices"], json!([]), "{r}");
    assert!(
        waited >= Duration::from_millis(TIMEOUT_MS - 50),
        "{waited:?}"
    );
    assert!(
        waited < Duration::from_millis(TIMEOUT_MS) + SLACK,
        "{waited:?}"
    );

    // Deferred and never answered: [] at the deadline; a late answer then
    // finds the request closed.
    let started = Instant::now();
    send_ask(&mut alex, "a4", ask(find, s.w.general, "y")).await;
    let call = hub_call(&mut app).await;
    reply(&mut app, &call, json!({"deferred": true})).await;
    let r = answer_of(&mut alex, "a4").await;
    assert_eq!(r["result"]["choices"], json!([]), "{r}");
    assert!(started.elapsed() < Duration::from_millis(TIMEOUT_MS) + SLACK);
    let a = app
        .call(
            json!("ans3"),
            "app/autocomplete/answer",
            json!({"requestId": call["params"]["requestId"], "choices": []}),
        )
        .await;
    assert_eq!(a["error"]["_tag"], json!("NotFoundError"), "{a}");

    // Invalid answers: a bidi override in a name, a value of another type.
    for bad in [
        json!({"choices": [{"name": "ok", "value": "ok"}, {"name": "evil\u{202e}", "value": "e"}]}),
        json!({"choices": [{"name": "Five", "value": 5}]}),
        json!({"nothing": true}),
    ] {
        send_ask(&mut alex, "a5", ask(find, s.w.general, "z")).await;
        let call = hub_call(&mut app).await;
        reply(&mut app, &call, bad).await;
        let r = answer_of(&mut alex, "a5").await;
        assert_eq!(r["result"]["choices"], json!([]), "{r}");
    }

    // Only options declared with autocomplete are asked about.
    let mut params = ask(find, s.w.general, "z");
    params["option"] = json!("n");
    let r = alex
        .call(json!("a6"), "person/command/autocomplete", params)
        .await;
    assert_eq!(r["error"]["data"]["field"], json!("option"), "{r}");
}

/// The options typed so far are checked as an invoke's are (none required
/// yet): a mistyped or too long one is refused naming it, and a channel the
/// asker cannot read is hidden exactly as an unknown one; the app is never
/// asked.
async fn typed_options_are_checked_as_an_invoke_s(options: Options) {
    let s = setup(fast(options).env("SWITCHBOARD_COMMAND__OPTION_VALUE_MAX_CHARS", 8)).await;
    let find = s.command_id("find").await;
    let mut app = RawSocket::connect_app(&s.w.hub.ws_url(), &s.poll.key).await;
    let mut sam = s.w.connect(&s.w.sam).await;
    let canary = "canary-typed-5c2a";
    for (typed, field) in [
        (json!({"n": canary}), "options.n"),
        (json!({"zzz": 1}), "options.zzz"),
        (json!({"who": "nine char"}), "options.who"),
    ] {
        let mut params = ask(find, s.w.general, "ro");
        params["options"] = typed;
        let r = sam
            .call(json!("t"), "person/command/autocomplete", params)
            .await;
        assert_eq!(r["error"]["data"]["field"], json!(field), "{r}");
        assert!(!r.to_string().contains(canary), "{r}");
    }
    let params = |room: Uuid| {
        let mut p = ask(find, s.w.general, "ro");
        p["options"] = json!({"room": room});
        p
    };
    crate::support::raw::same_answer(
        &mut sam,
        "person/command/autocomplete",
        "NotFoundError",
        s.w.notes,
        params,
    )
    .await;
    // A readable channel and a value of eight are passed on.
    let mut params = ask(find, s.w.general, "ro");
    params["options"] = json!({"room": s.w.general, "who": "eight ch"});
    send_ask(&mut sam, "ok", params).await;
    let call = hub_call(&mut app).await;
    assert_eq!(
        call["params"]["options"],
        json!({"room": s.w.general, "who": "eight ch"})
    );
    reply(&mut app, &call, json!({"choices": []})).await;
    let r = answer_of(&mut sam, "ok").await;
    assert_eq!(r["result"]["choices"], json!([]), "{r}");
}

/// Another app cannot answer a request that is not its own.
async fn an_answer_for_another_app_is_unknown(options: Options) {
    let s = setup(fast(options)).await;
    let find = s.command_id("find").await;
    let mut app = RawSocket::connect_app(&s.w.hub.ws_url(), &s.poll.key).await;
    let mut manifest = super::poll_manifest();
    manifest["name"] = json!("Other");
    let (_, other_key) = s.w.hub.register_app(&manifest).await;
    let mut other = RawSocket::connect_app(&s.w.hub.ws_url(), &other_key).await;
    let mut alex = s.w.connect(&s.w.alex).await;
    send_ask(&mut alex, "a1", ask(find, s.w.general, "q")).await;
    let call = hub_call(&mut app).await;
    reply(&mut app, &call, json!({"deferred": true})).await;
    let params = json!({"requestId": call["params"]["requestId"], "choices": []});
    let a = other
        .call(json!("x"), "app/autocomplete/answer", params)
        .await;
    assert_eq!(a["error"]["_tag"], json!("NotFoundError"), "{a}");
    // The owner's own answer still counts.
    let params =
        json!({"requestId": call["params"]["requestId"], "choices": [{"name": "Q", "value": "q"}]});
    let a = app
        .call(json!("y"), "app/autocomplete/answer", params)
        .await;
    assert_eq!(a["result"]["accepted"], json!(true), "{a}");
    let r = answer_of(&mut alex, "a1").await;
    assert_eq!(r["result"]["choices"], json!([{"name": "Q", "value": "q"}]));
}

/// The Rust SDK's `AppClient` answers the hub's call with a handler, as
/// it answers the gates.
async fn the_sdk_answers_with_a_handler(options: Options) {
    use switchboard::client::AppClient;
    use switchboard::domain::command::Choice;
    use switchboard::protocol::commands::{AppCommandAutocomplete, AutocompleteCallbackAnswer};
    let s = setup(fast(options)).await;
    let find = s.command_id("find").await;
    let _app = AppClient::builder(&s.w.hub.base, &s.poll.key)
        .handle::<AppCommandAutocomplete, _, _>(|call| async move {
            let name = format!("{}!", call.value);
            Ok(AutocompleteCallbackAnswer {
                choices: Some(vec![Choice {
                    name,
                    value: json!(call.value),
                }]),
                deferred: false,
            })
        })
        .connect()
        .await
        .unwrap();
    let mut alex = s.w.connect(&s.w.alex).await;
    let r = alex
        .call(
            json!("a"),
            "person/command/autocomplete",
            ask(find, s.w.general, "rob"),
        )
        .await;
    assert_eq!(
        r["result"]["choices"],
        json!([{"name": "rob!", "value": "rob"}]),
        "{r}"
    );
}

both!(
    app_autocomplete,
    typed_options_are_checked_as_an_invoke_s,
    an_answer_for_another_app_is_unknown,
    the_sdk_answers_with_a_handler,
);
