//! The console's session: the refused-credential budget, the cookies'
//! attributes, CSRF on every action, the security headers, and no admin
//! token in a URL or a log line.

use reqwest::header::COOKIE;
use serde_json::{json, Value};

use super::{action, console_hub, cookie_value, login, logout, post_login, set_cookies};
use crate::support::hub::{TestHub, ADMIN_TOKEN};
use crate::support::werewolf_manifest;

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

#[tokio::test]
async fn a_wrong_token_is_refused_counted_and_spends_the_address_budget() {
    let hub = TestHub::start_with(
        TestHub::fast_options()
            .env("SWITCHBOARD_GATEWAY__FAILED_CONNECTS_PER_ADDRESS", 2)
            .env("SWITCHBOARD_GATEWAY__FAILED_CONNECTS_REFILL_PER_MINUTE", 1),
    )
    .await;
    for attempt in 0..2 {
        let r = post_login(&hub, "not-the-operator-token", &[]).await;
        assert_eq!(r.status().as_u16(), 401, "attempt {attempt}");
        assert!(
            set_cookies(r.headers()).is_empty(),
            "no cookie for a refusal"
        );
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], json!("unauthorized"), "{body}");
    }
    assert_eq!(
        hub.metric("switchboard_console_logins_total", "outcome=\"refused\"")
            .await,
        2.0
    );
    // The budget is spent: even the right token is not compared now, and
    // the operator API shares the budget.
    let r = post_login(&hub, ADMIN_TOKEN, &[]).await;
    assert_eq!(r.status().as_u16(), 429);
    assert!(set_cookies(r.headers()).is_empty());
    let audit = hub
        .http
        .get(format!("{}/api/v1/audit", hub.base))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(audit.status().as_u16(), 429);
    assert_eq!(
        hub.metric(
            "switchboard_console_logins_total",
            "outcome=\"rate_limited\""
        )
        .await,
        1.0
    );
    assert_eq!(
        hub.metric("switchboard_console_logins_total", "outcome=\"accepted\"")
            .await,
        0.0
    );
}

#[tokio::test]
async fn the_token_goes_in_a_json_body_only() {
    let hub = console_hub().await;
    let form = hub
        .http
        .post(format!("{}/console/api/session", hub.base))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(format!("token={ADMIN_TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(form.status().as_u16(), 415);
    assert!(set_cookies(form.headers()).is_empty());
    let query = hub
        .http
        .post(format!(
            "{}/console/api/session?token={ADMIN_TOKEN}",
            hub.base
        ))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        query.status().as_u16(),
        400,
        "a token in the query is never read"
    );
    assert!(set_cookies(query.headers()).is_empty());
}

#[tokio::test]
async fn the_session_cookies_are_http_only_strict_and_scoped_to_the_console() {
    let hub = console_hub().await;
    let l = login(&hub).await;
    let session = l
        .set_cookies
        .iter()
        .find(|c| c.starts_with("sb_console="))
        .unwrap();
    let attributes: Vec<&str> = session.split("; ").skip(1).collect();
    assert_eq!(
        attributes,
        [
            "Path=/console",
            "Max-Age=43200",
            "SameSite=Strict",
            "HttpOnly"
        ],
        "{session}"
    );
    assert_eq!(l.session.len(), 43, "256 random bits, base64url");
    assert_ne!(l.session, l.csrf);
    let csrf = l
        .set_cookies
        .iter()
        .find(|c| c.starts_with("sb_console_csrf="))
        .unwrap();
    assert!(!csrf.contains("HttpOnly"), "the page reads it: {csrf}");
    assert!(csrf.contains("SameSite=Strict") && csrf.contains("Path=/console"));
    // Behind a TLS proxy both are Secure.
    let proxied = post_login(&hub, ADMIN_TOKEN, &[("X-Forwarded-Proto", "https")]).await;
    let cookies = set_cookies(proxied.headers());
    assert_eq!(cookies.len(), 2);
    assert!(
        cookies.iter().all(|c| c.ends_with("; Secure")),
        "{cookies:?}"
    );
    // The session answers as live, then not after the logout.
    let status = |cookie: String| {
        let hub = &hub;
        async move {
            let r = hub
                .http
                .get(format!("{}/console/api/session", hub.base))
                .header(COOKIE, cookie)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 200);
            r.json::<Value>().await.unwrap()["authenticated"].clone()
        }
    };
    assert_eq!(status(l.cookie_header()).await, json!(true));
    assert_eq!(status("sb_console=forged".into()).await, json!(false));
    let out = logout(&hub, &l).await;
    assert_eq!(out.status().as_u16(), 204);
    let cleared = set_cookies(out.headers());
    assert_eq!(cookie_value(&cleared, "sb_console").as_deref(), Some(""));
    assert!(
        cleared.iter().all(|c| c.contains("Max-Age=0")),
        "{cleared:?}"
    );
    assert_eq!(status(l.cookie_header()).await, json!(false));
}

