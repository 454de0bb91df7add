//! The console's login over HTTP (ADR 0030): `POST /console/api/session`
//! exchanges the admin token (a JSON body, checked as `check_admin` does)
//! for the session id in the `sb_console` cookie (HttpOnly,
//! SameSite=Strict, Path=/console) and the CSRF token in `sb_console_csrf`
//! (readable by the page, which echoes it in `X-Console-CSRF` on every
//! action); `GET` says whether the cookie's session is live; `DELETE` ends
//! it, on every node (`session::Sessions` keeps them in the database).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::session::Refused;
use super::Console;
use crate::http::body::checked_json;
use crate::http::error::ApiError;
use crate::http::identity::{json_object, rate_limited};
use crate::hub::Hub;
use crate::store::StoreError;
use crate::telemetry::names;

pub const SESSION_COOKIE: &str = "sb_console";
pub const CSRF_COOKIE: &str = "sb_console_csrf";
pub const CSRF_HEADER: &str = "x-console-csrf";
const COOKIE_PATH: &str = "/console";

/// The sessions could not be read or written: nobody is let in (fail
/// closed), and the page says the hub cannot be reached.
pub fn sessions_unavailable(e: StoreError) -> ApiError {
    tracing::error!(error = %e, "the console's sessions could not be read or written");
    ApiError::unavailable("the console's sessions are unavailable; try again")
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
        .filter(|v| !v.is_empty())
}

fn logged_out() -> ApiError {
    ApiError::unauthorized("log in to the console first")
}

/// The console is the operator's: with no `admin.token` it is not there.
pub fn require_enabled(hub: &Hub) -> Result<(), ApiError> {
    if hub.config.admin.token.is_empty() {
        return Err(ApiError::not_found("no such route"));
    }
    Ok(())
}

/// The operator behind a request: a live session cookie, counted as a use.
/// An action (`csrf`) must also carry the session's CSRF token in
/// `X-Console-CSRF`, which a page of another site cannot read or set.
pub async fn operator(
    hub: &Hub,
    console: &Console,
    headers: &HeaderMap,
    csrf: bool,
) -> Result<String, ApiError> {
    require_enabled(hub)?;
    let id = cookie(headers, SESSION_COOKIE).ok_or_else(logged_out)?;
    let presented = csrf.then(|| {
        headers
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    });
    let admitted = console.sessions.admit(id, presented).await;
    match admitted.map_err(sessions_unavailable)? {
        Ok(()) => Ok(id.to_string()),
        Err(Refused::LoggedOut) => Err(logged_out()),
        Err(Refused::Csrf) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "csrf_refused",
            "console actions need the session's X-Console-CSRF header",
        )),
    }
}

/// `Secure` behind a TLS proxy, or when `console.secure_cookie` says so.
fn secure(hub: &Hub, headers: &HeaderMap) -> bool {
    let forwarded_https = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"));
    hub.config.console.secure_cookie || forwarded_https
}

fn set_cookie(name: &str, value: &str, http_only: bool, max_age: u64, secure: bool) -> HeaderValue {
    let mut cookie =
        format!("{name}={value}; Path={COOKIE_PATH}; Max-Age={max_age}; SameSite=Strict");
    if http_only {
        cookie.push_str("; HttpOnly");
    }
    if secure {
        cookie.push_str("; Secure");
    }
    HeaderValue::from_str(&cookie).expect("cookie values are base64url")
}

fn with_cookies(mut response: Response, cookies: [HeaderValue; 2]) -> Response {
    for c in cookies {
        response.headers_mut().append(header::SET_COOKIE, c);
    }
    response
}

/// The token from `{"token": "..."}`; anything else is a 400 naming it.
fn presented_token(headers: &HeaderMap, body: &Bytes) -> Result<String, ApiError> {
    checked_json(headers, body)?;
    let body = json_object(body, &["token"])?;
    match body.get("token") {
        Some(Value::String(token)) => Ok(token.clone()),
        _ => Err(ApiError::invalid(
            "invalid_request",
            "the request has invalid fields",
            vec![crate::domain::validate::FieldProblem {
                pointer: "/token".into(),
                message: "must be the operator token, a string".into(),
            }],
        )),
    }
}

