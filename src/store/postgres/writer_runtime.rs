//! PostgreSQL's writer runtime (ADR 0037): the group commits of sends and
//! of verdicts run on a thread of their own, over connections made there.
//!
//! A tokio socket is polled by the runtime it was made on. On the hub's
//! runtime, a group's statements wait for its workers, which are busy
//! writing the last group's deliveries to a hundred sockets: a group of
//! six round trips took about twice PostgreSQL's own time. Here the thread
//! sleeps in its own poll until an answer arrives and does nothing else.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::postgres::{PgPool, PgPoolOptions};
use tokio::runtime::Handle;

use crate::store::StoreResult;

/// Connections of the writer pool: two for each group kind. A kind writes
/// one group at a time, but sqlx pings a connection as it is released
/// (`return_to_pool`) and only then is it free: with one each, a group
/// would wait for the last one's release round trip.
pub const WRITER_CONNECTIONS: u32 = 4;

/// How long a dropped writer runtime waits for its pools to close (the
/// group being written commits and is answered; the connections say
/// goodbye to the server) before it stops regardless.
const CLOSE_WITHIN: Duration = Duration::from_secs(2);

/// The thread and its runtime. Dropped, it closes its pools, stops the
/// runtime and waits (at most [`CLOSE_WITHIN`] and a little) for the
/// thread to end.
pub struct WriterRuntime {
    handle: Handle,
    pools: Arc<Mutex<Vec<PgPool>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// In a mutex only to be `Sync`; read once, in `drop`.
    ended: Mutex<std::sync::mpsc::Receiver<()>>,
}

impl WriterRuntime {
    pub fn start() -> std::io::Result<WriterRuntime> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        let pools: Arc<Mutex<Vec<PgPool>>> = Arc::default();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ended_tx, ended) = std::sync::mpsc::channel();
        let closing = pools.clone();
        std::thread::Builder::new()
            .name("pg-writer".into())
            .spawn(move || {
                runtime.block_on(async {
                    let _ = stopped.await;
                    let pools = std::mem::take(&mut *closing.lock().expect("writer pools"));
                    let close = futures_util::future::join_all(pools.iter().map(PgPool::close));
                    if tokio::time::timeout(CLOSE_WITHIN, close).await.is_err() {
                        tracing::warn!(
                            within_ms = CLOSE_WITHIN.as_millis() as u64,
                            "the PostgreSQL writer's connections did not close in time; stopping regardless"
                        );
                    }
                });
                drop(runtime);
                let _ = ended_tx.send(());
            })?;
        Ok(WriterRuntime {
            handle,
            pools,
            stop: Some(stop),
            ended: Mutex::new(ended),
        })
    }

    pub fn handle(&self) -> Handle {
        self.handle.clone()
    }

    /// A pool whose connections are made on this runtime, so its sockets
    /// are polled here (a connection the pool makes later is made by the
    /// writer task that asked for it, also here). It is closed when this
    /// runtime is dropped.
    pub async fn pool(&self, url: &str, options: PgPoolOptions) -> StoreResult<PgPool> {
        let url = url.to_string();
        let made = self
            .handle
            .spawn(async move { options.connect(&url).await })
            .await
            .map_err(|e| sqlx::Error::Protocol(format!("the writer runtime stopped: {e}")))??;
        self.pools.lock().expect("writer pools").push(made.clone());
        Ok(made)
    }
}

impl Drop for WriterRuntime {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let ended = self.ended.get_mut().unwrap_or_else(|e| e.into_inner());
        let _ = ended.recv_timeout(CLOSE_WITHIN + Duration::from_millis(500));
    }
}
