//! The writer task of one WebSocket: drains the bounded outbound queue onto
//! the socket, sends heartbeat pings, closes silent sockets, and writes the
//! close frame.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use futures_util::stream::SplitSink;
use futures_util::SinkExt;
use tokio::sync::mpsc;

use crate::rpc::peer::CloseRequest;
use crate::rpc::{close_code, Peer};
use crate::telemetry::names;

pub(super) async fn write_loop(
    mut sink: SplitSink<WebSocket, Message>,
    mut queue: mpsc::Receiver<String>,
    peer: Peer,
    started: Instant,
    last_seen_ms: Arc<AtomicU64>,
    heartbeat_interval: Duration,
    heartbeat_timeout: Duration,
) {
    let mut ticker = tokio::time::interval(heartbeat_interval);
    ticker.tick().await;
    loop {
        tokio::select! {
            biased;
            _ = peer.closing() => break,
            frame = queue.recv() => {
                let Some(text) = frame else { break };
                // Feed what is queued, then flush once: one syscall for a
                // burst, and one deadline for it (not a clock read per frame).
                if !within(heartbeat_timeout, write_burst(&mut sink, &mut queue, text)).await {
                    peer.shutdown();
                    return;
                }
                peer.frames_drained();
            }
            _ = ticker.tick() => {
                let silent = started.elapsed().saturating_sub(Duration::from_millis(last_seen_ms.load(Ordering::Relaxed)));
                if silent > heartbeat_timeout {
                    metrics::counter!(names::DISCONNECTS, "reason" => "heartbeat_timeout").increment(1);
                    peer.close(close_code::HEARTBEAT_TIMEOUT, "heartbeat timeout");
                    break;
                }
                if !within(heartbeat_timeout, sink.send(Message::Ping(Vec::new().into()))).await {
                    peer.shutdown();
                    return;
                }
            }
        }
    }
    let close = peer.close_requested().cloned().unwrap_or(CloseRequest {
        code: close_code::NORMAL,
        reason: String::new(),
    });
    // Frames queued before a graceful close (answers to in-flight requests)
    // still go out; a slow or dead peer gets only the close frame.
    if close.code != close_code::SLOW_CONSUMER && close.code != close_code::HEARTBEAT_TIMEOUT {
        while let Ok(text) = queue.try_recv() {
            if !within(heartbeat_timeout, sink.send(Message::Text(text.into()))).await {
                return;
            }
        }
    }
    let close_frame = Message::Close(Some(CloseFrame {
        code: close.code,
        reason: Utf8Bytes::from(close.reason),
    }));
    if within(heartbeat_timeout, sink.send(close_frame)).await {
        let _ = within(heartbeat_timeout, sink.close()).await;
    }
}

/// Frames written at most to one flush: a long backlog still lets the
/// heartbeat and a close in between bursts.
const BURST: usize = 64;

/// `first` and what else is queued, up to [`BURST`] frames, then one flush.
async fn write_burst(
    sink: &mut SplitSink<WebSocket, Message>,
    queue: &mut mpsc::Receiver<String>,
    first: String,
) -> Result<(), axum::Error> {
    sink.feed(Message::Text(first.into())).await?;
    for _ in 1..BURST {
        match queue.try_recv() {
            Ok(more) => sink.feed(Message::Text(more.into())).await?,
            Err(_) => break,
        }
    }
    sink.flush().await
}

/// A socket write that must finish within `limit`: a peer that stopped
/// reading must not hold the writer (and its socket) forever.
async fn within<E>(
    limit: Duration,
    write: impl std::future::Future<Output = Result<(), E>>,
) -> bool {
    matches!(tokio::time::timeout(limit, write).await, Ok(Ok(())))
}
