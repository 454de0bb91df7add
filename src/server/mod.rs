//! Starting and stopping a hub: open the store, bind, serve REST and the
//! gateway on one port, and shut down gracefully.

mod connection;
mod listener;
mod slots;

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
                audit_retention_ms: hub.config.audit.retention_ms(),
                limiters: hub.limiters.clone(),
                shutdown: hub.shutdown.clone(),
            },
        ));
        hub.tasks.spawn(crate::hub::denials::run(
            hub.denials.clone(),
            hub.store.clone(),
            hub.config.audit.flush_interval_ms,
            hub.shutdown.clone(),
        ));
        hub.tasks
            .spawn(crate::gateway::revocations::run(hub.clone()));
        crate::gateway::control::spawn(hub.clone()).await;
        crate::events::remote::Remote {
            bus: hub.events.clone(),
            cluster: hub.cluster.clone(),
            store: hub.store.clone(),
            poll_interval: Duration::from_millis(hub.config.cluster.poll_interval_ms),
            shutdown: hub.shutdown.clone(),
        }
        .spawn(&hub.tasks)
        .await;
        release_job_locks(&hub).await?;
        // Before the listener: a gate anywhere finds this node's app
        // sockets from their first connect (ADR 0035).
        crate::hooks::presence::start(&hub).await?;
        hub.tasks.spawn(crate::hooks::presence::run(hub.clone()));
        hub.tasks.spawn(crate::hooks::relay::serve(hub.clone()));
        hub.tasks.spawn(crate::jobs::run(hub.clone()));
        hub.tasks
            .spawn(crate::jobs::webhook_deliveries::run(hub.clone()));
        hub.tasks.spawn(crate::hosted::sweep::run(hub.clone()));
        let cfg = &hub.config.server;
        let caps = fit_descriptor_limit(
            Caps {
                total: cfg.max_connections,
                per_address: cfg.max_connections_per_address,
            },
            &hub.config,
        );
        let listener = listener::Listener {
            listener,
            app,
            slots: slots::Slots::new(caps.total, caps.per_address),
            timeouts: connection::Timeouts {
                header_read: Duration::from_millis(cfg.header_read_timeout_ms),
                idle: Duration::from_millis(cfg.idle_timeout_ms),
            },
            shutdown: hub.shutdown.clone(),
        };
        let task = tokio::spawn(async move {
            listener.run().await;
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
        // The listener task ends when its HTTP connections drained, so REST
        // denials recorded during the drain are in the log before the last
        // flush.
        let served = match tokio::time::timeout(margin, self.task).await {
            Ok(joined) => joined?,
            Err(_) => {
                warn!("HTTP server did not stop in time");
                Ok(())
            }
        };
        flush_cluster(&self.hub).await;
        // The last flush, with the store still open. It closes the log: a
        // handler still running after a timed-out wait has its denial
        // counted in `switchboard_audit_denials_dropped_total`, not lost
        // silently.
        self.hub.denials.close(self.hub.store.as_ref()).await;
        served?;
        info!("hub stopped");
        Ok(())
    }
}

/// How long a drain waits for NATS to take what the node queued for it.
/// The messages are signals whose loss only delays (the other nodes' log
/// check and sweep), so a NATS that is down or slow holds the exit no
/// longer than this.
const CLUSTER_FLUSH_WITHIN: Duration = Duration::from_secs(2);

/// In a cluster, after the sockets, the background tasks and the HTTP
/// requests ended (so every commit of the drain has queued its wake-up):
/// the outbox and the client's buffer go to NATS before the process exits
/// (ADR 0034, 2026-12-02 drain).
async fn flush_cluster(hub: &Hub) {
    if hub.cluster.client().is_none() {
        return;
    }
    if hub.cluster.flush(CLUSTER_FLUSH_WITHIN).await {
        info!("cluster messages flushed to NATS");
    } else {
        warn!(
            within_ms = CLUSTER_FLUSH_WITHIN.as_millis() as u64,
            "cluster messages not all flushed to NATS in time; other nodes find their events by the log check"
        );
    }
}

/// Alone on its database, a hub that starts owns every job lock: the
/// process that took them is gone, so they are released at once. In a
/// cluster the other nodes' locks are live claims; a lock left by a node
/// that died lapses after `jobs.lock_ms` and another node takes the job.
async fn release_job_locks(hub: &Hub) -> anyhow::Result<()> {
    if crate::hooks::presence::clustered(hub) {
        return Ok(());
    }
    let released = hub.store.release_job_locks().await?;
    if released > 0 {
        info!(
            jobs = released,
            "released job locks left by the previous run"
        );
    }
    Ok(())
}