#[tokio::test]
async fn actions_are_refused_without_the_sessions_csrf_header() {
    let hub = console_hub().await;
    let (app, _key) = hub.register_app(&werewolf_manifest()).await;
    let l = login(&hub).await;
    let other = login(&hub).await;
    let suspend = format!("/apps/{app}/suspend");
    for csrf in [
        None,
        Some(""),
        Some(other.csrf.as_str()),
        Some(l.session.as_str()),
    ] {
        let (status, body) = action(&hub, &l, &suspend, csrf).await;
        assert_eq!(status, 403, "{csrf:?}: {body}");
        assert_eq!(body["error"]["code"], json!("csrf_refused"), "{body}");
    }
    let r = hub
        .http
        .post(format!("{}/console/api{suspend}", hub.base))
        .header("X-Console-CSRF", &l.csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401, "no session cookie");
    let installation = hub
        .http
        .get(format!("{}/api/v1/apps/{app}/installation", hub.base))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(
        installation["state"],
        json!("active"),
        "nothing was suspended"
    );
    // With the header it is the operator's suspend, audited as the REST
    // route's is.
    let (status, body) = action(&hub, &l, &suspend, Some(&l.csrf)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["installation"]["state"], json!("suspended"));
    let audit = hub
        .http
        .get(format!("{}/api/v1/audit/actions?appId={app}", hub.base))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    let suspends: Vec<&Value> = audit["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["action"] == json!("app.suspend"))
        .collect();
    assert_eq!(suspends.len(), 1, "{audit}");
    assert_eq!(suspends[0]["actorKind"], json!("operator"), "{audit}");
    assert_eq!(suspends[0]["stateAfter"], json!("suspended"), "{audit}");
    let (status, body) = action(&hub, &l, &format!("/apps/{app}/resume"), Some(&l.csrf)).await;
    assert_eq!(
        (status, &body["installation"]["state"]),
        (200, &json!("active"))
    );
}

#[tokio::test]
async fn every_console_answer_carries_the_strict_policy() {
    let hub = console_hub().await;
    let page = hub
        .http
        .get(format!("{}/console", hub.base))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let headers = page.headers().clone();
    let html = page.text().await.unwrap();
    let asset = html
        .split("src=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("the page names its script")
        .to_string();
    assert!(asset.starts_with("/console/assets/console-") && asset.ends_with(".js"));
    assert!(
        !html.contains("<style") && !html.contains("style="),
        "no inline style"
    );
    assert_eq!(
        html.matches("<script").count(),
        1,
        "one script, by src only"
    );
    let script = hub
        .http
        .get(format!("{}{asset}", hub.base))
        .send()
        .await
        .unwrap();
    let missing = hub
        .http
        .get(format!("{}/console/assets/console-0000.js", hub.base))
        .send()
        .await
        .unwrap();
    let api = hub
        .http
        .get(format!("{}/console/api/session", hub.base))
        .send()
        .await
        .unwrap();
    let unknown = hub
        .http
        .get(format!("{}/console/no/such/page", hub.base))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status().as_u16(), 404);
    assert_eq!(unknown.status().as_u16(), 404);
    assert_eq!(unknown.headers()["cache-control"], "no-store");
    for (what, h) in [
        ("page", &headers),
        ("script", script.headers()),
        ("missing", missing.headers()),
        ("unknown", unknown.headers()),
        ("api", api.headers()),
    ] {
        assert_eq!(h["content-security-policy"], CSP, "{what}");
        assert_eq!(h["x-content-type-options"], "nosniff", "{what}");
        assert_eq!(h["referrer-policy"], "no-referrer", "{what}");
        assert_eq!(h["x-frame-options"], "DENY", "{what}");
    }
    assert_eq!(headers["cache-control"], "no-store");
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    assert_eq!(
        script.headers()["cache-control"],
        "public, max-age=31536000, immutable"
    );
    assert_eq!(
        script.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );
    assert_eq!(api.headers()["cache-control"], "no-store");
}

#[tokio::test]
async fn the_admin_token_never_reaches_a_url_or_a_log_line() {
    let hub = console_hub().await;
    let wrong = "wrong-operator-token-9876543210";
    assert_eq!(post_login(&hub, wrong, &[]).await.status().as_u16(), 401);
    let l = login(&hub).await;
    let (app, _key) = hub.register_app(&werewolf_manifest()).await;
    let (status, _) = action(&hub, &l, &format!("/apps/{app}/check"), Some(&l.csrf)).await;
    assert_eq!(status, 200);
    let (status, _) = action(&hub, &l, &format!("/apps/{app}/suspend"), Some(&l.csrf)).await;
    assert_eq!(status, 200);
    // Everything the page is made of, and every answer it was given.
    let page = hub
        .http
        .get(format!("{}/console", hub.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!page.contains(ADMIN_TOKEN));
    for cookie in &l.set_cookies {
        assert!(!cookie.contains(ADMIN_TOKEN), "{cookie}");
    }
    let log = hub.log();
    assert!(
        log.contains("console session started"),
        "the log is captured"
    );
    assert!(log.contains("console login refused"));
    for secret in [ADMIN_TOKEN, wrong, l.session.as_str(), l.csrf.as_str()] {
        assert!(
            !log.contains(secret),
            "a console secret is in the hub's log: {secret}"
        );
    }
}
