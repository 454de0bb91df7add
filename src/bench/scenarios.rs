//! The hub scenarios: fan-out, hook latency, catch-up (idle connections are
//! in `connections`), and the helpers they share.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use uuid::Uuid;

use super::report::Entry;
use super::stats::{own_cpu_seconds, Samples};
use crate::client::{AgentClient, AppClient};
use crate::config::{Config, SqliteSynchronous};
use crate::domain::gate::{MessageAuthorizeAnswer, MessageVerdict};
use crate::domain::message::Part;
use crate::protocol::conversations::{
    AgentConversationCreate, AgentMessageSend, ConversationCreateParams, MessageSendParams,
    NewConversationKind,
};
use crate::protocol::tasks::{AgentTaskRequest, AppMessageAuthorize, TaskRequestParams};
use crate::server::Server;

pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

static EPOCH: OnceLock<Instant> = OnceLock::new();

fn epoch() -> Instant {
    *EPOCH.get_or_init(Instant::now)
}

/// A send timestamp that receivers turn into a latency.
pub fn stamp() -> String {
    format!("t={};", epoch().elapsed().as_micros())
}

/// Makes the ceiling's frames as long as the hub's notifications.
pub fn padding() -> &'static str {
    static PAD: OnceLock<String> = OnceLock::new();
    PAD.get_or_init(|| "x".repeat(420))
}

fn parse_stamp(text: &str) -> Option<u64> {
    let start = text.find("t=")? + 2;
    let end = start + text[start..].find(';')?;
    text[start..end].parse().ok()
}

/// What one receiver saw.
pub struct Received {
    pub latencies: Samples,
    pub last: Instant,
}