/// Descriptors kept free for everything that is not a client connection:
/// the listener, logs, the store's files (an SQLite connection holds the
/// database, its WAL and its shared-memory file), outgoing requests.
fn reserved_descriptors(config: &Config) -> usize {
    64 + 3 * config.storage.max_connections as usize
}

/// The connection caps: `server.max_connections` and
/// `server.max_connections_per_address`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Caps {
    total: usize,
    per_address: usize,
}

impl Caps {
    /// Both caps lowered by the same ratio to fit `room` connections in all,
    /// so that one address keeps the same share of the slots it would have
    /// had (clamping the per-address cap to the lowered total would let one
    /// address take every slot).
    fn fitted(self, room: usize) -> Caps {
        if room >= self.total {
            return self;
        }
        let scaled = (self.per_address as u128 * room as u128 / self.total.max(1) as u128) as usize;
        Caps {
            total: room,
            per_address: scaled.clamp(1, room),
        }
    }
}

/// Raises the soft descriptor limit to the hard one, then lowers the caps
/// to what still fits, so that accepting can never exhaust the descriptor
/// table.
fn fit_descriptor_limit(wanted: Caps, config: &Config) -> Caps {
    let Some(limit) = raise_descriptor_limit() else {
        return wanted;
    };
    let room = limit.saturating_sub(reserved_descriptors(config)).max(1);
    let fitted = wanted.fitted(room);
    if fitted != wanted {
        warn!(
            max_connections = wanted.total,
            effective_max_connections = fitted.total,
            max_connections_per_address = wanted.per_address,
            effective_max_connections_per_address = fitted.per_address,
            descriptor_limit = limit,
            "server.max_connections and server.max_connections_per_address lowered by the same ratio to fit the open-file limit"
        );
    }
    fitted
}

#[cfg(unix)]
fn raise_descriptor_limit() -> Option<usize> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return None;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
    }
    usize::try_from(lim.rlim_cur).ok()
}

#[cfg(not(unix))]
fn raise_descriptor_limit() -> Option<usize> {
    None
}

/// `switchboard serve`: runs until SIGINT or SIGTERM.
pub async fn serve(config: Config) -> anyhow::Result<()> {
    // Installed before the hub announces itself, so a signal sent as soon
    // as the listening line appears drains the hub instead of killing it.
    let signals = ShutdownSignals::install()?;
    let server = Server::start(config).await?;
    info!(
        addr = %server.addr,
        backend = ?server.hub.store.backend(),
        "switchboard listening"
    );
    // A stable line on stdout that scripts and tests wait for.
    println!("switchboard listening on http://{}", server.addr);
    // The hub stops by itself only when it must not serve on (another
    // process took this node's cluster id): it drains, then fails.
    let hub_stopped = tokio::select! {
        _ = signals.wait() => false,
        _ = server.hub.shutdown.cancelled() => true,
    };
    info!("shutdown requested; draining");
    server.shutdown().await?;
    if hub_stopped {
        anyhow::bail!("stopped: another node took this node's cluster.node_id");
    }
    Ok(())
}

/// SIGINT and SIGTERM, registered with the OS when installed (tokio's
/// `ctrl_c()` registers only when first polled).
struct ShutdownSignals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl ShutdownSignals {
    fn install() -> anyhow::Result<ShutdownSignals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(ShutdownSignals {
                interrupt: signal(SignalKind::interrupt())?,
                terminate: signal(SignalKind::terminate())?,
            })
        }
        #[cfg(not(unix))]
        Ok(ShutdownSignals {})
    }

    async fn wait(mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
        #[cfg(not(unix))]
        {
            let _ = &mut self;
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Caps;

    #[test]
    fn a_low_descriptor_limit_scales_both_caps_by_the_same_ratio() {
        let wanted = Caps {
            total: 10_000,
            per_address: 2_000,
        };
        assert_eq!(
            wanted.fitted(900),
            Caps {
                total: 900,
                per_address: 180
            },
            "one address keeps a fifth of the slots, not all of them"
        );
        assert_eq!(
            wanted.fitted(20_000),
            wanted,
            "room to spare changes nothing"
        );
        assert_eq!(wanted.fitted(3).per_address, 1, "never below one");
        let same = Caps {
            total: 100,
            per_address: 100,
        };
        assert_eq!(same.fitted(10).per_address, 10);
    }
}
