//! The invoke (ADR 0027 §4, §9): one durable event to the owning app, over
//! the gateway and catch-up, and nothing else: no agent event, no message,
//! no lease. Options are checked naming the option; REST replays write no
//! second event; a suspend racing invokes never lets one reach the app.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

use super::{both, setup, Setup};
use crate::support::event_reader::rest_events;
use crate::support::hub::Options;
use crate::support::raw::RawEvent;
use crate::support::world::{call, method_for, text};
use crate::support::RawSocket;

/// The app's stored `app/command/invoked` events, read by catch-up.
async fn invoked_events(s: &Setup) -> Vec<Value> {
    let (status, body) = rest_events(&s.w.hub, &s.poll.key, "after=0&limit=1000").await;
    assert_eq!(status, 200, "{body}");
    body["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == json!("app/command/invoked"))
        .cloned()
        .collect()
}

/// The next notification of `method` on `s`.
async fn next_event(s: &mut RawSocket, method: &str) -> Value {
    loop {
        let f = s.recv().await;
        if f["method"] == json!(method) {
            return f["params"].clone();
        }
    }
}

async fn app_personal_events_reach_app(options: Options) {
    let s = setup(options).await;
    let vote = s.command_id("vote").await;
    let mut app = RawSocket::connect_app(&s.w.hub.ws_url(), &s.poll.key).await;
    let mut alex = s.w.connect(&s.w.alex).await;
    let r = s
        .invoke(
            &mut alex,
            &s.w.alex,
            vote,
            s.w.general,
            json!({"choice": "yes"}),
        )
        .await;
    let answer = &r["result"];
    assert_eq!(answer["accepted"], json!(true), "{r}");
    assert_eq!(answer["commandId"], json!(vote));
    assert_eq!(answer["conversationId"], json!(s.w.general));
    assert!(answer.get("threadId").is_none(), "the main thread: {r}");
    let event = next_event(&mut app, "app/command/invoked").await;
    assert_eq!(event["audience"], json!(s.poll.id));
    let invocation = &event["payload"]["invocation"];
    assert_eq!(
        *invocation,
        json!({
            "invocationId": answer["invocationId"],
            "commandId": vote,
            "commandName": "vote",
            "conversationId": s.w.general,
            "invokedBy": {"principalId": s.w.alex.id, "kind": "person"},
            "options": {"choice": "yes"},
        })
    );
    // An agent over REST, in a thread: 202, the same event.
    let root = alex
        .call(
            json!("m"),
            "person/message/send",
            json!({"conversationId": s.w.general, "parts": text("root")}),
        )
        .await;
    let root = root["result"]["message"]["id"].clone();
    let body =
        json!({"conversationId": s.w.general, "threadId": root, "options": {"choice": "no"}});
    let path = format!("/api/v1/commands/{vote}/invocations");
    let a = call(&s.w.hub, Method::POST, &path, &s.w.helper.key, Some(body)).await;
    assert_eq!(a.status, 202, "{}", a.body);
    assert_eq!(a.json()["threadId"], root);
    let event = next_event(&mut app, "app/command/invoked").await;
    assert_eq!(
        event["payload"]["invocation"]["invokedBy"]["kind"],
        json!("agent")
    );
    assert_eq!(event["payload"]["invocation"]["threadId"], root);
    // Catch-up holds both, in order.
    let stored = invoked_events(&s).await;
    assert_eq!(stored.len(), 2);
    assert_eq!(
        stored[0]["payload"]["invocation"]["invocationId"],
        answer["invocationId"]
    );
    assert_eq!(
        stored[1]["payload"]["invocation"]["options"],
        json!({"choice": "no"})
    );
}

async fn app_never_triggers_agent(options: Options) {
    let s = setup(options).await;
    let vote = s.command_id("vote").await;
    let mut helper = RawSocket::connect_agent(&s.w.hub.ws_url(), &s.w.helper.key).await;
    let mut alex = s.w.connect(&s.w.alex).await;
    let r = s
        .invoke(
            &mut alex,
            &s.w.alex,
            vote,
            s.w.general,
            json!({"choice": "yes"}),
        )
        .await;
    let invocation = r["result"]["invocationId"].clone();
    assert!(invocation.is_string(), "{r}");
    // A marker after it: the first thing the agent hears is the marker.
    let marker = alex
        .call(
            json!("m"),
            "person/message/send",
            json!({"conversationId": s.w.general, "parts": text("marker")}),
        )
        .await;
    let marker_id = marker["result"]["message"]["id"].clone();
    let first = loop {
        let f = helper.recv().await;
        if f.get("method").is_some() && f.get("id").is_none() {
            break f;
        }
    };
    assert_eq!(first["method"], json!("agent/message/received"), "{first}");
    assert_eq!(first["params"]["payload"]["message"]["id"], marker_id);
    // No message was written by the invoke: the channel holds the marker.
    let history = helper
        .call(
            json!("h"),
            "agent/message/list",
            json!({"conversationId": s.w.general}),
        )
        .await;
    let messages = history["result"]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1, "{history}");
    // And no lease can be taken on the invocation: it is no message.
    let lease = helper
        .call(
            json!("d"),
            "agent/dispatch/request",
            json!({"messageId": invocation, "conversationId": s.w.general}),
        )
        .await;
    assert_eq!(lease["error"]["_tag"], json!("NotFoundError"), "{lease}");
}

