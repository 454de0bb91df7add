//! `switchboard app check ID`: the hub's check of an app's hook gates
//! (`POST /api/v1/apps/{id}/check`), run through the running hub because
//! only it holds the app's socket. It reads the same configuration as
//! `serve`: the hub's address from `server.listen` (or `--hub`) and the
//! operator token from `admin.token`, or, with `--app-key` (`SWITCHBOARD_APP_KEY`),
//! the app's own key; it opens no database.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use serde_json::Value;
use uuid::Uuid;

use super::Exit;
use crate::config::Config;
use crate::hooks::check::CheckOutcome;

/// Where a hub listening on `listen` is reached from this machine.
fn local_url(listen: SocketAddr) -> String {
    let ip = match listen.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("http://{}", SocketAddr::new(ip, listen.port()))
}

/// The bearer the check is sent with: the app's own key (`--app-key`,
/// `SWITCHBOARD_APP_KEY`), or else the operator token.
fn credential(app_key: Option<String>, config: &Config) -> anyhow::Result<String> {
    if let Some(key) = app_key {
        if key.trim().is_empty() {
            anyhow::bail!("--app-key (SWITCHBOARD_APP_KEY) is empty");
        }
        return Ok(key.trim().to_string());
    }
    let token = &config.admin.token;
    if token.is_empty() {
        anyhow::bail!(
            "admin.token is not set: the check goes through the running hub's operator API; \
             give this command the hub's configuration (--config or SWITCHBOARD_ADMIN__TOKEN), \
             or check as the app with its key (SWITCHBOARD_APP_KEY)"
        );
    }
    Ok(token.clone())
}

pub(super) async fn check(
    id: Uuid,
    hub: Option<String>,
    app_key: Option<String>,
    config: &Config,
) -> anyhow::Result<()> {
    let token = credential(app_key, config)?;
    let body = post_to_hub(&format!("/api/v1/apps/{id}/check"), hub, &token, config).await?;
    report(&body)
}

/// `switchboard app verify-url ID` (ADR 0032 §2): the check of the app's
/// interactionsUrl, run by the hub; exit code 2 when it stays unverified.
pub(super) async fn verify_url(
    id: Uuid,
    hub: Option<String>,
    config: &Config,
) -> anyhow::Result<()> {
    let token = &config.admin.token;
    if token.is_empty() {
        anyhow::bail!(
            "admin.token is not set: the check goes through the running hub's operator API; \
             give this command the hub's configuration (--config or SWITCHBOARD_ADMIN__TOKEN)"
        );
    }
    let path = format!("/api/v1/apps/{id}/interactions-url/verify");
    let body = post_to_hub(&path, hub, token, config).await?;
    match (body["state"].as_str(), body["reason"].as_str()) {
        (Some("verified"), _) => {
            println!("verified");
            Ok(())
        }
        (_, reason) => {
            println!("unverified: {}", reason.unwrap_or("unknown"));
            Err(Exit(2).into())
        }
    }
}

/// POSTs to the running hub with `token` as Bearer; the JSON answer of a
/// 2xx, an error naming the hub's message otherwise.
async fn post_to_hub(
    path: &str,
    hub: Option<String>,
    token: &str,
    config: &Config,
) -> anyhow::Result<Value> {
    let base = hub.unwrap_or_else(|| local_url(config.server.listen));
    let url = format!("{}{path}", base.trim_end_matches('/'));
    let response = reqwest::Client::new()
        .post(&url)
        .bearer_auth(token)
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach the hub at {base}: {e}"))?;
    let status = response.status();
    let body: Value = response
        .json()
        .await
        .map_err(|e| anyhow::anyhow!("the hub at {base} answered {status} without JSON: {e}"))?;
    if !status.is_success() {
        let message = body["error"]["message"].as_str().unwrap_or("no message");
        anyhow::bail!("the hub refused the request ({status}): {message}");
    }
    Ok(body)
}

/// Prints one line per gate and ends with the worst gate's exit code.
fn report(body: &Value) -> anyhow::Result<()> {
    let gates = body["gates"].as_array().cloned().unwrap_or_default();
    if gates.is_empty() {
        println!("no hook gates: the manifest decides every gate itself");
    }
    let mut worst = CheckOutcome::Ok;
    for gate in &gates {
        let outcome = gate["outcome"]
            .as_str()
            .and_then(CheckOutcome::parse)
            .ok_or_else(|| anyhow::anyhow!("the hub answered an unknown outcome: {gate}"))?;
        worst = worst.max(outcome);
        println!("{}", gate_line(gate));
    }
    match worst {
        CheckOutcome::Ok => {
            println!("ok: every hook gate answered well in time");
            Ok(())
        }
        other => Err(Exit(other.exit_code()).into()),
    }
}

fn gate_line(gate: &Value) -> String {
    let mut line = format!(
        "{} ({}): {}",
        gate["gate"].as_str().unwrap_or("?"),
        gate["method"].as_str().unwrap_or("?"),
        gate["outcome"].as_str().unwrap_or("?"),
    );
    let timeout = gate["timeoutMs"].as_u64().unwrap_or(0);
    match gate["latencyMs"].as_f64() {
        Some(ms) => line.push_str(&format!(" in {ms:.1} ms of {timeout} ms")),
        None => line.push_str(&format!(" (timeoutMs {timeout})")),
    }
    if gate["decodes"] == Value::Bool(false) {
        line.push_str("; the answer does not decode as the gate's result");
    }
    if let Some(problem) = gate.get("decodeError") {
        let pointer = problem["pointer"].as_str().unwrap_or("");
        let at = if pointer.is_empty() { "/" } else { pointer };
        let message = problem["message"].as_str().unwrap_or("");
        line.push_str(&format!(" at {at}: {message}"));
    }
    if let Some(reason) = gate["reason"].as_str() {
        line.push_str(&format!(": {reason}"));
    }
    if let Some(message) = gate["error"]["message"].as_str() {
        line.push_str(&format!("; the app's error: {message}"));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unspecified_listen_address_is_reached_on_loopback() {
        assert_eq!(
            local_url("0.0.0.0:7420".parse().unwrap()),
            "http://127.0.0.1:7420"
        );
        assert_eq!(local_url("[::]:80".parse().unwrap()), "http://[::1]:80");
        assert_eq!(
            local_url("10.0.0.5:7420".parse().unwrap()),
            "http://10.0.0.5:7420"
        );
    }
}
