//! A fake webhook receiver: HTTPS on 127.0.0.1 port 0 with a certificate
//! authority made in memory and trusted only by the test's own clients. It
//! verifies every request's Standard Webhooks signature with the keys it is
//! given, and answers by path:
//!
//! | path            | answer                                               |
//! |-----------------|------------------------------------------------------|
//! | `/ok`, `/ok/*`   | 200 with a JSON body                                 |
//! | `/accepted`     | 202, empty                                           |
//! | `/delay`        | nothing, ever (a deadline must end the wait)         |
//! | `/error`        | 500                                                  |
//! | `/redirect`     | 302 to `/ok` on the same host (must not be followed) |
//! | `/big`          | 200 with a body of [`BIG`] bytes and its length      |
//! | `/big-chunked`  | 200 with [`BIG`] bytes in chunks, no length          |
//! | `/invalid-json` | 200 with a body that is not JSON                     |
//! | `/slow-body`    | 200, one chunk, then nothing, ever                   |
//! | `/verified`     | 200 if the signature verifies, 401 otherwise         |
//! | `/hangup`       | the connection closes with no answer                 |
//! | `/app/V/A`      | a scripted app at its `interactionsUrl` (below)      |
//! | `/scripted`     | the next of [`Receiver::script`]'s answers; 200 after |
//! | `/gated`        | 200 once [`Receiver::open_gate`] lets it through      |
//!
//! A scripted app answers the hub's verification ping by `V` (`good`:
//! echoes the nonce and refuses a bad signature with 401; `wrong-echo`:
//! refuses a bad signature, echoes something else; `no-check`: echoes whatever the signature;
//! `stale-once`: holds the first request of its first check until
//! [`Receiver::release`], then answers it wrongly, and is `good` after) and
//! every other request, once its signature verifies (401 otherwise), by
//! `A`: `reply` (200 with a message, [`Receiver::set_reply_text`]),
//! `choices` (200 with two choices), `bad-choices` (200 with an invalid
//! one), `accepted` (202), `delay` (nothing, ever), `error` (500),
//! `redirect` (302 to `/ok`), `big` ([`BIG`] bytes), `invalid-json`.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::{Request, Response};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use switchboard::client::webhooks::{verify, VerificationKey, VerifyError};
use switchboard::webhooks::egress::{EgressClient, Resolver, Roots, Settings};
use switchboard::webhooks::egress_policy::HostPort;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Bytes in the oversized answers.
pub const BIG: usize = 64 * 1024;
/// The names the receiver's certificate covers.
pub const NAMES: [&str; 3] = ["receiver.test", "pin.test", "localhost"];

/// A CA made in memory, with one leaf certificate for [`NAMES`].
pub struct TestCa {
    pub ca_pem: String,
    leaf_der: CertificateDer<'static>,
    leaf_key: Vec<u8>,
}

impl TestCa {
    pub fn new() -> TestCa {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "switchboard test CA");
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let leaf_key = KeyPair::generate().unwrap();
        let leaf = CertificateParams::new(NAMES.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .unwrap()
            .signed_by(&leaf_key, &ca_cert, &ca_key)
            .unwrap();
        TestCa {
            ca_pem: ca_cert.pem(),
            leaf_der: leaf.der().clone(),
            leaf_key: leaf_key.serialize_der(),
        }
    }
}

/// One request as the receiver saw it.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The signature check against the keys held when it arrived.
    pub verified: Result<(), VerifyError>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One answer of `/scripted`.