async fn options_are_checked_naming_the_option(options: Options) {
    let s = setup(options).await;
    let vote = s.command_id("vote").await;
    let find = s.command_id("find").await;
    let purge = s.command_id("purge").await;
    let mut alex = s.w.connect(&s.w.alex).await;
    let canary = "canary-option-7d1e";
    for (command, options, field) in [
        (vote, json!({}), "options.choice"),
        (vote, json!({"choice": canary}), "options.choice"),
        (
            vote,
            json!({"choice": "yes", "extra": canary}),
            "options.extra",
        ),
        (find, json!({"n": canary}), "options.n"),
        (find, json!({"who": 5}), "options.who"),
    ] {
        let r = s
            .invoke(&mut alex, &s.w.alex, command, s.w.general, options)
            .await;
        assert_eq!(r["error"]["_tag"], json!("InvalidParamsError"), "{r}");
        assert_eq!(r["error"]["data"]["field"], json!(field), "{r}");
        assert!(!r.to_string().contains(canary), "{r}");
    }
    let body = json!({"conversationId": s.w.general, "options": {"choice": canary}});
    let a = call(
        &s.w.hub,
        Method::POST,
        &format!("/api/v1/commands/{vote}/invocations"),
        &s.w.alex.key,
        Some(body),
    )
    .await;
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(
        a.body.contains("/options/choice") && !a.body.contains(canary),
        "{}",
        a.body
    );
    // A thread must be a root of the channel.
    let method = method_for(&s.w.alex, "command/invoke");
    let params = json!({"commandId": vote, "conversationId": s.w.general, "threadId": Uuid::new_v4(), "options": {"choice": "yes"}});
    let r = alex.call(json!("t"), &method, params).await;
    assert_eq!(r["error"]["data"]["field"], json!("threadId"), "{r}");
    // Levels: Sam reads general, so finds; votes and purges are refused.
    let mut sam = s.w.connect(&s.w.sam).await;
    let r = s
        .invoke(&mut sam, &s.w.sam, find, s.w.general, json!({"n": 2}))
        .await;
    assert_eq!(r["result"]["accepted"], json!(true), "{r}");
    for command in [vote, purge] {
        let r = s
            .invoke(
                &mut sam,
                &s.w.sam,
                command,
                s.w.general,
                json!({"choice": "yes"}),
            )
            .await;
        assert_eq!(
            r["error"]["data"]["reason"],
            json!("level_insufficient"),
            "{r}"
        );
    }
    // A channel option names a channel the caller reads; another is
    // hidden exactly as an unknown one.
    let r = s
        .invoke(
            &mut alex,
            &s.w.alex,
            find,
            s.w.general,
            json!({"room": s.w.notes}),
        )
        .await;
    assert_eq!(r["result"]["accepted"], json!(true), "{r}");
    let params = |room: Uuid| json!({"commandId": find, "conversationId": s.w.general, "options": {"room": room}});
    crate::support::raw::same_answer(
        &mut sam,
        "person/command/invoke",
        "NotFoundError",
        s.w.notes,
        params,
    )
    .await;
    assert_eq!(
        invoked_events(&s).await.len(),
        2,
        "only the valid invokes wrote"
    );
}

