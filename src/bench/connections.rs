//! The idle-connections scenario: K sockets against a hub in a child
//! process, so its resident memory is the hub's alone; then one message to
//! all of them.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::json;
use uuid::Uuid;

use super::report::Entry;
use super::scenarios::{raw_agent, receive, send_text, stamp, Ws};
use super::stats::{cpu_seconds_of, rss_kib};
use crate::client::AgentClient;
use crate::config::{Config, SqliteSynchronous};
use crate::protocol::conversations::{
    AgentConversationCreate, ConversationCreateParams, NewConversationKind,
};

/// Idle connections against a hub in a child process, so its resident
/// memory is the hub's alone; then one message to all of them.
pub async fn connections(k: usize) -> anyhow::Result<Entry> {
    let dir = tempfile::tempdir()?;
    let agents = register_agents(dir.path(), k).await?;
    let (mut child, pid, base) = spawn_hub(dir.path(), k).await?;
    let url = format!("{}/ws", base.replace("http://", "ws://"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss_before = rss_kib(pid).unwrap_or(0);
    let cpu_before = cpu_seconds_of(pid).unwrap_or(0.0);
    let started = Instant::now();
    let sockets = connect_all(&url, &agents.keys).await?;
    let connect_secs = started.elapsed().as_secs_f64();
    // Read from now on, so the sockets answer the hub's heartbeats while
    // the big conversation is being opened.
    let handles: Vec<_> = sockets
        .into_iter()
        .map(|ws| tokio::spawn(receive(ws, 1)))
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_after = rss_kib(pid).unwrap_or(0);

    let mut announcer = AgentClient::connect(&base, &agents.announcer_key).await?;
    // Opening a conversation of K members checks each one: allow for it.
    announcer
        .connection
        .set_call_timeout(Duration::from_secs(600));
    let group = announcer
        .call::<AgentConversationCreate>(ConversationCreateParams {
            kind: NewConversationKind::Group,
            participants: agents.ids,
            name: None,
        })
        .await?
        .conversation
        .id;
    let sent = Instant::now();
    send_text(&announcer, group, format!("{} all hands", stamp())).await?;
    let mut entry = Entry::new("connections").param("k", k);
    let mut last = sent;
    for h in handles {
        last = last.max(h.await??.last);
    }
    entry.result("connect_per_second", (k as f64 / connect_secs).round());
    entry.result("hub_rss_before_kib", rss_before);
    entry.result("hub_rss_after_kib", rss_after);
    entry.result(
        "kib_per_connection",
        ((rss_after.saturating_sub(rss_before)) as f64 / k as f64 * 100.0).round() / 100.0,
    );
    entry.result(
        "broadcast_last_receive_ms",
        (last - sent).as_secs_f64() * 1000.0,
    );
    entry.result(
        "hub_cpu_seconds",
        cpu_seconds_of(pid).unwrap_or(0.0) - cpu_before,
    );
    let _ = child.kill().await;
    Ok(entry)
}

/// The K idle agents and the announcer, registered straight in the store.
struct Agents {
    ids: Vec<Uuid>,
    keys: Vec<String>,
    announcer_key: String,
}

async fn register_agents(dir: &std::path::Path, k: usize) -> anyhow::Result<Agents> {
    let mut config = Config::default();
    config.server.data_dir = dir.to_path_buf();
    config.storage.sqlite_synchronous = SqliteSynchronous::Normal;
    let store = crate::store::open(&config).await?;
    let mut keys = Vec::with_capacity(k);
    let mut ids = Vec::with_capacity(k);
    for i in 0..k {
        let r = crate::identity::register_agent(
            store.as_ref(),
            &json!({ "name": format!("idle{i}") }),
            None,
        )
        .await
        .map_err(|e| anyhow::anyhow!("register: {e}"))?;
        ids.push(r.id);
        keys.push(r.key.plaintext);
    }
    let sender_reg =
        crate::identity::register_agent(store.as_ref(), &json!({"name": "announcer"}), None)
            .await
            .map_err(|e| anyhow::anyhow!("register: {e}"))?;
    drop(store);
    Ok(Agents {
        ids,
        keys,
        announcer_key: sender_reg.key.plaintext,
    })
}

/// `switchboard serve` as a child on the same data directory, with limits
/// sized for K members; returns it, its pid and its base URL.
async fn spawn_hub(
    dir: &std::path::Path,
    k: usize,
) -> anyhow::Result<(tokio::process::Child, u32, String)> {
    let exe = std::env::current_exe()?;
    let mut command = tokio::process::Command::new(exe);
    for class in crate::protocol::RateClass::ALL {
        let section = class.as_str().to_uppercase();
        command
            .env(
                format!("SWITCHBOARD_RATELIMIT__{section}__PER_SECOND"),
                "10000000",
            )
            .env(
                format!("SWITCHBOARD_RATELIMIT__{section}__BURST"),
                "10000000",
            );
    }
    let mut child = command
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .env(
            "SWITCHBOARD_MESSAGES__MAX_GROUP_PARTICIPANTS",
            (k + 1).to_string(),
        )
        .env(
            "SWITCHBOARD_GATEWAY__MAX_FRAME_BYTES",
            (64 * k + 4096).to_string(),
        )
        .env(
            "SWITCHBOARD_GATEWAY__TRANSPORT_MAX_FRAME_BYTES",
            (64 * k + 4096).to_string(),
        )
        .env("SWITCHBOARD_STORAGE__SQLITE_SYNCHRONOUS", "normal")
        // Every idle socket comes from this one address.
        .env("SWITCHBOARD_SERVER__MAX_CONNECTIONS", (k + 100).to_string())
        .env(
            "SWITCHBOARD_SERVER__MAX_CONNECTIONS_PER_ADDRESS",
            (k + 100).to_string(),
        )
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let pid = child.id().ok_or_else(|| anyhow::anyhow!("no child pid"))?;
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(
        child.stdout.take().expect("stdout"),
    ));
    let base = loop {
        let line = lines
            .next_line()
            .await?
            .ok_or_else(|| anyhow::anyhow!("hub exited"))?;
        if let Some(url) = line.strip_prefix("switchboard listening on ") {
            break url.to_string();
        }
    };
    // Keep reading: a closed pipe would make a later line from the child fail.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok((child, pid, base))
}

/// One bare socket per key, 64 connecting at a time.
async fn connect_all(url: &str, keys: &[String]) -> anyhow::Result<Vec<Ws>> {
    futures_util::stream::iter(keys.iter().enumerate())
        .map(|(i, key)| {
            // Past ~25,000 sockets one source address runs out of ports.
            let source = std::net::IpAddr::V4(std::net::Ipv4Addr::new(
                127,
                0,
                0,
                1 + (i / 25_000).min(253) as u8,
            ));
            let url = url.to_string();
            async move { raw_agent(&url, key, Some(source)).await }
        })
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<_>>()
}
