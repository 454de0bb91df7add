//! The egress client: every request the hub sends to the outside world goes
//! through one, so the SSRF rules hold for all of them.
//!
//! A request passes the URL rules, then the name is resolved once by our own
//! [`Resolver`] and every address vetted. The HTTP client that carries the
//! request is pinned to exactly those addresses and has no resolver of its
//! own, so a second lookup (DNS rebinding) has nothing to rebind. Pinned
//! clients are cached per (host, port), which the allowlist bounds, and
//! replaced when the name resolves to a different set.
//!
//! Nothing here logs or counts a URL path, header, body or signature: only
//! the purpose, the host and the outcome.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::Serialize;

use super::egress_policy::{check_url, vet_addresses, BlockReason, HostPort, Target};
use crate::config::EgressConfig;
use crate::telemetry::names;

/// Name resolution for egress. Production uses the system resolver; tests
/// map names to loopback addresses of their own receivers.
#[async_trait]
pub trait Resolver: Send + Sync + 'static {
    async fn lookup(&self, host: &str, port: u16) -> io::Result<Vec<IpAddr>>;
}

/// The operating system's resolver (getaddrinfo), as `tokio` exposes it.
pub struct SystemResolver;

#[async_trait]
impl Resolver for SystemResolver {
    async fn lookup(&self, host: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        Ok(tokio::net::lookup_host((host, port))
            .await?
            .map(|a| a.ip())
            .collect())
    }
}

/// What became of one request. `Ok` means an HTTP answer arrived, whatever
/// its status; only a 3xx is set apart, because it is never followed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    Ok {
        status: u16,
        #[serde(skip)]
        body: Vec<u8>,
    },
    Timeout,
    Blocked {
        reason: BlockReason,
    },
    Redirect {
        status: u16,
    },
    TooLarge,
    Transport {
        /// `resolve`, `connect` (TCP or TLS), `request` or `body`.
        stage: &'static str,
    },
}

impl Outcome {
    /// The log field and metric label.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Ok { .. } => "ok",
            Outcome::Timeout => "timeout",
            Outcome::Blocked { .. } => "blocked",
            Outcome::Redirect { .. } => "redirect",
            Outcome::TooLarge => "too_large",
            Outcome::Transport { .. } => "transport",
        }
    }
}

/// An outcome with what a retrying sender needs of the answer's headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answered {
    pub outcome: Outcome,
    /// The `Retry-After` header as sent, if any (never logged).
    pub retry_after: Option<String>,
}

/// Trusted roots for TLS. Production trusts the public web PKI, plus the
/// operator's own CA file if set; tests trust only their in-memory CA.
#[derive(Clone)]
pub struct Roots {
    pub built_in: bool,
    /// PEM certificates, each of which must parse as a trust anchor.
    pub extra_pem: Vec<u8>,
}