/// Reads frames until `expected` stamped ones arrived.
pub async fn receive(mut ws: Ws, expected: usize) -> anyhow::Result<Received> {
    let mut latencies = Samples::default();
    let mut last = Instant::now();
    while latencies.0.len() < expected {
        match ws.next().await {
            Some(Ok(Message::Text(t))) => {
                if let Some(sent) = parse_stamp(t.as_str()) {
                    let now_us = epoch().elapsed().as_micros() as u64;
                    latencies.push(Duration::from_micros(now_us.saturating_sub(sent)));
                    last = Instant::now();
                }
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => anyhow::bail!("receiver socket failed: {e}"),
            None => anyhow::bail!(
                "receiver socket closed after {} of {expected}",
                latencies.0.len()
            ),
        }
    }
    Ok(Received { latencies, last })
}

/// Joins the receivers and records throughput and latency percentiles.
pub async fn summarize(
    entry: &mut Entry,
    handles: Vec<JoinHandle<anyhow::Result<Received>>>,
    started: Instant,
    total: usize,
) -> anyhow::Result<()> {
    let mut all = Samples::default();
    let mut last = started;
    for h in handles {
        let r = tokio::time::timeout(Duration::from_secs(300), h)
            .await
            .map_err(|_| anyhow::anyhow!("receivers did not finish within 300 s"))???;
        last = last.max(r.last);
        all.0.extend(r.latencies.0);
    }
    let secs = (last - started).as_secs_f64().max(1e-9);
    entry.result("deliveries", total);
    entry.result("seconds", (secs * 1000.0).round() / 1000.0);
    entry.result("deliveries_per_second", (total as f64 / secs).round());
    entry.result("latency_p50_ms", all.percentile_ms(50.0));
    entry.result("latency_p99_ms", all.percentile_ms(99.0));
    entry.result("latency_max_ms", all.percentile_ms(100.0));
    Ok(())
}

/// A hub in this process on 127.0.0.1:0 with limits that do not get in the
/// way of a load test. Every change from the defaults is in the report.
pub(super) async fn start_hub(
    database_url: Option<String>,
    tweak: impl FnOnce(&mut Config),
) -> anyhow::Result<(Server, tempfile::TempDir)> {
    let dir = tempfile::tempdir()?;
    let mut config = Config::default();
    config.server.listen = "127.0.0.1:0".parse()?;
    config.server.data_dir = dir.path().to_path_buf();
    if let Some(url) = database_url {
        config.storage.database_url = url;
    }
    let unlimited = unlimited_quota(10_000_000);
    config.ratelimit = crate::config::RateLimitConfig {
        message: unlimited,
        trigger: unlimited,
        interaction: unlimited,
        write: unlimited,
        agent_runtime: unlimited,
        default: unlimited,
    };
    config.gateway.max_in_flight_requests = 1_000_000;
    tweak(&mut config);
    config.validate()?;
    Ok((Server::start(config).await?, dir))
}

fn unlimited_quota(n: u32) -> crate::config::RateQuota {
    crate::config::RateQuota {
        per_second: n,
        burst: n,
    }
}

pub(super) async fn new_agent(server: &Server, name: &str) -> anyhow::Result<(Uuid, String)> {
    let r =
        crate::identity::register_agent(server.hub.store.as_ref(), &json!({ "name": name }), None)
            .await
            .map_err(|e| anyhow::anyhow!("register: {e}"))?;
    Ok((r.id, r.key.plaintext))
}

/// A bare authenticated agent socket (lighter than the SDK for thousands).
pub(super) async fn raw_agent(
    url: &str,
    key: &str,
    source: Option<std::net::IpAddr>,
) -> anyhow::Result<Ws> {
    let mut ws = match source {
        None => {
            tokio_tungstenite::connect_async_with_config(url, None, true)
                .await?
                .0
        }
        Some(ip) => {
            let target: std::net::SocketAddr = url
                .trim_start_matches("ws://")
                .trim_end_matches("/ws")
                .parse()?;
            let socket = tokio::net::TcpSocket::new_v4()?;
            socket.bind(std::net::SocketAddr::new(ip, 0))?;
            let stream = socket.connect(target).await?;
            stream.set_nodelay(true)?;
            tokio_tungstenite::client_async(url, tokio_tungstenite::MaybeTlsStream::Plain(stream))
                .await?
                .0
        }
    };
    let hello = json!({"jsonrpc": "2.0", "id": "c", "method": "agent/network/connect", "params": {"agentKey": key}});
    ws.send(Message::Text(hello.to_string().into())).await?;
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(t))) => {
                let v: Value = serde_json::from_str(t.as_str())?;
                if v["id"] == json!("c") {
                    anyhow::ensure!(v.get("result").is_some(), "connect failed: {v}");
                    return Ok(ws);
                }
            }
            Some(Ok(_)) => {}
            _ => anyhow::bail!("socket closed during connect"),
        }
    }
}

pub(super) fn ws_url(server: &Server) -> String {
    format!("ws://{}/ws", server.addr)
}

pub(super) fn base_url(server: &Server) -> String {
    format!("http://{}", server.addr)
}

pub(super) async fn send_text(
    client: &AgentClient,
    conversation: Uuid,
    text: String,
) -> anyhow::Result<()> {
    client
        .call::<AgentMessageSend>(MessageSendParams {
            conversation_id: conversation,
            parts: vec![Part::Text { text }],
            client_msg_id: None,
            reply_to: None,
            thread_id: None,
            components: None,
            card_use: None,
        })
        .await?;
    Ok(())
}

/// How a fanout run is shaped, beside its group size.
pub struct FanoutRun<'a> {
    pub deliveries: usize,
    /// Deliveries sent and read before the measured run
    /// (`--fanout-warm-up-deliveries`), not counted.
    pub warm_up: usize,
    /// Sends in flight at once (`--inflight`).
    pub inflight: usize,
    /// Messages per second offered on a schedule instead (`--fanout-rate`;
    /// 0: as fast as `inflight` allows). For latency below saturation.
    pub rate: u64,
    pub backend: &'a str,
    pub database_url: Option<String>,
    pub sync: SqliteSynchronous,
}

