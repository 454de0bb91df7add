//! One accepted TCP connection served over HTTP/1.1 with hyper, under the
//! `[server]` timeouts: a request head must arrive within
//! `header_read_timeout_ms`, and a connection on which nothing moves while
//! no request is handled is closed after `idle_timeout_ms`. (The body
//! deadline is a middleware, see `crate::http`.) WebSocket upgrades leave
//! this loop: the socket then lives under the gateway's heartbeats.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::slots::Slot;
use crate::telemetry::names;

/// The `[server]` settings one connection needs.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    pub header_read: Duration,
    pub idle: Duration,
}

/// When bytes last moved on the connection, in milliseconds since `since`.
struct Progress {
    since: Instant,
    last_ms: AtomicU64,
}

impl Progress {
    fn touch(&self) {
        self.last_ms
            .store(self.since.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    fn quiet_for(&self) -> Duration {
        self.since
            .elapsed()
            .saturating_sub(Duration::from_millis(self.last_ms.load(Ordering::Relaxed)))
    }
}

/// The TCP stream with its slot: the slot is released only when the stream
/// is dropped, which for an upgraded WebSocket is when the socket closes.
struct Watched {
    tcp: TcpStream,
    progress: Arc<Progress>,
    _slot: Slot,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.tcp).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.progress.touch();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.tcp).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.progress.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.progress.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// Counts the connection's requests being handled; idle time does not run
/// while one is (a long-poll, a ping waiting for an app).
struct Handling(Arc<AtomicUsize>);

impl Handling {
    fn start(count: &Arc<AtomicUsize>) -> Handling {
        count.fetch_add(1, Ordering::Relaxed);
        Handling(count.clone())
    }
}

impl Drop for Handling {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Serves one connection until the peer leaves, a timeout closes it, it
/// becomes a WebSocket, or shutdown drains it.
pub async fn serve(
    tcp: TcpStream,
    remote: SocketAddr,
    slot: Slot,
    app: Router,
    timeouts: Timeouts,
    shutdown: CancellationToken,
) {
    // Small frames must not wait for Nagle's algorithm and delayed ACKs (a
    // 40 ms stall per frame otherwise).
    let _ = tcp.set_nodelay(true);
    let progress = Arc::new(Progress {
        since: Instant::now(),
        last_ms: AtomicU64::new(0),
    });
    let handling = Arc::new(AtomicUsize::new(0));
    let io = TokioIo::new(Watched {
        tcp,
        progress: progress.clone(),
        _slot: slot,
    });
    let router = TowerToHyperService::new(app);
    let counter = handling.clone();
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(remote));
        let handling = Handling::start(&counter);
        let answer = hyper::service::Service::call(&router, request);
        async move {
            let answer = answer.await;
            drop(handling);
            answer
        }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(timeouts.header_read);
    let connection = builder.serve_connection(io, service).with_upgrades();
    tokio::pin!(connection);
    let mut watch = tokio::time::interval((timeouts.idle / 4).max(Duration::from_millis(10)));
    let mut draining = false;
    loop {
        tokio::select! {
            served = connection.as_mut() => {
                if let Err(e) = served {
                    // A peer's fault (a timeout, a bad request, a reset):
                    // never worth more than a debug line.
                    debug!(%remote, error = %e, "HTTP connection ended with an error");
                }
                return;
            }
            _ = shutdown.cancelled(), if !draining => {
                draining = true;
                connection.as_mut().graceful_shutdown();
            }
            _ = watch.tick() => {
                if handling.load(Ordering::Relaxed) == 0 && progress.quiet_for() > timeouts.idle {
                    metrics::counter!(names::CONNECTIONS_CLOSED, "reason" => "idle_timeout").increment(1);
                    debug!(%remote, "idle HTTP connection closed");
                    return;
                }
            }
        }
    }
}
