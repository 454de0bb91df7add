//! The web console (issue 21 part 3, ADR 0030) against a real hub: the
//! login and its cookies, the refused-credential budget, CSRF, the
//! security headers, the live stream, the actions' shared paths, and that
//! the admin token never reaches a URL or a log line (the page-storage
//! half is the browser suite's, `console/tests/`).

mod session;
pub mod stream;

use reqwest::header::{HeaderMap, COOKIE, SET_COOKIE};
use serde_json::{json, Value};

use crate::support::hub::{Options, TestHub, ADMIN_TOKEN};

/// A logged-in console: the session and CSRF cookies as the browser would
/// send them back.
pub struct Login {
    pub session: String,
    pub csrf: String,
    pub set_cookies: Vec<String>,
}

impl Login {
    pub fn cookie_header(&self) -> String {
        format!("sb_console={}; sb_console_csrf={}", self.session, self.csrf)
    }
}

pub fn cookie_value(set_cookies: &[String], name: &str) -> Option<String> {
    set_cookies.iter().find_map(|c| {
        let first = c.split(';').next()?;
        let (k, v) = first.split_once('=')?;
        (k == name).then(|| v.to_string())
    })
}

pub fn set_cookies(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(SET_COOKIE)
        .iter()
        .map(|v| v.to_str().expect("ascii cookie").to_string())
        .collect()
}

/// `POST /console/api/session` with `token` in the JSON body.
pub async fn post_login(hub: &TestHub, token: &str, extra: &[(&str, &str)]) -> reqwest::Response {
    let mut request = hub
        .http
        .post(format!("{}/console/api/session", hub.base))
        .json(&json!({ "token": token }));
    for (k, v) in extra {
        request = request.header(*k, *v);
    }
    request.send().await.expect("login")
}

pub async fn login(hub: &TestHub) -> Login {
    let response = post_login(hub, ADMIN_TOKEN, &[]).await;
    assert_eq!(response.status().as_u16(), 200);
    let set_cookies = set_cookies(response.headers());
    Login {
        session: cookie_value(&set_cookies, "sb_console").expect("session cookie"),
        csrf: cookie_value(&set_cookies, "sb_console_csrf").expect("csrf cookie"),
        set_cookies,
    }
}

/// `DELETE /console/api/session` with the login's cookies and CSRF token.
pub async fn logout(hub: &TestHub, login: &Login) -> reqwest::Response {
    hub.http
        .delete(format!("{}/console/api/session", hub.base))
        .header(COOKIE, login.cookie_header())
        .header("X-Console-CSRF", &login.csrf)
        .send()
        .await
        .expect("logout")
}

/// A console action: `POST /console/api{path}` with the cookies and,
/// when given, `X-Console-CSRF`.
pub async fn action(hub: &TestHub, login: &Login, path: &str, csrf: Option<&str>) -> (u16, Value) {
    let mut request = hub
        .http
        .post(format!("{}/console/api{path}", hub.base))
        .header(COOKIE, login.cookie_header());
    if let Some(csrf) = csrf {
        request = request.header("X-Console-CSRF", csrf);
    }
    let response = request.send().await.expect("action");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

pub async fn console_hub() -> TestHub {
    TestHub::start_with(TestHub::fast_options().env("SWITCHBOARD_CONSOLE__POLL_INTERVAL_MS", 100))
        .await
}

#[tokio::test]
async fn without_an_admin_token_the_console_is_not_there() {
    let hub = TestHub::start_with(Options::default().env("SWITCHBOARD_ADMIN__TOKEN", "")).await;
    for path in [
        "/console",
        "/console/",
        "/console/assets/console-0000.js",
        "/console/api/session",
        "/console/api/stream",
    ] {
        let r = hub
            .http
            .get(format!("{}{path}", hub.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 404, "{path}");
    }
    let r = post_login(&hub, "", &[]).await;
    assert_eq!(r.status().as_u16(), 404);
}