#[derive(Debug, Clone)]
pub enum Scripted {
    /// This status, with a `Retry-After` header if given.
    Status(u16, Option<&'static str>),
    /// No answer, ever (the request stays in flight).
    Hang,
    /// The connection closes with no answer.
    HangUp,
}

#[derive(Default)]
struct Shared {
    script: Mutex<VecDeque<Scripted>>,
    /// TCP connections accepted.
    connections: AtomicUsize,
    received: Mutex<Vec<Received>>,
    arrived: Notify,
    keys: Mutex<Vec<VerificationKey>>,
    /// The text of a scripted app's `reply`.
    reply_text: Mutex<String>,
    /// The scripts whose first request a `stale-once` app holds (or held).
    held: Mutex<std::collections::HashSet<String>>,
    /// Set by [`Receiver::release`]: held requests are answered.
    released: std::sync::atomic::AtomicBool,
    release: Notify,
    /// What `/gated` waits on: one permit per request let through.
    gate: Gate,
}

/// A semaphore that starts closed.
struct Gate(tokio::sync::Semaphore);

impl Default for Gate {
    fn default() -> Gate {
        Gate(tokio::sync::Semaphore::new(0))
    }
}

pub struct Receiver {
    pub addr: SocketAddr,
    pub ca: TestCa,
    shared: Arc<Shared>,
    stop: CancellationToken,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Receiver {
    pub async fn start() -> Receiver {
        let ca = TestCa::new();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![ca.leaf_der.clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ca.leaf_key.clone())),
            )
            .unwrap();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared::default());
        let stop = CancellationToken::new();
        let (s, st) = (shared.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                let (tcp, _) = tokio::select! {
                    _ = st.cancelled() => return,
                    accepted = listener.accept() => match accepted {
                        Ok(a) => a,
                        Err(_) => continue,
                    },
                };
                s.connections.fetch_add(1, Ordering::SeqCst);
                let (acceptor, s, st) = (acceptor.clone(), s.clone(), st.clone());
                let for_answers = st.clone();
                tokio::spawn(async move {
                    let serve = async move {
                        let Ok(tls) = acceptor.accept(tcp).await else {
                            return;
                        };
                        let service = hyper::service::service_fn(move |req| {
                            let (s, st) = (s.clone(), for_answers.clone());
                            async move { answer(req, addr, s, st).await.ok_or("scripted hang-up") }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                            .await;
                    };
                    tokio::select! {
                        _ = st.cancelled() => {}
                        _ = serve => {}
                    }
                });
            }
        });
        Receiver {
            addr,
            ca,
            shared,
            stop,
        }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn url(&self, host: &str, path: &str) -> String {
        format!("https://{host}:{}{path}", self.port())
    }

    /// The answers `/scripted` gives next, in order; 200 once they are
    /// spent.
    pub fn script(&self, answers: &[Scripted]) {
        self.shared
            .script
            .lock()
            .unwrap()
            .extend(answers.iter().cloned());
    }

    /// The requests that arrived on `path`, in order.
    pub fn received_on(&self, path: &str) -> Vec<Received> {
        self.received()
            .into_iter()
            .filter(|r| r.path == path)
            .collect()
    }

    /// Waits until `n` requests have arrived on `path`.
    pub async fn wait_on(&self, path: &str, n: usize) -> Vec<Received> {
        tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                let arrived = self.shared.arrived.notified();
                let got = self.received_on(path);
                if got.len() >= n {
                    return got;
                }
                arrived.await;
            }
        })
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{n} requests on {path}: got {}",
                self.received_on(path).len()
            )
        })
    }

    /// Answers the requests a `stale-once` app holds.
    pub fn release(&self) {
        self.shared.released.store(true, Ordering::SeqCst);
        self.shared.release.notify_waiters();
    }

    /// Lets `n` more requests on `/gated` through (each is recorded when it
    /// arrives, and answered 200 once let through).
    pub fn open_gate(&self, n: usize) {
        self.shared.gate.0.add_permits(n);
    }

    /// The keys signatures are checked with from now on.
    pub fn trust_keys(&self, keys: Vec<VerificationKey>) {
        *self.shared.keys.lock().unwrap() = keys;
    }

    /// The text a scripted app's `reply` carries from now on.
    pub fn set_reply_text(&self, text: &str) {
        *self.shared.reply_text.lock().unwrap() = text.to_string();
    }

    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }

    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap().clone()
    }

    /// Waits until `n` requests have arrived (a deadline, not a sleep).
    pub async fn wait_for(&self, n: usize) -> Vec<Received> {
        tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let arrived = self.shared.arrived.notified();
                let got = self.received();
                if got.len() >= n {
                    return got;
                }
                arrived.await;
            }
        })
        .await
        .expect("the receiver got the requests")
    }

    /// An egress client that trusts only this receiver's CA, resolves
    /// through `resolver`, and allows `allow` (with `private` on the private
    /// override).
    pub fn client(
        &self,
        resolver: Arc<ScriptedResolver>,
        allow: &[&str],
        private: &[&str],
        request_timeout: Duration,
    ) -> EgressClient {
        let parse = |v: &[&str]| v.iter().map(|e| HostPort::parse(e).unwrap()).collect();
        EgressClient::new(
            "test",
            Settings {
                allowlist: parse(allow),
                private_override: parse(private),
                connect_timeout: request_timeout,
                request_timeout,
                max_response_bytes: BIG - 1,
                roots: Roots {
                    built_in: false,
                    extra_pem: self.ca.ca_pem.clone().into_bytes(),
                },
                user_agent: "switchboard-test".into(),
            },
            resolver,
        )
        .unwrap()
    }
}

