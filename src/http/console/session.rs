//! The console's sessions (ADR 0030): the admin token, posted once in a
//! JSON body, is exchanged for a random 256-bit session id in the
//! `sb_console` cookie (HttpOnly, SameSite=Strict, Path=/console) and a
//! CSRF token in `sb_console_csrf` (readable by the page, which echoes it
//! in `X-Console-CSRF` on every action). The hub keeps only the SHA-256 of
//! each, in memory, with an idle and an absolute lifetime; a restart ends
//! every session.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rand::RngCore;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::Console;
use crate::config::ConsoleConfig;
use crate::http::body::checked_json;
use crate::http::error::ApiError;
use crate::http::identity::{json_object, rate_limited};
use crate::hub::Hub;
use crate::telemetry::names;

pub const SESSION_COOKIE: &str = "sb_console";
pub const CSRF_COOKIE: &str = "sb_console_csrf";
pub const CSRF_HEADER: &str = "x-console-csrf";
const COOKIE_PATH: &str = "/console";

type Digest32 = [u8; 32];

fn digest(secret: &str) -> Digest32 {
    Sha256::digest(secret.as_bytes()).into()
}

fn random_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

struct Session {
    csrf: Digest32,
    created: Instant,
    last_used: Instant,
}

/// Why a session is not (or no longer) usable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// No cookie, an unknown id, or a logout.
    Missing,
    Idle,
    Expired,
}

impl Ended {
    pub fn as_str(self) -> &'static str {
        match self {
            Ended::Missing => "logged_out",
            Ended::Idle => "idle",
            Ended::Expired => "expired",
        }
    }
}

/// The hub's console sessions, by the SHA-256 of their id.
pub struct Sessions {
    by_id: Mutex<HashMap<Digest32, Session>>,
    idle: Duration,
    lifetime: Duration,
    capacity: usize,
}

/// Why a request was not let through as the operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refused {
    LoggedOut,
    Csrf,
}

/// A login's two secrets, shown once in its cookies.
pub struct Issued {
    pub id: String,
    pub csrf: String,
}

impl Sessions {
    pub fn new(config: &ConsoleConfig) -> Sessions {
        Sessions {
            by_id: Mutex::new(HashMap::new()),
            idle: Duration::from_secs(config.session_idle_secs),
            lifetime: Duration::from_secs(config.session_max_secs),
            capacity: config.max_sessions,
        }
    }

    fn ended(&self, s: &Session, now: Instant) -> Option<Ended> {
        if now.duration_since(s.created) >= self.lifetime {
            Some(Ended::Expired)
        } else if now.duration_since(s.last_used) >= self.idle {
            Some(Ended::Idle)
        } else {
            None
        }
    }

    /// A new session; past `console.max_sessions` the oldest one ends.
    pub fn issue(&self) -> Issued {
        let issued = Issued {
            id: random_secret(),
            csrf: random_secret(),
        };
        let now = Instant::now();
        let mut by_id = self.by_id.lock().expect("sessions lock");
        by_id.retain(|_, s| self.ended(s, now).is_none());
        while by_id.len() >= self.capacity {
            let oldest = by_id.iter().min_by_key(|(_, s)| s.created).map(|(k, _)| *k);
            match oldest {
                Some(k) => by_id.remove(&k),
                None => break,
            };
        }
        by_id.insert(
            digest(&issued.id),
            Session {
                csrf: digest(&issued.csrf),
                created: now,
                last_used: now,
            },
        );
        issued
    }

    /// Whether the session `id` is live; `touch` counts this as a use (a
    /// page load or an action; the live stream's ticks are not).
    pub fn check(&self, id: &str, touch: bool) -> Result<(), Ended> {
        self.check_at(id, touch, Instant::now())
    }

    fn check_at(&self, id: &str, touch: bool, now: Instant) -> Result<(), Ended> {
        let key = digest(id);
        let mut by_id = self.by_id.lock().expect("sessions lock");
        let Some(session) = by_id.get_mut(&key) else {
            return Err(Ended::Missing);
        };
        if let Some(ended) = self.ended(session, now) {
            by_id.remove(&key);
            return Err(ended);
        }
        if touch {
            session.last_used = now;
        }
        Ok(())
    }

    /// Whether the session `id` may act: live, and, for an action, carrying
    /// its CSRF token. Only a request that passes counts as a use, so a
    /// forged action cannot keep an idle session alive.
    fn admit(&self, id: &str, csrf: Option<&str>, now: Instant) -> Result<(), Refused> {
        self.check_at(id, false, now)
            .map_err(|_| Refused::LoggedOut)?;
        if let Some(presented) = csrf {
            if presented.is_empty() || !self.csrf_matches(id, presented) {
                return Err(Refused::Csrf);
            }
        }
        self.check_at(id, true, now).map_err(|_| Refused::LoggedOut)
    }

