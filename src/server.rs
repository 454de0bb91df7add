//! Starting and stopping a hub: open the store, bind, serve REST and the
//! gateway on one port, and shut down gracefully.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::config::Config;
use crate::hub::Hub;

/// A running hub.
pub struct Server {
    pub addr: SocketAddr,
    pub hub: Arc<Hub>,
    task: JoinHandle<anyhow::Result<()>>,
}

impl Server {
    /// Opens the store, binds `server.listen` (port 0 picks a free port) and
    /// starts serving in the background.
    pub async fn start(config: Config) -> anyhow::Result<Server> {
        config.check_exposure()?;
        let store = crate::store::open(&config).await?;
        crate::webhooks::keys::check_at_startup(
            store.as_ref(),
            &config.webhooks,
            crate::domain::now_millis(),
        )
        .await?;
        let listener = TcpListener::bind(config.server.listen)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", config.server.listen))?;
        let addr = listener.local_addr()?;
        let hub = Hub::new(config, store, crate::handlers::router()).await?;
        let app = crate::http::router(hub.clone());
        hub.tasks.spawn(crate::events::retention::run(
            crate::events::retention::Retention {
                config: hub.config.events.clone(),
                store: hub.store.clone(),
                events: hub.events.clone(),
                limiter: hub.limiter.clone(),
                shutdown: hub.shutdown.clone(),
            },
        ));
        hub.tasks
            .spawn(crate::gateway::revocations::run(hub.clone()));
        let released = hub.store.release_job_locks().await?;
        if released > 0 {
            info!(
                jobs = released,
                "released job locks left by the previous run"
            );
        }
        hub.tasks.spawn(crate::jobs::run(hub.clone()));
        let shutdown = hub.shutdown.clone();
        let task = tokio::spawn(async move {
            // Small frames must not wait for Nagle's algorithm and delayed
            // ACKs (a 40 ms stall per frame otherwise).
            let listener =
                axum::serve::ListenerExt::tap_io(listener, |tcp: &mut tokio::net::TcpStream| {
                    let _ = tcp.set_nodelay(true);
                });
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { shutdown.cancelled().await })
                .await?;
            Ok(())
        });
        Ok(Server { addr, hub, task })
    }

    /// Stops accepting, lets in-flight requests finish within
    /// `server.shutdown_grace_ms`, and closes every socket with 1001.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        let grace = Duration::from_millis(self.hub.config.server.shutdown_grace_ms);
        self.hub.shutdown.cancel();
        self.hub.connections.close();
        self.hub.tasks.close();
        // Connections drain within the grace period; the margin covers the
        // close handshake.
        let margin = Duration::from_secs(5);
        if tokio::time::timeout(grace + margin, self.hub.connections.wait())
            .await
            .is_err()
        {
            warn!("connections still open after the grace period");
        }
        if tokio::time::timeout(margin, self.hub.tasks.wait())
            .await
            .is_err()
        {
            warn!("background tasks still running after the grace period");
        }
        match tokio::time::timeout(margin, self.task).await {
            Ok(joined) => joined??,
            Err(_) => warn!("HTTP server did not stop in time"),
        }
        info!("hub stopped");
        Ok(())
    }
}

/// `switchboard serve`: runs until SIGINT or SIGTERM.
pub async fn serve(config: Config) -> anyhow::Result<()> {
    let server = Server::start(config).await?;
    info!(
        addr = %server.addr,
        backend = ?server.hub.store.backend(),
        "switchboard listening"
    );
    // A stable line on stdout that scripts and tests wait for.
    println!("switchboard listening on http://{}", server.addr);
    wait_for_signal().await;
    info!("shutdown requested; draining");
    server.shutdown().await
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