pub async fn fanout(n: usize, run: FanoutRun<'_>) -> anyhow::Result<Entry> {
    let FanoutRun {
        deliveries,
        warm_up: warm_up_deliveries,
        inflight,
        rate,
        backend,
        database_url,
        sync,
    } = run;
    let queue = 8192;
    let (server, _dir) = start_hub(database_url, |c| {
        c.storage.sqlite_synchronous = sync;
        c.messages.max_group_participants = n + 1;
        c.gateway.outbound_queue_capacity = queue;
        c.storage.max_connections = 8;
    })
    .await?;
    let messages = (deliveries / n).max(1);
    let (_, sender_key) = new_agent(&server, "sender").await?;
    let mut ids = Vec::new();
    let mut receivers = Vec::new();
    for i in 0..n {
        let (id, key) = new_agent(&server, &format!("r{i}")).await?;
        ids.push(id);
        receivers.push(raw_agent(&ws_url(&server), &key, None).await?);
    }
    let sender = AgentClient::connect(&base_url(&server), &sender_key).await?;
    let group = sender
        .call::<AgentConversationCreate>(ConversationCreateParams {
            kind: NewConversationKind::Group,
            participants: ids,
            name: Some("bench".into()),
        })
        .await?
        .conversation
        .id;
    let warm_up = (warm_up_deliveries / n).min(messages);
    super::fanout_load::warm_up(&sender, group, &mut receivers, warm_up, inflight).await?;
    let handles: Vec<_> = receivers
        .into_iter()
        .map(|ws| tokio::spawn(receive(ws, messages)))
        .collect();
    let store_url = server.hub.config.database_url();
    let before = super::written::mark(&store_url).await?;
    let cpu0 = own_cpu_seconds();
    let started = Instant::now();
    match rate {
        0 => super::fanout_load::saturated(&sender, group, messages, inflight).await?,
        r => super::fanout_load::offered(Arc::new(sender), group, messages, r).await?,
    }
    let mut entry = Entry::new("fanout")
        .param("n", n)
        .param("messages", messages)
        .param("backend", backend)
        .param("outbound_queue_capacity", queue)
        .param("warm_up_messages", warm_up);
    entry = match rate {
        0 => entry.param("inflight", inflight),
        r => entry.param("offered_messages_per_second", r),
    };
    if backend == "sqlite" {
        entry = entry.param("sqlite_synchronous", format!("{sync:?}").to_lowercase());
    }
    summarize(&mut entry, handles, started, messages * n).await?;
    entry.result("cpu_seconds", own_cpu_seconds() - cpu0);
    // The store is read once the hub has stopped, so nothing still writes.
    server.shutdown().await?;
    super::written::record(&mut entry, &store_url, before, messages * n).await?;
    Ok(entry)
}

fn gate_manifest(message_authorize: Value) -> Value {
    json!({
        "name": "bench",
        "description": "bench app",
        "limits": {"maxParticipants": 10},
        "conversations": [{"key": "room", "name": "Room", "participantFilter": "all"}],
        "hooks": {
            "task_create": {"kind": "accept"},
            "message_authorize": message_authorize,
            "dispatch_authorize": {"kind": "grant"}
        }
    })
}

/// Send latency through a task conversation at an offered rate, with the
/// static policy and with a hook that answers at once. Both apps live on the
/// same hub and run back to back at each rate.
pub async fn hook(rates: &[u64], seconds: u64) -> anyhow::Result<Vec<Entry>> {
    // As `fanout`: at 5,000 sends a second the load client, on the same
    // cores, can fall more than the default 1,024 frames behind its own
    // socket's acks, and the hub then closes it as a slow consumer.
    let (server, _dir) = start_hub(None, |c| c.gateway.outbound_queue_capacity = 8192).await?;
    let setup = hook_setup(&server).await?;
    let mut out = Vec::new();
    for &rate in rates {
        let mut by_mode = Vec::new();
        for (label, room) in &setup.rooms {
            by_mode.push(offered_sends(&setup.sender, label, *room, rate, seconds).await?);
        }
        if let [st, hk] = &mut by_mode[..] {
            added_latency(st, hk);
        }
        out.extend(by_mode);
    }
    drop(setup);
    server.shutdown().await?;
    Ok(out)
}

