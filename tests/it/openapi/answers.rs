//! The answers of the world (ADR 0020 §6) conform to the document:
//! every call below is judged against its operation's response for the
//! status it got (documented, body schema, required headers), including the
//! ones a fuzzer seldom reaches (a replay under an Idempotency-Key, an
//! install that issues a key, a page of real events, a channel's messages).

use reqwest::Method;
use serde_json::{json, Value};

use super::component_schema;
use crate::support::hub::ADMIN_TOKEN;
use crate::support::world::{call, on_space, principal, text, world, Answer};
use crate::support::TestHub;

/// What is wrong with `answer` as the document's answer of `method
/// template` (the document's path); empty when it conforms.
fn judge(doc: &Value, method: &str, template: &str, answer: &Answer) -> Vec<String> {
    let what = format!("{method} {template} {}", answer.status);
    let Some(response) = doc["paths"][template][method]["responses"]
        .get(answer.status.to_string())
        .cloned()
    else {
        return vec![format!("{what}: status not documented ({})", answer.body)];
    };
    let mut problems = Vec::new();
    if let Some(headers) = response["headers"].as_object() {
        for (name, header) in headers {
            let present = answer
                .headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(name));
            if header["required"] == true && !present {
                problems.push(format!("{what}: header {name} missing"));
            }
        }
    }
    if let Some(schema) = response["content"]["application/json"].get("schema") {
        let validator = component_schema(doc, schema);
        let body = answer.json();
        problems.extend(
            validator
                .iter_errors(&body)
                .map(|e| format!("{what}: {e} at {} in {body}", e.instance_path())),
        );
    }
    problems
}

async fn anonymous(hub: &TestHub, path: &str, body: &Value, idempotency: &str) -> Answer {
    let r = hub
        .http
        .post(format!("{}{path}", hub.base))
        .header("idempotency-key", idempotency)
        .json(body)
        .send()
        .await
        .expect("POST");
    let status = r.status().as_u16();
    let headers = r
        .headers()
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    let body = r.text().await.expect("body");
    Answer {
        status,
        headers,
        body,
    }
}

