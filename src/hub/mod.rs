//! The hub's shared state: what every connection, handler and route reaches.
//!
//! Dependencies point inward: `gateway`, `handlers`, `gates`, `hooks`,
//! `jobs`, `http` and `server` use the hub; the hub uses only the layers it
//! holds (config, store, the event bus, the protocol router, webhooks).

use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub mod autocomplete;
pub mod context;
mod control;
pub mod denials;
pub mod hook_health;
pub mod installation_cache;
pub mod installations;
mod long_poll;
pub mod membership;
pub mod rate;
pub mod registry;
pub mod runs;
pub mod throttle;

pub use context::{ConnectionInfo, RequestContext};
pub use denials::DenialLog;
pub use hook_health::HookHealth;
pub use installation_cache::InstallationCache;
pub use membership::{Membership, MembershipCache};
pub use rate::CallLimiters;
pub use registry::Registry;

use crate::config::Config;
use crate::events::EventBus;
use crate::protocol::router::Router;
use crate::store::DynStore;

pub struct Hub {
    pub config: Config,
    pub store: DynStore,
    pub registry: Registry,
    pub router: Router<RequestContext>,
    /// Calls per principal and rate class, across all of its sockets
    /// (`ratelimit.<class>`).
    pub limiters: Arc<CallLimiters>,
    /// Refused keys per source address (key guessing), over WebSocket
    /// connects and REST bearer keys alike.
    pub refused_keys: throttle::RefusedKeys,
    /// Cancelled when the hub begins a graceful shutdown.
    pub shutdown: CancellationToken,
    /// Connection loops, so shutdown can wait for them.
    pub connections: TaskTracker,
    /// Request handlers and other background work of this hub.
    pub tasks: TaskTracker,
    pub metrics: PrometheusHandle,
    pub sync_epoch: String,
    pub events: Arc<EventBus>,
    /// Who takes part in which conversation, for the send path's checks.
    pub memberships: MembershipCache,
    /// Each app's live installation, for the decision and the gates.
    pub installations: InstallationCache,
    /// Signed webhooks and other requests to app-owned URLs.
    pub webhook_egress: crate::webhooks::egress::EgressClient,
    /// Request-mode denials, aggregated until the flush task writes them.
    pub denials: Arc<DenialLog>,
    /// Autocomplete requests waiting for an app's late answer.
    pub autocomplete: autocomplete::OpenRequests,
    /// Each app's recent answers, in memory (`hooks.health_window_secs`).
    pub hook_health: HookHealth,
    /// The hosted App Card runs this process keeps alive (ADR 0031).
    pub runs: runs::LiveRuns,
    /// Requests to apps' `interactionsUrl` (ADR 0032).
    pub interactions: crate::webhooks::interactions::Client,
    /// This node's name and its link to the other nodes (ADR 0034).
    pub cluster: Arc<crate::cluster::Cluster>,
}

impl Hub {
    /// The router comes from the caller (the server assembles it from
    /// `handlers`), so the shared state does not depend on the layers that
    /// use it.
    pub async fn new(
        config: Config,
        store: DynStore,
        router: Router<RequestContext>,
    ) -> anyhow::Result<Arc<Hub>> {
        router
            .check_complete()
            .map_err(|e| anyhow::anyhow!("protocol catalogue is incomplete: {e}"))?;
        let g = &config.gateway;
        let sync_epoch = store.sync_epoch().await?;
        let webhook_egress =
            crate::webhooks::egress::EgressClient::from_config("webhook", &config.egress)?;
        let interactions = crate::webhooks::interactions::Client::from_config(&config)?;
        let store_for_events = store.clone();
        let replay_batch = config.events.replay_batch;
        let memberships = MembershipCache::new(membership_cache_entries(&config));
        let installations =
            InstallationCache::new(store.clone(), config.installation.cache_capacity);
        let cluster = Arc::new(crate::cluster::Cluster::start(&config.cluster).await?);
        let events = Arc::new(EventBus::new(
            store_for_events,
            replay_batch,
            cluster.clone(),
        ));
        // Group commits publish their own events, in commit order.
        if !store.commit_feed().listen(events.clone()) {
            anyhow::bail!("this store already feeds another hub's event bus");
        }
        let denials = Arc::new(DenialLog::new(&config.audit));
        let hook_health = HookHealth::new(std::time::Duration::from_secs(
            config.hooks.health_window_secs,
        ));
        Ok(Arc::new(Hub {
            limiters: Arc::new(CallLimiters::new(&config.ratelimit)),
            refused_keys: throttle::RefusedKeys::new(
                g.failed_connects_per_address,
                g.failed_connects_refill_per_minute,
                std::time::Duration::from_secs(g.known_key_ttl_seconds),
            ),
            config,
            store,
            registry: Registry::default(),
            router,
            shutdown: CancellationToken::new(),
            connections: TaskTracker::new(),
            tasks: TaskTracker::new(),
            metrics: crate::telemetry::metrics_handle(),
            sync_epoch,
            events,
            memberships,
            installations,
            webhook_egress,
            denials,
            autocomplete: autocomplete::OpenRequests::default(),
            hook_health,
            runs: runs::LiveRuns::default(),
            interactions,
            cluster,
        }))
    }
}

/// The membership cache's size: none in `nats` mode. Participants added on
/// another node have no database sweep that would drop a stale entry, so a
/// cached entry there could leave a new member out of a fan-out, or keep a
/// removed grant's reader in a channel, past any bound (ADR 0034 §4).
fn membership_cache_entries(config: &Config) -> usize {
    match config.cluster.mode {
        crate::config::ClusterMode::Single => config.messages.membership_cache_entries,
        crate::config::ClusterMode::Nats => 0,
    }
}