async fn replays_write_no_second_event(options: Options) {
    let s = setup(options).await;
    let vote = s.command_id("vote").await;
    let path = format!("/api/v1/commands/{vote}/invocations");
    let body = json!({"conversationId": s.w.general, "options": {"choice": "yes"}});
    let post = |key: &'static str| {
        let request =
            s.w.hub
                .http
                .post(format!("{}{path}", s.w.hub.base))
                .bearer_auth(&s.w.alex.key)
                .header("Idempotency-Key", key)
                .json(&body);
        async move { request.send().await.unwrap() }
    };
    let first = post("invoke-1").await;
    assert_eq!(first.status().as_u16(), 202);
    let first: Value = first.json().await.unwrap();
    let again = post("invoke-1").await;
    assert_eq!(again.status().as_u16(), 202);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.json::<Value>().await.unwrap(), first);
    assert_eq!(invoked_events(&s).await.len(), 1);
    // The same key with another body is refused, writing nothing.
    let other =
        s.w.hub
            .http
            .post(format!("{}{path}", s.w.hub.base))
            .bearer_auth(&s.w.alex.key)
            .header("Idempotency-Key", "invoke-1")
            .json(&json!({"conversationId": s.w.general, "options": {"choice": "no"}}))
            .send()
            .await
            .unwrap();
    assert_eq!(other.status().as_u16(), 409);
    // The gateway's clientInvocationId: a repeat is the first, duplicate.
    let mut alex = s.w.connect(&s.w.alex).await;
    let params = json!({"commandId": vote, "conversationId": s.w.general,
        "options": {"choice": "yes"}, "clientInvocationId": "c-1"});
    let one = alex
        .call(json!(1), "person/command/invoke", params.clone())
        .await;
    let two = alex.call(json!(2), "person/command/invoke", params).await;
    assert_eq!(two["result"]["duplicate"], json!(true), "{two}");
    assert_eq!(two["result"]["invocationId"], one["result"]["invocationId"]);
    assert!(one["result"].get("duplicate").is_none());
    assert_eq!(invoked_events(&s).await.len(), 2);
    // Both are the caller's per command: on another command the same key
    // and the same client id are new invokes, never the first's answers.
    let ballot = json!({"command": {"name": "ballot", "description": "Another vote",
        "options": [{"name": "choice", "type": "string", "description": "Anything"}]}});
    let own = format!("/api/v1/apps/{}/commands", s.poll.id);
    let made =
        crate::support::world::expect(&s.w.hub, Method::POST, &own, &s.poll.key, Some(ballot), 201)
            .await;
    let ballot = made["command"]["commandId"].as_str().unwrap().to_string();
    let elsewhere =
        s.w.hub
            .http
            .post(format!(
                "{}/api/v1/commands/{ballot}/invocations",
                s.w.hub.base
            ))
            .bearer_auth(&s.w.alex.key)
            .header("Idempotency-Key", "invoke-1")
            .json(&body)
            .send()
            .await
            .unwrap();
    assert_eq!(elsewhere.status().as_u16(), 202);
    assert!(elsewhere.headers().get("idempotent-replayed").is_none());
    let elsewhere: Value = elsewhere.json().await.unwrap();
    assert_eq!(elsewhere["commandId"], json!(ballot), "{elsewhere}");
    assert_ne!(elsewhere["invocationId"], first["invocationId"]);
    let params = json!({"commandId": ballot, "conversationId": s.w.general,
        "options": {"choice": "yes"}, "clientInvocationId": "c-1"});
    let three = alex.call(json!(3), "person/command/invoke", params).await;
    assert!(three["result"].get("duplicate").is_none(), "{three}");
    assert_ne!(
        three["result"]["invocationId"],
        one["result"]["invocationId"]
    );
    assert_eq!(invoked_events(&s).await.len(), 4);
}

/// How many invoke loops run at once against the suspend.
const LOOPS: usize = 4;

/// One REST invoke of a loop: whether the suspend had returned before it
/// was sent, and its answer.
struct Sent {
    after_suspend: bool,
    status: u16,
    body: Value,
}