fn count_login(outcome: &'static str) {
    metrics::counter!(names::CONSOLE_LOGINS, "outcome" => outcome).increment(1);
}

/// The token's check, as `check_admin` makes it: a wrong token spends the
/// source address's budget of refused credentials; while it is spent the
/// token is not compared (429).
async fn check_token(hub: &Hub, remote: SocketAddr, presented: &str) -> Result<(), ApiError> {
    let refused = || ApiError::unauthorized("a valid operator token is required");
    if presented.is_empty() {
        count_login("refused");
        return Err(refused());
    }
    let attempt = match hub.refused_keys.begin(remote.ip(), None).await {
        Ok(attempt) => attempt,
        Err(wait) => {
            count_login("rate_limited");
            return Err(rate_limited(wait, "refused operator tokens"));
        }
    };
    let equal: bool = Sha256::digest(presented.as_bytes())
        .ct_eq(&Sha256::digest(hub.config.admin.token.as_bytes()))
        .into();
    if !equal {
        attempt.refused();
        count_login("refused");
        tracing::info!(remote = %remote.ip(), "console login refused");
        return Err(refused());
    }
    attempt.accepted();
    count_login("accepted");
    Ok(())
}

/// `POST /console/api/session {token}`: 200 `{expiresInSeconds}` with the
/// two cookies.
pub async fn login(
    State(hub): State<Arc<Hub>>,
    Extension(console): Extension<Arc<Console>>,
    ConnectInfo(remote): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    require_enabled(&hub)?;
    let token = presented_token(&headers, &body)?;
    check_token(&hub, remote, &token).await?;
    let issued = console
        .sessions
        .issue()
        .await
        .map_err(sessions_unavailable)?;
    let max_age = hub.config.console.session_max_secs;
    let secure = secure(&hub, &headers);
    tracing::info!(remote = %remote.ip(), "console session started");
    let answer = Json(json!({
        "expiresInSeconds": max_age,
        "idleSeconds": hub.config.console.session_idle_secs,
    }))
    .into_response();
    Ok(with_cookies(
        answer,
        [
            set_cookie(SESSION_COOKIE, &issued.id, true, max_age, secure),
            set_cookie(CSRF_COOKIE, &issued.csrf, false, max_age, secure),
        ],
    ))
}

/// `GET /console/api/session`: `{authenticated}`, 200 either way so the
/// page's first look logs no failed request; a live session counts it as
/// a use.
pub async fn status(
    State(hub): State<Arc<Hub>>,
    Extension(console): Extension<Arc<Console>>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    require_enabled(&hub)?;
    let Some(id) = cookie(&headers, SESSION_COOKIE) else {
        return Ok(Json(json!({ "authenticated": false })));
    };
    let sessions = &console.sessions;
    if sessions
        .check(id, true)
        .await
        .map_err(sessions_unavailable)?
        .is_err()
    {
        return Ok(Json(json!({ "authenticated": false })));
    }
    let remaining = sessions
        .remaining_secs(id)
        .await
        .map_err(sessions_unavailable)?;
    Ok(Json(json!({
        "authenticated": true,
        "expiresInSeconds": remaining,
    })))
}

/// `DELETE /console/api/session` (with the CSRF header): 204, the session
/// ended and both cookies cleared.
pub async fn logout(
    State(hub): State<Arc<Hub>>,
    Extension(console): Extension<Arc<Console>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let id = operator(&hub, &console, &headers, true).await?;
    console
        .sessions
        .end(&id)
        .await
        .map_err(sessions_unavailable)?;
    tracing::info!("console session ended by logout");
    let secure = secure(&hub, &headers);
    Ok(with_cookies(
        StatusCode::NO_CONTENT.into_response(),
        [
            set_cookie(SESSION_COOKIE, "", true, 0, secure),
            set_cookie(CSRF_COOKIE, "", false, 0, secure),
        ],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_read_by_exact_name() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("x_sb_console=no; sb_console_csrf=c; sb_console=yes"),
        );
        assert_eq!(cookie(&h, SESSION_COOKIE), Some("yes"));
        assert_eq!(cookie(&h, CSRF_COOKIE), Some("c"));
        assert_eq!(cookie(&h, "missing"), None);
    }
}