type Body = BoxBody<Bytes, Infallible>;

fn full(status: u16, body: impl Into<Bytes>) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(body.into()).boxed())
        .unwrap()
}

async fn answer(
    req: Request<Incoming>,
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: CancellationToken,
) -> Option<Response<Body>> {
    let path = req.uri().path().to_string();
    let headers: Vec<(String, String)> = req
        .headers()
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes().to_vec())
        .unwrap_or_default();
    let find = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let keys = shared.keys.lock().unwrap().clone();
    let now = chrono::Utc::now().timestamp();
    let verified = verify(
        &find("webhook-id"),
        &find("webhook-timestamp"),
        &find("webhook-signature"),
        &body,
        &keys,
        now,
        300,
    );
    let ok = verified.is_ok();
    let webhook_id = find("webhook-id");
    shared.received.lock().unwrap().push(Received {
        path: path.clone(),
        headers,
        body: body.clone(),
        verified,
    });
    shared.arrived.notify_waiters();
    if let Some(script) = path.strip_prefix("/app/") {
        return Some(scripted(script, &body, ok, &webhook_id, addr, &shared, stop).await);
    }
    let scripted = match path.as_str() {
        "/scripted" => shared.script.lock().unwrap().pop_front(),
        _ => None,
    };
    match scripted {
        Some(Scripted::HangUp) => return None,
        Some(Scripted::Hang) => {
            stop.cancelled().await;
            return None;
        }
        Some(Scripted::Status(status, retry_after)) => {
            let mut r = full(status, r#"{"scripted":true}"#);
            if let Some(v) = retry_after {
                r.headers_mut().insert("retry-after", v.parse().unwrap());
            }
            return Some(r);
        }
        None => {}
    }
    Some(match path.as_str() {
        "/hangup" => return None,
        "/gated" => {
            tokio::select! {
                permit = shared.gate.0.acquire() => permit.expect("the gate stays open").forget(),
                _ = stop.cancelled() => return None,
            }
            full(200, r#"{"received":true}"#)
        }
        "/scripted" => full(200, r#"{"received":true}"#),
        "/ok" => full(200, r#"{"received":true}"#),
        p if p.starts_with("/ok/") => full(200, r#"{"received":true}"#),
        "/accepted" => full(202, Bytes::new()),
        "/delay" => {
            stop.cancelled().await;
            full(200, "{}")
        }
        "/error" => full(500, r#"{"error":"scripted"}"#),
        "/redirect" => Response::builder()
            .status(302)
            .header(
                "location",
                format!("https://receiver.test:{}/ok", addr.port()),
            )
            .body(Full::new(Bytes::new()).boxed())
            .unwrap(),
        "/big" => full(200, vec![b'x'; BIG]),
        "/big-chunked" => {
            let chunks = (0..BIG / 1024)
                .map(|_| Ok::<_, Infallible>(Frame::data(Bytes::from(vec![b'x'; 1024]))));
            Response::builder()
                .status(200)
                .body(BodyExt::boxed(StreamBody::new(futures_util::stream::iter(
                    chunks,
                ))))
                .unwrap()
        }
        "/invalid-json" => full(200, "{not json"),
        "/slow-body" => {
            let first = futures_util::stream::once(async {
                Ok::<_, Infallible>(Frame::data(Bytes::from_static(b"{\"partial\":")))
            });
            let rest = futures_util::stream::once(async move {
                stop.cancelled().await;
                Ok::<_, Infallible>(Frame::data(Bytes::from_static(b"true}")))
            });
            use futures_util::StreamExt;
            Response::builder()
                .status(200)
                .body(BodyExt::boxed(StreamBody::new(first.chain(rest))))
                .unwrap()
        }
        "/verified" if ok => full(200, r#"{"verified":true}"#),
        "/verified" => full(401, r#"{"verified":false}"#),
        _ => full(404, "{}"),
    })
}

fn json(status: u16, value: serde_json::Value) -> Response<Body> {
    full(status, serde_json::to_vec(&value).unwrap())
}

/// A scripted app's answer: `script` is `V/A` of the module's table.
async fn scripted(
    script: &str,
    body: &[u8],
    signed: bool,
    webhook_id: &str,
    addr: SocketAddr,
    shared: &Shared,
    stop: CancellationToken,
) -> Response<Body> {
    use serde_json::json;
    let (verify, answer) = script.split_once('/').unwrap_or((script, "reply"));
    let event: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    if event["type"] == "app/interactions_url/ping" {
        let nonce = event["payload"]["nonce"].clone();
        if verify == "stale-once" && shared.held.lock().unwrap().insert(script.to_string()) {
            held(shared).await;
            // Wrong either way: the ping's echo, or a 200 to the bad
            // signature.
            return json(
                200,
                json!({"nonce": if signed { json!("not-the-nonce") } else { nonce }}),
            );
        }
        return match verify {
            "wrong-echo" if signed => json(200, json!({"nonce": "not-the-nonce"})),
            "no-check" => json(200, json!({ "nonce": nonce })),
            _ if !signed => full(401, r#"{"verified":false}"#),
            _ => json(200, json!({ "nonce": nonce })),
        };
    }
    if !signed {
        return full(401, r#"{"verified":false}"#);
    }
    match answer {
        "reply" => {
            let text = shared.reply_text.lock().unwrap().clone();
            let text = if text.is_empty() {
                "ticket filed".to_string()
            } else {
                text
            };
            json(
                200,
                json!({"clientMsgId": format!("reply-{webhook_id}"),
                       "parts": [{"type": "text", "text": text}]}),
            )
        }
        "choices" => json(
            200,
            json!({"choices": [{"name": "Alpha", "value": "alpha"}, {"name": "Beta", "value": "beta"}]}),
        ),
        "bad-choices" => json(200, json!({"choices": [{"name": "", "value": "x"}]})),
        "accepted" => full(202, Bytes::new()),
        "delay" => {
            stop.cancelled().await;
            full(200, "{}")
        }
        "error" => full(500, r#"{"error":"scripted"}"#),
        "redirect" => Response::builder()
            .status(302)
            .header("location", format!("https://localhost:{}/ok", addr.port()))
            .body(Full::new(Bytes::new()).boxed())
            .unwrap(),
        "big" => full(200, vec![b'x'; BIG]),
        "invalid-json" => full(200, "{not json"),
        _ => full(404, "{}"),
    }
}

/// Waits for [`Receiver::release`].
async fn held(shared: &Shared) {
    loop {
        let released = shared.release.notified();
        if shared.released.load(Ordering::SeqCst) {
            return;
        }
        released.await;
    }
}

/// A test-only resolver: each name answers from its script in turn, and
/// the last answer repeats. Unknown names do not resolve.
#[derive(Default)]
pub struct ScriptedResolver {
    answers: Mutex<HashMap<String, VecDeque<Vec<IpAddr>>>>,
    lookups: AtomicUsize,
}

impl ScriptedResolver {
    pub fn new() -> Arc<ScriptedResolver> {
        Arc::new(ScriptedResolver::default())
    }

    pub fn map(self: &Arc<Self>, host: &str, answers: &[&[&str]]) -> Arc<Self> {
        let script = answers
            .iter()
            .map(|a| a.iter().map(|ip| ip.parse().unwrap()).collect())
            .collect();
        self.answers
            .lock()
            .unwrap()
            .insert(host.to_string(), script);
        self.clone()
    }

    pub fn lookups(&self) -> usize {
        self.lookups.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl Resolver for ScriptedResolver {
    async fn lookup(&self, host: &str, _port: u16) -> io::Result<Vec<IpAddr>> {
        self.lookups.fetch_add(1, Ordering::SeqCst);
        let mut answers = self.answers.lock().unwrap();
        let script = answers
            .get_mut(host)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such name"))?;
        if script.len() > 1 {
            Ok(script.pop_front().unwrap())
        } else {
            Ok(script.front().cloned().unwrap_or_default())
        }
    }
}
