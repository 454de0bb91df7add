//! How `fanout` offers its messages: a warm-up that is not measured, then
//! either `--inflight` sends kept in flight or a schedule (`--fanout-rate`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio_tungstenite::tungstenite::Message;
use uuid::Uuid;

use super::scenarios::{send_text, stamp, Ws};
use crate::client::AgentClient;

/// The text of a warm-up message: no stamp, so `receive` skips it.
const WARM_UP: &str = "warm-up;";

/// Sends `messages` unstamped messages, `inflight` at a time, and reads
/// each of them on every receiver before the measured run starts. A short
/// run is otherwise mostly the hub's first moments: PostgreSQL's cold
/// caches and plans, the first WAL segments, the sockets' first buffers
/// (at 50,000 deliveries and N = 100 PostgreSQL measured 0.19 of the
/// ceiling against 0.32 over 200,000).
pub async fn warm_up(
    sender: &AgentClient,
    group: Uuid,
    receivers: &mut [Ws],
    messages: usize,
    inflight: usize,
) -> anyhow::Result<()> {
    if messages == 0 {
        return Ok(());
    }
    let sends = futures_util::stream::iter(0..messages)
        .map(|_| send_text(sender, group, WARM_UP.to_string()))
        .buffer_unordered(inflight.max(1))
        .collect::<Vec<_>>();
    let reads =
        futures_util::future::join_all(receivers.iter_mut().map(|ws| read_warm_up(ws, messages)));
    let (sent, read) = tokio::join!(sends, reads);
    sent.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    read.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    Ok(())
}

/// Reads until `expected` warm-up messages arrived.
async fn read_warm_up(ws: &mut Ws, expected: usize) -> anyhow::Result<()> {
    let mut seen = 0;
    while seen < expected {
        match ws.next().await {
            Some(Ok(Message::Text(t))) if t.as_str().contains(WARM_UP) => seen += 1,
            Some(Ok(_)) => {}
            Some(Err(e)) => anyhow::bail!("receiver socket failed in the warm-up: {e}"),
            None => {
                anyhow::bail!("receiver socket closed after {seen} of {expected} warm-up messages")
            }
        }
    }
    Ok(())
}

/// `messages` stamped sends, `inflight` at a time.
pub async fn saturated(
    sender: &AgentClient,
    group: Uuid,
    messages: usize,
    inflight: usize,
) -> anyhow::Result<()> {
    futures_util::stream::iter(0..messages)
        .map(|_| send_text(sender, group, format!("{} {}", stamp(), "x".repeat(100))))
        .buffer_unordered(inflight.max(1))
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(())
}

/// `messages` sends into `group`, each started on its schedule at `rate`
/// a second, however many are still in flight.
pub async fn offered(
    sender: Arc<AgentClient>,
    group: Uuid,
    messages: usize,
    rate: u64,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut sends = Vec::with_capacity(messages);
    for i in 0..messages {
        let at = started + Duration::from_secs_f64(i as f64 / rate as f64);
        tokio::time::sleep_until(at.into()).await;
        let sender = sender.clone();
        sends.push(tokio::spawn(async move {
            let text = format!("{} {}", stamp(), "x".repeat(100));
            send_text(&sender, group, text).await
        }));
    }
    for s in sends {
        s.await??;
    }
    Ok(())
}