#[tokio::test]
async fn the_worlds_answers_conform_to_the_document() {
    let w = world(TestHub::fast_options()).await;
    let hub = &w.hub;
    let doc = switchboard::http::openapi::document();
    let (admin, alex) = (ADMIN_TOKEN, w.alex.key.as_str());
    let (support, general, bot) = (w.support, w.general, w.bot.id);
    let mut problems = Vec::new();
    let mut check = |method: &str, template: &str, answer: Answer, status: u16| {
        assert_eq!(
            answer.status, status,
            "{method} {template}: {}",
            answer.body
        );
        problems.extend(judge(&doc, method, template, &answer));
    };

    let agent = json!({"name": "replayed"});
    let first = anonymous(hub, "/api/v1/agents/register", &agent, "k-1").await;
    check("post", "/api/v1/agents/register", first, 201);
    let replay = anonymous(hub, "/api/v1/agents/register", &agent, "k-1").await;
    assert!(replay.json()["keyWithheld"] == true, "{}", replay.body);
    check("post", "/api/v1/agents/register", replay, 201);
    let register = json!({"manifest": crate::support::werewolf_manifest()});
    let app = anonymous(hub, "/api/v1/apps/register", &register, "k-2").await;
    check("post", "/api/v1/apps/register", app, 201);

    let space = format!("/api/v1/spaces/{support}");
    check(
        "get",
        "/api/v1/spaces/{spaceId}",
        call(hub, Method::GET, &space, alex, None).await,
        200,
    );
    let channels = format!("{space}/channels?limit=1");
    let page = call(hub, Method::GET, &channels, alex, None).await;
    assert!(page.json()["nextAfter"].is_string(), "{}", page.body);
    check("get", "/api/v1/spaces/{spaceId}/channels", page, 200);
    let messages = format!("/api/v1/conversations/{general}/messages");
    let sent = call(
        hub,
        Method::POST,
        &messages,
        alex,
        Some(json!({"parts": text("hi")})),
    )
    .await;
    check(
        "post",
        "/api/v1/conversations/{conversationId}/messages",
        sent,
        201,
    );
    let listed = call(hub, Method::GET, &messages, alex, None).await;
    check(
        "get",
        "/api/v1/conversations/{conversationId}/messages",
        listed,
        200,
    );
    let conversation = format!("/api/v1/conversations/{general}");
    let read = call(hub, Method::GET, &conversation, alex, None).await;
    check("get", "/api/v1/conversations/{conversationId}", read, 200);
    let events = call(hub, Method::GET, "/api/v1/events?after=0", &w.sam.key, None).await;
    assert!(
        !events.json()["events"].as_array().unwrap().is_empty(),
        "{}",
        events.body
    );
    check("get", "/api/v1/events", events, 200);
    let owned = call(hub, Method::GET, "/api/v1/people/me/agents", alex, None).await;
    check("get", "/api/v1/people/me/agents", owned, 200);
    let grants = format!("/api/v1/grants?spaceId={support}");
    check(
        "get",
        "/api/v1/grants",
        call(hub, Method::GET, &grants, admin, None).await,
        200,
    );
    let grant =
        json!({"subject": principal(w.sam.id), "place": on_space(w.research), "level": "read"});
    let put = call(hub, Method::POST, "/api/v1/grants", alex, Some(grant)).await;
    check("post", "/api/v1/grants", put, 201);

    let installation = format!("/api/v1/apps/{bot}/installation");
    check(
        "get",
        "/api/v1/apps/{appId}/installation",
        call(hub, Method::GET, &installation, admin, None).await,
        200,
    );
    let suspend = call(
        hub,
        Method::POST,
        &format!("{installation}/suspend"),
        admin,
        None,
    )
    .await;
    check(
        "post",
        "/api/v1/apps/{appId}/installation/suspend",
        suspend,
        200,
    );
    let scopes = json!({"scopes": ["events:subscribe"]});
    let set = call(
        hub,
        Method::PUT,
        &format!("{installation}/scopes"),
        admin,
        Some(scopes),
    )
    .await;
    check("put", "/api/v1/apps/{appId}/installation/scopes", set, 200);
    check(
        "delete",
        "/api/v1/apps/{appId}/installation",
        call(hub, Method::DELETE, &installation, admin, None).await,
        204,
    );
    let installed = call(hub, Method::POST, &installation, admin, None).await;
    assert!(installed.json()["appKey"].is_string(), "{}", installed.body);
    check("post", "/api/v1/apps/{appId}/installation", installed, 201);
    let manifest = format!("/api/v1/apps/{bot}/manifest");
    let upgrade = call(
        hub,
        Method::PUT,
        &manifest,
        admin,
        Some(crate::support::werewolf_manifest()),
    )
    .await;
    check("put", "/api/v1/apps/{appId}/manifest", upgrade, 200);
    let ping = call(
        hub,
        Method::POST,
        &format!("/api/v1/apps/{bot}/ping?timeoutMs=100"),
        admin,
        None,
    )
    .await;
    check("post", "/api/v1/apps/{appId}/ping", ping, 200);

    let actions = call(hub, Method::GET, "/api/v1/audit/actions", admin, None).await;
    check("get", "/api/v1/audit/actions", actions, 200);
    check(
        "get",
        "/api/v1/audit",
        call(hub, Method::GET, "/api/v1/audit", admin, None).await,
        200,
    );
    let rotated = call(hub, Method::POST, "/api/v1/keys/rotate", &w.scout.key, None).await;
    check("post", "/api/v1/keys/rotate", rotated, 200);
    check(
        "get",
        "/api/v1/webhooks/keys",
        call(hub, Method::GET, "/api/v1/webhooks/keys", admin, None).await,
        200,
    );
    let test = json!({"url": "https://hooks.example.com/x"});
    let webhook = call(
        hub,
        Method::POST,
        "/api/v1/webhooks/test",
        admin,
        Some(test),
    )
    .await;
    check("post", "/api/v1/webhooks/test", webhook, 409);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
