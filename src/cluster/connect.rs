//! How a node connects to NATS: its credentials and TLS (ADR 0034,
//! 2026-12-02), and a first attempt that tells "NATS refused this node"
//! (wrong or missing credentials, a TLS failure: the node must not start,
//! it would never join) from "NATS is not there yet" (the node serves and
//! joins when it can).

use async_nats::{ConnectErrorKind, ConnectOptions};

use crate::config::ClusterConfig;

/// What `[cluster]` says of authentication and TLS, with the credentials
/// files read at start (a missing or unreadable one fails the start).
/// Neither their contents nor details about them reach a log.
pub struct Security {
    creds: Option<String>,
    seed: Option<String>,
    tls_required: bool,
    ca_file: Option<std::path::PathBuf>,
}

impl Security {
    pub fn load(config: &ClusterConfig) -> anyhow::Result<Security> {
        if let Some(ca) = &config.nats_tls_ca_file {
            if !ca.is_file() {
                anyhow::bail!("cluster.nats_tls_ca_file {} is not a file", ca.display());
            }
        }
        let security = Security {
            creds: config
                .nats_creds_file
                .as_deref()
                .map(|p| read("cluster.nats_creds_file", p))
                .transpose()?,
            seed: config
                .nats_nkey_seed_file
                .as_deref()
                .map(read_seed)
                .transpose()?,
            tls_required: config.nats_tls_required,
            ca_file: config.nats_tls_ca_file.clone(),
        };
        // A credentials file that does not parse fails now, not on connect.
        security.apply(ConnectOptions::new())?;
        Ok(security)
    }

    /// The options with the credentials and TLS settings added.
    pub fn apply(&self, options: ConnectOptions) -> anyhow::Result<ConnectOptions> {
        let mut options = options.require_tls(self.tls_required);
        if let Some(ca) = &self.ca_file {
            options = options.add_root_certificates(ca.clone());
        }
        if let Some(creds) = &self.creds {
            options = options.credentials(creds).map_err(|_| {
                anyhow::anyhow!("cluster.nats_creds_file holds no user JWT and nkey seed")
            })?;
        }
        if let Some(seed) = &self.seed {
            options = options.nkey(seed.clone());
        }
        Ok(options)
    }
}

fn read(key: &str, path: &std::path::Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{key} {}: {e}", path.display()))
}

/// The seed in an nkey seed file: its one `SU...` line.
fn read_seed(path: &std::path::Path) -> anyhow::Result<String> {
    let text = read("cluster.nats_nkey_seed_file", path)?;
    let seed = text
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("SU"))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "cluster.nats_nkey_seed_file {} holds no user nkey seed (a line starting SU)",
                path.display()
            )
        })?;
    Ok(seed.to_string())
}

/// Connects once; when NATS is only unreachable, connects again in the
/// background, retrying (a node started while NATS is down serves and
/// joins later). A refusal (authorization, TLS) fails the start.
/// `tls_required`: the node requires TLS, so a server that closes the
/// connection during the handshake (a plaintext one) refused it too.
pub async fn connect(
    url: &str,
    tls_required: bool,
    options: impl Fn() -> anyhow::Result<ConnectOptions>,
) -> anyhow::Result<async_nats::Client> {
    match options()?.connect(url).await {
        Ok(client) => Ok(client),
        Err(e) if tls_failed(&e) || (tls_required && closed_early(&e)) => Err(anyhow::anyhow!(
            "cluster.nats_url: NATS refused this node: the TLS handshake failed ({}); check \
             cluster.nats_tls_ca_file against the CA that signed the server's certificate, \
             and that the server has TLS when cluster.nats_tls_required is set",
            chain(&e)
        )),
        Err(e) if refused(e.kind()) => Err(anyhow::anyhow!(
            "cluster.nats_url: NATS refused this node ({e}); check cluster.nats_creds_file, \
             cluster.nats_nkey_seed_file and the TLS settings against the server's"
        )),
        Err(_) => options()?
            .retry_on_initial_connect()
            .connect(url)
            .await
            .map_err(|e| anyhow::anyhow!("cluster.nats_url: {e}")),
    }
}

/// Whether NATS answered and said no, as opposed to not answering.
fn refused(kind: ConnectErrorKind) -> bool {
    matches!(
        kind,
        ConnectErrorKind::Authentication
            | ConnectErrorKind::AuthorizationViolation
            | ConnectErrorKind::Tls
            | ConnectErrorKind::ServerParse
    )
}

/// Whether TLS itself failed: a certificate the configured CA does not
/// vouch for, or a server that does not speak TLS to a node that requires
/// it. async-nats reports a handshake failure as an I/O error, the kind an
/// unreachable server also gets, so the cause is looked for under it: a
/// `rustls` error wrapped in an `io::Error`. Retrying would never succeed
/// (the server is there and the settings disagree), so the start fails.
fn tls_failed(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(err) = next {
        if err.is::<rustls::Error>() {
            return true;
        }
        if let Some(inner) = err
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
        {
            if tls_failed(inner) {
                return true;
            }
        }
        next = err.source();
    }
    false
}

/// Whether the server closed the connection mid-exchange (after taking
/// it): an I/O error of kind `UnexpectedEof` under the connect error. An
/// unreachable server is `ConnectionRefused` or a timeout, never this.
fn closed_early(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(err) = next {
        if err
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::UnexpectedEof)
        {
            return true;
        }
        next = err.source();
    }
    false
}

/// The error and its causes, for the start's message (no secret is in a
/// connect error: the credentials never reach one).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(err) = next {
        let part = err.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        next = err.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rustls_error_under_an_io_error_is_a_tls_failure() {
        let handshake = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        let e = async_nats::ConnectError::with_source(ConnectErrorKind::Io, handshake);
        assert!(tls_failed(&e));
        let unreachable = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let e = async_nats::ConnectError::with_source(ConnectErrorKind::Io, unreachable);
        assert!(
            !tls_failed(&e),
            "an unreachable server is retried, not refused"
        );
    }
}