impl Roots {
    /// One TLS configuration for every pinned client of an egress client, so
    /// a bad CA fails at startup and session resumption survives a client
    /// rebuilt for new addresses. HTTP/1.1 only, as the client speaks it.
    fn tls_config(&self) -> anyhow::Result<rustls::ClientConfig> {
        use rustls::pki_types::{pem::PemObject, CertificateDer};
        let mut store = rustls::RootCertStore::empty();
        if self.built_in {
            store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        }
        let mut added = 0;
        for cert in CertificateDer::pem_slice_iter(&self.extra_pem) {
            let cert = cert.map_err(|e| anyhow::anyhow!("not a PEM certificate: {e}"))?;
            store
                .add(cert)
                .map_err(|e| anyhow::anyhow!("not a usable CA certificate: {e}"))?;
            added += 1;
        }
        anyhow::ensure!(
            self.extra_pem.is_empty() || added > 0,
            "holds no certificate"
        );
        anyhow::ensure!(!store.is_empty(), "no trusted root certificate");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(store)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

#[derive(Clone)]
pub struct Settings {
    pub allowlist: Vec<HostPort>,
    pub private_override: Vec<HostPort>,
    pub connect_timeout: Duration,
    /// From the start of resolution to the last byte of the body.
    pub request_timeout: Duration,
    pub max_response_bytes: usize,
    pub roots: Roots,
    pub user_agent: String,
}

impl Settings {
    pub fn from_config(cfg: &EgressConfig) -> anyhow::Result<Settings> {
        let parse = |key: &str, entries: &[String]| -> anyhow::Result<Vec<HostPort>> {
            entries
                .iter()
                .map(|e| HostPort::parse(e).map_err(|m| anyhow::anyhow!("{key}: {m}")))
                .collect()
        };
        let mut extra_pem = Vec::new();
        if !cfg.extra_ca_file.is_empty() {
            extra_pem = std::fs::read(&cfg.extra_ca_file).map_err(|e| {
                anyhow::anyhow!("egress.extra_ca_file {:?}: {e}", cfg.extra_ca_file)
            })?;
        }
        Ok(Settings {
            allowlist: parse("egress.allowlist", &cfg.allowlist)?,
            private_override: parse("egress.private_override", &cfg.private_override)?,
            connect_timeout: Duration::from_millis(cfg.connect_timeout_ms),
            request_timeout: Duration::from_millis(cfg.request_timeout_ms),
            max_response_bytes: cfg.max_response_bytes,
            roots: Roots {
                built_in: true,
                extra_pem,
            },
            user_agent: format!("switchboard/{}", env!("CARGO_PKG_VERSION")),
        })
    }
}

struct Pinned {
    addrs: Vec<SocketAddr>,
    client: reqwest::Client,
}

pub struct EgressClient {
    /// Names the caller in logs and metrics (`webhook`, `interactions`, ...).
    purpose: &'static str,
    settings: Settings,
    tls: rustls::ClientConfig,
    resolver: Arc<dyn Resolver>,
    pinned: Mutex<HashMap<(String, u16), Pinned>>,
}

impl EgressClient {
    pub fn new(
        purpose: &'static str,
        settings: Settings,
        resolver: Arc<dyn Resolver>,
    ) -> anyhow::Result<Self> {
        Ok(EgressClient {
            purpose,
            tls: settings.roots.tls_config()?,
            settings,
            resolver,
            pinned: Mutex::new(HashMap::new()),
        })
    }

    pub fn from_config(purpose: &'static str, cfg: &EgressConfig) -> anyhow::Result<Self> {
        Self::new(
            purpose,
            Settings::from_config(cfg)?,
            Arc::new(SystemResolver),
        )
        .map_err(|e| anyhow::anyhow!("egress.extra_ca_file {:?}: {e}", cfg.extra_ca_file))
    }

    /// POSTs `body`. Never follows a redirect, never reads more than
    /// `max_response_bytes`, never outlives `request_timeout`.
    pub async fn post(&self, url: &str, headers: &[(&str, &str)], body: Vec<u8>) -> Outcome {
        self.post_answered(url, headers, body).await.outcome
    }

    /// [`post`](Self::post), with the answer's `Retry-After` header (at
    /// most 64 bytes of it, as text) for senders that retry.
    pub async fn post_answered(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Answered {
        let started = Instant::now();
        let mut retry_after = None;
        let (host_label, outcome) = match check_url(
            url,
            &self.settings.allowlist,
            &self.settings.private_override,
        ) {
            Err(reason) => (None, Outcome::Blocked { reason }),
            Ok(target) => {
                let outcome = tokio::time::timeout(
                    self.settings.request_timeout,
                    self.post_to(&target, url, headers, body, &mut retry_after),
                )
                .await
                .unwrap_or(Outcome::Timeout);
                (Some(target.host), outcome)
            }
        };
        self.record(url, host_label, &outcome, started.elapsed());
        Answered {
            outcome,
            retry_after,
        }
    }

    /// The URL rules alone, as [`post`](Self::post) applies them first: a
    /// caller that does work before its request (signing it) asks this
    /// first, and a refusal is counted and logged as `post`'s would be
    /// (`switchboard_egress_blocked_total`), with no lookup and no socket.
    pub fn admit(&self, url: &str) -> Result<(), Outcome> {
        let allowed = check_url(
            url,
            &self.settings.allowlist,
            &self.settings.private_override,
        );
        allowed.map(|_| ()).map_err(|reason| {
            let outcome = Outcome::Blocked { reason };
            self.record(url, None, &outcome, Duration::ZERO);
            outcome
        })
    }

    /// Applies every rule a request would meet before connecting: the URL
    /// rules, then one lookup whose addresses are vetted. Registration uses
    /// it to refuse an unusable URL early; [`post`](Self::post) runs it again
    /// for every request, since what a name resolves to changes.
    pub async fn vet(&self, url: &str) -> Result<Vec<SocketAddr>, Outcome> {
        let target = check_url(
            url,
            &self.settings.allowlist,
            &self.settings.private_override,
        )
        .map_err(|reason| Outcome::Blocked { reason })?;
        let addrs = tokio::time::timeout(self.settings.request_timeout, self.resolve(&target))
            .await
            .unwrap_or(Err(Outcome::Timeout))?;
        Ok(addrs
            .into_iter()
            .map(|ip| SocketAddr::new(ip, target.port))
            .collect())
    }

    async fn resolve(&self, target: &Target) -> Result<Vec<IpAddr>, Outcome> {
        let mut addrs = self
            .resolver
            .lookup(&target.host, target.port)
            .await
            .map_err(|_| Outcome::Transport { stage: "resolve" })?;
        // Keep the resolver's order (its preference) for a newly pinned
        // client;
        // drop repeats only.
        let mut seen = std::collections::HashSet::new();
        addrs.retain(|a| seen.insert(*a));
        vet_addresses(target, &addrs).map_err(|reason| Outcome::Blocked { reason })?;
        Ok(addrs)
    }

    async fn post_to(
        &self,
        target: &Target,
        url: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
        retry_after: &mut Option<String>,
    ) -> Outcome {
        let addrs = match self.resolve(target).await {
            Ok(addrs) => addrs,
            Err(outcome) => return outcome,
        };
        // Send to the canonical spelling of the host, the one the client is
        // pinned for: `Example.COM.` and `example.com` are one target.
        let Some(url) = url::Url::parse(url)
            .ok()
            .and_then(|mut u| u.set_host(Some(&target.host)).ok().map(|_| u))
        else {
            return Outcome::Blocked {
                reason: BlockReason::BadUrl,
            };
        };
        let client = match self.pinned_client(target, &addrs) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(purpose = self.purpose, host = %target.host, error = %e, "building an egress client failed");
                return Outcome::Transport { stage: "request" };
            }
        };
        let mut request = client.post(url).body(body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let mut response = match request.send().await {
            Ok(r) => r,
            Err(e) => return transport(&e, "request"),
        };
        let status = response.status().as_u16();
        *retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .filter(|v| v.len() <= 64)
            .map(str::to_string);
        if response.status().is_redirection() {
            return Outcome::Redirect { status };
        }
        let cap = self.settings.max_response_bytes;
        if response.content_length().is_some_and(|n| n > cap as u64) {
            return Outcome::TooLarge;
        }
        let mut received = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if received.len() + chunk.len() > cap {
                        return Outcome::TooLarge;
                    }
                    received.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => return transport(&e, "body"),
            }
        }
        Outcome::Ok {
            status,
            body: received,
        }
    }