/// TestLifecycleRacesInvoke: loops of invokes run before, across and
/// after a suspend. Each answer is 202 with its one event written while
/// the app was active, or the unknown command's 404, audited as a denial
/// whichever check refused it (the decision, or the transaction that found
/// the app suspended); every invoke sent after the suspend returned is
/// 404. The app's socket gets only accepted invocations, then the
/// suspend's close; its stream holds exactly the 202s.
async fn lifecycle_races_invoke(options: Options) {
    let s = setup(options.env("SWITCHBOARD_AUDIT__FLUSH_INTERVAL_MS", 100)).await;
    let vote = s.command_id("vote").await;
    let mut app = RawSocket::connect_app(&s.w.hub.ws_url(), &s.poll.key).await;
    let (suspended_tx, suspended) = watch::channel(false);
    let (landed_tx, mut landed) = watch::channel(0usize);
    let invoke_loop = || {
        let (hub, key, general) = (&s.w.hub, s.w.alex.key.clone(), s.w.general);
        let (suspended, landed_tx) = (suspended.clone(), landed_tx.clone());
        async move {
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut sent = Vec::new();
            loop {
                assert!(Instant::now() < deadline, "the loop never saw the suspend");
                let after_suspend = *suspended.borrow();
                let r = hub
                    .http
                    .post(format!("{}/api/v1/commands/{vote}/invocations", hub.base))
                    .bearer_auth(&key)
                    .json(&json!({"conversationId": general, "options": {"choice": "yes"}}))
                    .send()
                    .await
                    .unwrap();
                let status = r.status().as_u16();
                let body: Value = r.json().await.unwrap();
                if status == 202 {
                    landed_tx.send_modify(|n| *n += 1);
                }
                let done = after_suspend && status == 404;
                sent.push(Sent {
                    after_suspend,
                    status,
                    body,
                });
                if done {
                    return sent;
                }
            }
        }
    };
    let suspend = async {
        // Some invokes landed first: the loops run on both sides of it.
        landed.wait_for(|n| *n >= LOOPS).await.unwrap();
        s.lifecycle("suspend").await;
        suspended_tx.send(true).unwrap();
    };
    let loops = futures_util::future::join_all((0..LOOPS).map(|_| invoke_loop()));
    let (sent, ()) = tokio::join!(loops, suspend);
    let sent: Vec<Sent> = sent.into_iter().flatten().collect();
    let mut accepted = HashSet::new();
    let mut refused: i64 = 0;
    for one in &sent {
        match one.status {
            202 => {
                assert!(
                    !one.after_suspend,
                    "accepted after the suspend: {}",
                    one.body
                );
                accepted.insert(one.body["invocationId"].as_str().unwrap().to_string());
            }
            404 => {
                assert_eq!(
                    one.body["error"]["code"],
                    json!("not_found"),
                    "{}",
                    one.body
                );
                refused += 1;
            }
            other => panic!("{other}: {}", one.body),
        }
    }
    assert!(
        accepted.len() >= LOOPS && refused >= LOOPS as i64,
        "{} {refused}",
        accepted.len()
    );
    // The app's socket: accepted invocations only, then the suspend's close.
    loop {
        match app.next_event().await {
            RawEvent::Text(f) if f["method"] == json!("app/command/invoked") => {
                let id = f["params"]["payload"]["invocation"]["invocationId"].as_str();
                let id = id.unwrap_or_else(|| panic!("{f}")).to_string();
                assert!(
                    accepted.contains(&id),
                    "a refused invoke reached the app: {f}"
                );
            }
            RawEvent::Text(_) => continue,
            RawEvent::Close(c) => {
                assert_eq!(c, Some((4012, "app_suspended".into())));
                break;
            }
            RawEvent::Ended => panic!("the app's socket ended without the suspend's close"),
        }
    }
    // Every 404 is one audited denial of command.invoke.
    let all = super::audit::until_totals(&s.w.hub, &s.w.alex, &[("command.invoke", refused)]).await;
    assert_eq!(super::audit::total(&all, "command.invoke"), refused);
    s.lifecycle("resume").await;
    let stored: HashSet<String> = invoked_events(&s)
        .await
        .iter()
        .map(|e| {
            e["payload"]["invocation"]["invocationId"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(stored, accepted);
}

both!(
    app_personal_events_reach_app,
    app_never_triggers_agent,
    options_are_checked_naming_the_option,
    replays_write_no_second_event,
    lifecycle_races_invoke,
    apps_are_refused_as_callers,
);

/// Apps list, invoke and ask nothing, over REST as on the gateway (where
/// the methods are not theirs): 403 `subject_kind_not_allowed`.
async fn apps_are_refused_as_callers(options: Options) {
    let s = setup(options).await;
    let vote = s.command_id("vote").await;
    let general = s.w.general;
    let body = json!({"conversationId": general, "options": {"choice": "yes"}});
    let ask = json!({"conversationId": general, "option": "who", "value": "a"});
    for (method, path, body) in [
        (
            Method::GET,
            format!("/api/v1/conversations/{general}/commands"),
            None,
        ),
        (
            Method::POST,
            format!("/api/v1/commands/{vote}/invocations"),
            Some(body),
        ),
        (
            Method::POST,
            format!("/api/v1/commands/{vote}/autocomplete"),
            Some(ask),
        ),
    ] {
        let a = call(&s.w.hub, method, &path, &s.poll.key, body).await;
        assert_eq!(a.status, 403, "{path}: {}", a.body);
        assert_eq!(
            a.json()["error"]["reason"],
            json!("subject_kind_not_allowed"),
            "{}",
            a.body
        );
    }
    assert!(invoked_events(&s).await.is_empty());
}