    /// Whether `presented` is the CSRF token of the live session `id`,
    /// compared in constant time.
    fn csrf_matches(&self, id: &str, presented: &str) -> bool {
        let by_id = self.by_id.lock().expect("sessions lock");
        by_id
            .get(&digest(id))
            .is_some_and(|s| bool::from(s.csrf.ct_eq(&digest(presented))))
    }

    pub fn end(&self, id: &str) {
        self.by_id
            .lock()
            .expect("sessions lock")
            .remove(&digest(id));
    }

    /// When the session `id` ends at the latest, in seconds from now.
    fn remaining_secs(&self, id: &str) -> Option<u64> {
        let by_id = self.by_id.lock().expect("sessions lock");
        let s = by_id.get(&digest(id))?;
        Some(self.lifetime.saturating_sub(s.created.elapsed()).as_secs())
    }
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
pub fn operator(
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
    match console.sessions.admit(id, presented, Instant::now()) {
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
    let issued = console.sessions.issue();
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
    let live =
        cookie(&headers, SESSION_COOKIE).filter(|id| console.sessions.check(id, true).is_ok());
    Ok(Json(match live {
        Some(id) => json!({
            "authenticated": true,
            "expiresInSeconds": console.sessions.remaining_secs(id),
        }),
        None => json!({ "authenticated": false }),
    }))
}

/// `DELETE /console/api/session` (with the CSRF header): 204, the session
/// ended and both cookies cleared.
pub async fn logout(
    State(hub): State<Arc<Hub>>,
    Extension(console): Extension<Arc<Console>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let id = operator(&hub, &console, &headers, true)?;
    console.sessions.end(&id);
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

    fn sessions(idle: u64, max: u64, capacity: usize) -> Sessions {
        Sessions::new(&ConsoleConfig {
            session_idle_secs: idle,
            session_max_secs: max,
            max_sessions: capacity,
            ..ConsoleConfig::default()
        })
    }

    #[test]
    fn a_session_is_found_by_its_id_only_and_ends_on_logout() {
        let s = sessions(60, 600, 4);
        let issued = s.issue();
        assert_eq!(s.check(&issued.id, true), Ok(()));
        assert_eq!(s.check(&issued.csrf, true), Err(Ended::Missing));
        assert!(s.csrf_matches(&issued.id, &issued.csrf));
        assert!(!s.csrf_matches(&issued.id, &issued.id));
        s.end(&issued.id);
        assert_eq!(s.check(&issued.id, true), Err(Ended::Missing));
        assert!(!s.csrf_matches(&issued.id, &issued.csrf));
    }

    #[test]
    fn past_capacity_the_oldest_session_ends() {
        let s = sessions(60, 600, 2);
        let first = s.issue();
        let second = s.issue();
        let third = s.issue();
        assert_eq!(s.check(&first.id, false), Err(Ended::Missing));
        assert_eq!(s.check(&second.id, false), Ok(()));
        assert_eq!(s.check(&third.id, false), Ok(()));
    }

    #[test]
    fn idle_and_absolute_lifetimes_end_a_session() {
        // Later instants, never earlier ones: an Instant minus a minute
        // panics on a machine booted less than a minute ago.
        let s = sessions(60, 600, 4);
        let issued = s.issue();
        let later = |secs| Instant::now() + Duration::from_secs(secs);
        assert_eq!(s.check_at(&issued.id, true, later(59)), Ok(()));
        assert_eq!(s.check_at(&issued.id, true, later(118)), Ok(()));
        assert_eq!(s.check_at(&issued.id, true, later(180)), Err(Ended::Idle));
        let issued = s.issue();
        for secs in [50, 100, 150, 200, 250, 300, 350, 400, 450, 500, 550] {
            assert_eq!(s.check_at(&issued.id, true, later(secs)), Ok(()));
        }
        assert_eq!(
            s.check_at(&issued.id, true, later(601)),
            Err(Ended::Expired)
        );
    }

    #[test]
    fn a_refused_action_does_not_keep_a_session_alive() {
        let s = sessions(60, 600, 4);
        let issued = s.issue();
        let later = |secs| Instant::now() + Duration::from_secs(secs);
        assert_eq!(
            s.admit(&issued.id, Some("forged"), later(50)),
            Err(Refused::Csrf)
        );
        assert_eq!(s.admit(&issued.id, Some(""), later(55)), Err(Refused::Csrf));
        assert_eq!(
            s.check_at(&issued.id, false, later(61)),
            Err(Ended::Idle),
            "the refused actions were not uses"
        );
        let issued = s.issue();
        assert_eq!(s.admit(&issued.id, Some(&issued.csrf), later(50)), Ok(()));
        assert_eq!(s.admit(&issued.id, None, later(100)), Ok(()));
        assert_eq!(s.check_at(&issued.id, false, later(150)), Ok(()));
        assert_eq!(
            s.admit("unknown", Some(&issued.csrf), later(1)),
            Err(Refused::LoggedOut)
        );
    }

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
