//! PostgreSQL's writer runtime (ADR 0037): the group commits of sends and
//! of verdicts run on a thread of their own, over connections made there.
//!
//! A tokio socket is polled by the runtime it was made on. On the hub's
//! runtime, a group's statements wait for its workers, which are busy
//! writing the last group's deliveries to a hundred sockets: a group of
//! six round trips took about twice PostgreSQL's own time. Here the thread
//! sleeps in its own poll until an answer arrives and does nothing else.

use sqlx::postgres::{PgPool, PgPoolOptions};
use tokio::runtime::Handle;

use crate::store::StoreResult;

/// Connections of the writer pool: one for each group kind, since each
/// kind writes one group at a time.
pub const WRITER_CONNECTIONS: u32 = 2;

/// The thread and its runtime; dropped, the runtime stops and the thread
/// ends.
pub struct WriterRuntime {
    handle: Handle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl WriterRuntime {
    pub fn start() -> std::io::Result<WriterRuntime> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("pg-writer".into())
            .spawn(move || {
                runtime.block_on(async {
                    let _ = stopped.await;
                })
            })?;
        Ok(WriterRuntime {
            handle,
            stop: Some(stop),
        })
    }

    pub fn handle(&self) -> Handle {
        self.handle.clone()
    }

    /// A pool whose connections are made on this runtime, so its sockets
    /// are polled here (a connection the pool makes later is made by the
    /// writer task that asked for it, also here).
    pub async fn pool(&self, url: &str, options: PgPoolOptions) -> StoreResult<PgPool> {
        let url = url.to_string();
        let made = self
            .handle
            .spawn(async move { options.connect(&url).await })
            .await
            .map_err(|e| sqlx::Error::Protocol(format!("the writer runtime stopped: {e}")))?;
        Ok(made?)
    }
}

impl Drop for WriterRuntime {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