/// The sender, one task room per policy, and what must stay connected
/// meanwhile (the listeners and the apps).
struct HookSetup {
    sender: Arc<AgentClient>,
    rooms: Vec<(&'static str, Uuid)>,
    _connected: Vec<Box<dyn std::any::Any + Send>>,
}

async fn hook_setup(server: &Server) -> anyhow::Result<HookSetup> {
    let base = base_url(server);
    let mut rooms = Vec::new();
    let mut apps = Vec::new();
    let (_, sender_key) = new_agent(server, "sender").await?;
    let sender = Arc::new(AgentClient::connect(&base, &sender_key).await?);
    let mut others = Vec::new();
    for i in 0..2 {
        let (id, key) = new_agent(server, &format!("listener{i}")).await?;
        others.push(id);
        // Listeners stay connected so delivery is live.
        apps.push(
            Box::new(AgentClient::connect(&base, &key).await?) as Box<dyn std::any::Any + Send>
        );
    }
    for (label, policy) in [
        ("static", json!({"kind": "forwardAllExceptSender"})),
        ("hook", json!({"kind": "hook", "timeoutMs": 5000})),
    ] {
        let creds = crate::client::HttpClient::new(&base)
            .register_app(&gate_manifest(policy))
            .await?;
        let app = AppClient::builder(&base, &creds.app_key)
            // Forward to everyone but the sender, as the static policy does:
            // both modes then deliver the same events, and the sender's socket
            // carries only its acks (forwarding the sender its own message
            // doubled the frames the load client must read while it sends).
            .handle::<AppMessageAuthorize, _, _>(|p| async move {
                let sender = p.message.sender_id;
                Ok(MessageAuthorizeAnswer {
                    verdict: MessageVerdict::Forward {
                        recipients: p
                            .conversation
                            .participants
                            .into_iter()
                            .filter(|id| *id != sender)
                            .collect(),
                    },
                })
            })
            .connect()
            .await?;
        apps.push(Box::new(app));
        let task = sender
            .call::<AgentTaskRequest>(TaskRequestParams {
                app_id: creds.app_id,
                invited_agent_ids: others.clone(),
                initial_conversation: None,
            })
            .await?;
        rooms.push((label, task.conversations[0].id));
    }
    Ok(HookSetup {
        sender,
        rooms,
        _connected: apps,
    })
}

/// `rate * seconds` sends into one room, each started on its schedule.
async fn offered_sends(
    sender: &Arc<AgentClient>,
    label: &'static str,
    room: Uuid,
    rate: u64,
    seconds: u64,
) -> anyhow::Result<Entry> {
    let total = (rate * seconds) as usize;
    let started = Instant::now();
    let mut handles = Vec::with_capacity(total);
    for i in 0..total {
        tokio::time::sleep_until(
            (started + Duration::from_secs_f64(i as f64 / rate as f64)).into(),
        )
        .await;
        let sender = sender.clone();
        handles.push(tokio::spawn(async move {
            let t = Instant::now();
            send_text(&sender, room, "hello".into())
                .await
                .map(|_| t.elapsed())
        }));
    }
    let mut lat = Samples::default();
    let mut errors = 0usize;
    let mut first_error = None;
    for h in handles {
        match h.await? {
            Ok(d) => lat.push(d),
            Err(e) => {
                errors += 1;
                first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let mut e = Entry::new("hook")
        .param("policy", label)
        .param("offered_per_second", rate)
        .param("seconds", seconds);
    e.result("messages", total);
    e.result("errors", errors);
    if let Some(first) = first_error {
        e.result("first_error", first);
    }
    e.result("achieved_per_second", (total as f64 / secs).round());
    e.result("send_p50_ms", lat.percentile_ms(50.0));
    e.result("send_p99_ms", lat.percentile_ms(99.0));
    Ok(e)
}

/// What the hook adds over the static policy, at p50 and p99.
fn added_latency(st: &Entry, hk: &mut Entry) {
    for p in ["p50", "p99"] {
        if let (Some(a), Some(b)) = (
            hk.number(&format!("send_{p}_ms")),
            st.number(&format!("send_{p}_ms")),
        ) {
            hk.result(
                &format!("added_{p}_ms"),
                ((a - b) * 1000.0).round() / 1000.0,
            );
        }
    }
}

/// Events stored for one agent, read back by resume and by REST pages.
pub async fn catchup(events: usize) -> anyhow::Result<Entry> {
    let (server, _dir) = start_hub(None, |c| {
        c.storage.sqlite_synchronous = SqliteSynchronous::Normal
    })
    .await?;
    let base = base_url(&server);
    let (_, sender_key) = new_agent(&server, "writer").await?;
    let (reader_id, reader_key) = new_agent(&server, "reader").await?;
    let sender = AgentClient::connect(&base, &sender_key).await?;
    let room = sender
        .call::<AgentConversationCreate>(ConversationCreateParams {
            kind: NewConversationKind::Direct,
            participants: vec![reader_id],
            name: None,
        })
        .await?
        .conversation
        .id;
    let seeded = Instant::now();
    futures_util::stream::iter(0..events.saturating_sub(1))
        .map(|i| send_text(&sender, room, format!("event {i}")))
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()?;
    let seed_secs = seeded.elapsed().as_secs_f64();
    let total = events.max(1);

    let cpu0 = own_cpu_seconds();
    let started = Instant::now();
    resume_all(&server, &reader_key, total).await?;
    let resume_secs = started.elapsed().as_secs_f64();
    let resume_cpu = own_cpu_seconds() - cpu0;

    let http = reqwest::Client::new();
    let started = Instant::now();
    let read = rest_pages(&http, &base, &reader_key).await?;
    let rest_secs = started.elapsed().as_secs_f64();
    anyhow::ensure!(read == total, "REST returned {read} of {total} events");
    let mut entry = Entry::new("catchup").param("events", total);
    entry.result("seed_events_per_second", (total as f64 / seed_secs).round());
    entry.result(
        "resume_events_per_second",
        (total as f64 / resume_secs).round(),
    );
    entry.result("resume_cpu_seconds", resume_cpu);
    entry.result("rest_events_per_second", (total as f64 / rest_secs).round());
    server.shutdown().await?;
    Ok(entry)
}

/// Connects with `resume: {after: 0}` and reads until `total` events came.
async fn resume_all(server: &Server, reader_key: &str, total: usize) -> anyhow::Result<()> {
    let epoch = server.hub.sync_epoch.clone();
    let mut ws = tokio_tungstenite::connect_async_with_config(&ws_url(server), None, true)
        .await?
        .0;
    let hello = json!({"jsonrpc": "2.0", "id": "c", "method": "agent/network/connect",
        "params": {"agentKey": reader_key, "resume": {"after": 0, "syncEpoch": epoch}}});
    ws.send(Message::Text(hello.to_string().into())).await?;
    let mut got = 0usize;
    while got < total {
        match ws.next().await {
            Some(Ok(Message::Text(t))) if t.as_str().contains("\"seq\"") => got += 1,
            Some(Ok(_)) => {}
            _ => anyhow::bail!("socket closed during resume after {got} events"),
        }
    }
    Ok(())
}

/// Reads the whole log over REST in pages of 1000; returns how many came.
async fn rest_pages(http: &reqwest::Client, base: &str, reader_key: &str) -> anyhow::Result<usize> {
    let mut after = 0u64;
    let mut read = 0usize;
    loop {
        let page: Value = http
            .get(format!("{base}/api/v1/events?after={after}&limit=1000"))
            .bearer_auth(reader_key)
            .send()
            .await?
            .json()
            .await?;
        let n = page["events"].as_array().map_or(0, |a| a.len());
        if n == 0 {
            break;
        }
        read += n;
        after = page["nextAfter"].as_u64().unwrap_or(after);
    }
    Ok(read)
}