    /// The client pinned to `addrs` for this target, built when the name
    /// first resolves or resolves to a different set (an answer that only
    /// reorders the same addresses keeps the client and its connections).
    fn pinned_client(&self, target: &Target, addrs: &[IpAddr]) -> reqwest::Result<reqwest::Client> {
        let socket_addrs: Vec<SocketAddr> = addrs
            .iter()
            .map(|ip| SocketAddr::new(*ip, target.port))
            .collect();
        let mut set = socket_addrs.clone();
        set.sort();
        let key = (target.host.clone(), target.port);
        let mut pinned = self.pinned.lock().expect("pin cache poisoned");
        if let Some(p) = pinned.get(&key) {
            if p.addrs == set {
                return Ok(p.client.clone());
            }
        }
        let s = &self.settings;
        let builder = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .https_only(true)
            .connect_timeout(s.connect_timeout)
            .user_agent(s.user_agent.clone())
            .dns_resolver(Arc::new(NoLookups))
            .use_preconfigured_tls(self.tls.clone())
            .resolve_to_addrs(&target.host, &socket_addrs);
        let client = builder.build()?;
        pinned.insert(
            key,
            Pinned {
                addrs: set,
                client: client.clone(),
            },
        );
        Ok(client)
    }

    fn record(&self, url: &str, host: Option<String>, outcome: &Outcome, took: Duration) {
        let purpose = self.purpose;
        let label = outcome.label();
        // Hosts off the allowlist come from whoever wrote the URL: log them,
        // but keep them out of metric labels.
        let host_for_log = host.clone().unwrap_or_else(|| {
            url::Url::parse(url)
                .ok()
                .and_then(|u| u.host_str().map(str::to_string))
                .unwrap_or_default()
        });
        let host_label = host.unwrap_or_else(|| "other".to_string());
        metrics::counter!(names::EGRESS_REQUESTS, "purpose" => purpose, "host" => host_label.clone(), "outcome" => label)
            .increment(1);
        metrics::histogram!(names::EGRESS_DURATION, "purpose" => purpose, "host" => host_label, "outcome" => label)
            .record(took.as_secs_f64());
        let ms = took.as_millis() as u64;
        match outcome {
            Outcome::Blocked { reason } => {
                metrics::counter!(names::EGRESS_BLOCKED, "purpose" => purpose, "reason" => reason.label())
                    .increment(1);
                tracing::warn!(purpose, host = %host_for_log, outcome = label, reason = reason.label(), ms, "egress request blocked");
            }
            Outcome::Ok { status, .. } | Outcome::Redirect { status } => {
                tracing::info!(purpose, host = %host_for_log, outcome = label, status, ms, "egress request");
            }
            Outcome::Transport { stage } => {
                tracing::warn!(purpose, host = %host_for_log, outcome = label, stage, ms, "egress request failed");
            }
            Outcome::Timeout | Outcome::TooLarge => {
                tracing::warn!(purpose, host = %host_for_log, outcome = label, ms, "egress request failed");
            }
        }
    }
}

fn transport(e: &reqwest::Error, stage: &'static str) -> Outcome {
    if e.is_timeout() {
        Outcome::Timeout
    } else if e.is_connect() {
        Outcome::Transport { stage: "connect" }
    } else {
        Outcome::Transport { stage }
    }
}

/// The pinned clients' resolver: every name they may reach is pinned, so
/// any lookup that gets here is refused.
struct NoLookups;

impl reqwest::dns::Resolve for NoLookups {
    fn resolve(&self, _name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        Box::pin(async {
            Err::<reqwest::dns::Addrs, _>(
                io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "egress clients resolve only pinned names",
                )
                .into(),
            )
        })
    }
}
