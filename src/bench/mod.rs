//! `switchboard bench`: reproducible measurements of the hub over real
//! loopback WebSockets, reported as a table and as JSON. Comparisons are
//! ratios within one run (the load generator shares the machine); nothing
//! here is a pass/fail threshold. See docs/benchmarks.md.

mod ceiling;
pub mod chaos;
mod cluster;
mod connections;
mod fanout_load;
mod layout;
mod report;
mod scenarios;
mod stats;
pub mod throwaway_nats;
pub mod throwaway_pg;
mod written;

use std::path::PathBuf;

use clap::Args;

pub use report::Report;

#[derive(Args, Clone, Debug)]
pub struct BenchArgs {
    /// Scenarios to run: fanout, hook, connections, catchup, layout, chaos,
    /// cluster, or all (every one but chaos, which is a test more than a
    /// measure, and cluster, which needs nats-server and PostgreSQL).
    /// (fanout always runs the bare-socket ceiling beside it.)
    #[arg(long, default_value = "all")]
    pub scenario: String,
    /// Backends for fanout and chaos: sqlite, postgres or both. PostgreSQL runs on a
    /// throwaway server started from initdb/pg_ctl, or on --postgres-url.
    #[arg(long, default_value = "sqlite")]
    pub backend: String,
    /// An existing PostgreSQL database to run on instead of a throwaway
    /// server (its tables are written to).
    #[arg(long)]
    pub postgres_url: Option<String>,
    /// storage.sqlite_synchronous of the measured hubs: full (the default,
    /// survives power loss) or normal (survives a hub crash only).
    #[arg(long, default_value = "full")]
    pub sqlite_synchronous: String,
    /// Group sizes for fanout.
    #[arg(long, value_delimiter = ',', default_value = "10,100,1000")]
    pub fanout_sizes: Vec<usize>,
    /// Deliveries to aim for per fanout size (messages = deliveries / N).
    #[arg(long, default_value_t = 50_000)]
    pub fanout_deliveries: usize,
    /// Deliveries sent and read before each fanout run is measured (not
    /// counted): a short run is otherwise mostly the hub's first moments.
    #[arg(long, default_value_t = 20_000)]
    pub fanout_warm_up_deliveries: usize,
    /// Sends in flight at once in fanout (1 measures latency unloaded).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..))]
    pub inflight: u64,
    /// Offer fanout's messages at this rate (messages per second) instead
    /// of keeping `--inflight` in flight: latency below saturation, for
    /// example at half the rate a saturated run reached. 0: saturated.
    #[arg(long, default_value_t = 0)]
    pub fanout_rate: u64,
    /// Offered loads (messages per second) for the hook scenario.
    #[arg(long, value_delimiter = ',', default_value = "100,1000,5000")]
    pub hook_rates: Vec<u64>,
    /// How long each offered load of the hook scenario runs, in seconds.
    #[arg(long, default_value_t = 3)]
    pub hook_seconds: u64,
    /// Idle connections to open.
    #[arg(long, default_value_t = 20_000)]
    pub connections: usize,
    /// Events stored for one agent before catching up.
    #[arg(long, default_value_t = 100_000)]
    pub catchup_events: usize,
    /// The chaos run's seed (printed; a random one when absent).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Sockets the chaos run drops, at random points.
    #[arg(long, default_value_t = 1_000)]
    pub chaos_drops: usize,
    /// Times the chaos run SIGKILLs the hub and starts it again.
    #[arg(long, default_value_t = 20)]
    pub chaos_kills: usize,
    /// Acknowledged sends between two of the chaos run's kills.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..))]
    pub chaos_acks_between_kills: u64,
    /// The chaos run fails if it takes longer than this, per backend.
    #[arg(long, default_value_t = 1_800)]
    pub chaos_deadline_seconds: u64,
    /// Receivers of the cluster scenario's group, spread over the nodes.
    #[arg(long, default_value_t = 100)]
    pub cluster_receivers: usize,
    /// Deliveries to aim for per spread of the cluster scenario.
    #[arg(long, default_value_t = 20_000)]
    pub cluster_deliveries: usize,
    /// Tiny sizes for a quick check that every scenario works (used by CI).
    #[arg(long)]
    pub smoke: bool,
    /// Write the JSON report here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

impl BenchArgs {
    fn shrink_for_smoke(&mut self) {
        if self.smoke {
            self.fanout_sizes = vec![3];
            // Enough that the stored messages grow the file by whole pages.
            self.fanout_deliveries = 600;
            self.fanout_warm_up_deliveries = 30;
            self.hook_rates = vec![50];
            self.hook_seconds = 1;
            self.connections = 20;
            self.catchup_events = 200;
            self.chaos_drops = 20;
            self.chaos_kills = 2;
            self.chaos_acks_between_kills = 20;
            self.cluster_receivers = 3;
            self.cluster_deliveries = 60;
        }
    }

    fn wants(&self, scenario: &str) -> bool {
        (self.scenario == "all" && !matches!(scenario, "chaos" | "cluster"))
            || self.scenario.split(',').any(|s| s == scenario)
    }

    fn backends(&self) -> Vec<&str> {
        match self.backend.as_str() {
            "both" => vec!["sqlite", "postgres"],
            b => vec![b],
        }
    }

    /// The database of a run on `backend`: none for SQLite (the hub's data
    /// directory), `--postgres-url` or a fresh one on the throwaway server.
    async fn database_url(&self, backend: &str) -> anyhow::Result<Option<String>> {
        Ok(match backend {
            "postgres" => Some(match &self.postgres_url {
                Some(u) => u.clone(),
                None => throwaway_pg::database().await?,
            }),
            "sqlite" => None,
            other => anyhow::bail!("unknown backend {other}"),
        })
    }
}

pub async fn run(mut args: BenchArgs) -> anyhow::Result<Report> {
    args.shrink_for_smoke();
    raise_fd_limit();
    // The throwaway PostgreSQL must not outlive the bench, whether it
    // ends, fails or is interrupted (a timeout's SIGTERM, Ctrl-C).
    let interrupted = interrupted()?;
    let outcome = tokio::select! {
        biased;
        signal = interrupted => Err(anyhow::anyhow!("interrupted by {signal}")),
        measured = measure(&args) => measured,
    };
    throwaway_pg::stop();
    let report = outcome?;
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report.to_json())?)?;
    }
    let failures: Vec<String> = report
        .entries
        .iter()
        .filter(|e| e.scenario == "chaos")
        .flat_map(chaos::failures)
        .collect();
    anyhow::ensure!(
        failures.is_empty(),
        "the chaos run broke a promise: {}",
        failures.join(", ")
    );
    Ok(report)
}

/// Resolves on SIGINT or SIGTERM. The handlers are installed when this is
/// called, not when the future is first polled: the measure beside it can
/// block its thread at once (a throwaway PostgreSQL's `initdb`), and a
/// signal before the handlers would kill the bench with the server left
/// running.
fn interrupted() -> anyhow::Result<impl std::future::Future<Output = &'static str>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => "SIGINT",
            _ = term.recv() => "SIGTERM",
        }
    })
}

async fn measure(args: &BenchArgs) -> anyhow::Result<Report> {
    let mut report = Report::new(args);
    if args.wants("fanout") {
        for &n in &args.fanout_sizes {
            // Databases first: a throwaway PostgreSQL starts before the
            // ceiling, which on a schedule can run for minutes.
            let mut urls = Vec::new();
            for backend in args.backends() {
                urls.push((backend, args.database_url(backend).await?));
            }
            let ceiling = ceiling::fanout(n, args.fanout_deliveries, args.fanout_rate).await?;
            report.push(ceiling.clone());
            for (backend, url) in urls {
                let sync = match args.sqlite_synchronous.as_str() {
                    "normal" => crate::config::SqliteSynchronous::Normal,
                    "full" => crate::config::SqliteSynchronous::Full,
                    other => {
                        anyhow::bail!("--sqlite-synchronous must be full or normal, not {other}")
                    }
                };
                let run = scenarios::FanoutRun {
                    deliveries: args.fanout_deliveries,
                    warm_up: args.fanout_warm_up_deliveries,
                    inflight: args.inflight as usize,
                    rate: args.fanout_rate,
                    backend,
                    database_url: url,
                    sync,
                };
                let mut hub = scenarios::fanout(n, run).await?;
                hub.ratio("deliveries_per_second", &ceiling, "hub_over_ceiling");
                if args.fanout_rate > 0 {
                    hub.latency_over(&ceiling);
                }
                report.push(hub);
            }
        }
    }
    if args.wants("hook") {
        for r in scenarios::hook(&args.hook_rates, args.hook_seconds).await? {
            report.push(r);
        }
    }
    if args.wants("connections") {
        report.push(connections::connections(args.connections).await?);
    }
    if args.wants("catchup") {
        report.push(scenarios::catchup(args.catchup_events).await?);
    }
    if args.wants("layout") {
        layout::run(&layout::LayoutArgs::from(args)?, &mut report).await?;
    }
    if args.wants("cluster") {
        let plan = cluster::ClusterRun {
            n: args.cluster_receivers.max(1),
            deliveries: args.cluster_deliveries,
            inflight: args.inflight as usize,
            postgres_url: args.postgres_url.clone(),
        };
        for entry in cluster::run(&plan).await? {
            report.push(entry);
        }
    }
    if args.wants("chaos") {
        let seed = args.seed.unwrap_or_else(rand::random);
        for backend in args.backends() {
            report.push(
                chaos::run(chaos::ChaosPlan {
                    backend: backend.to_string(),
                    database_url: args.database_url(backend).await?,
                    seed,
                    drops: args.chaos_drops,
                    kills: args.chaos_kills,
                    acks_between: args.chaos_acks_between_kills as usize,
                    deadline: std::time::Duration::from_secs(args.chaos_deadline_seconds),
                })
                .await?,
            );
        }
    }
    Ok(report)
}

/// Thousands of sockets need thousands of descriptors.
fn raise_fd_limit() {
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            // Root may raise the hard limit too; others get the hard limit.
            let wanted = libc::rlimit {
                rlim_cur: 1 << 20,
                rlim_max: lim.rlim_max.max(1 << 20),
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) != 0 && lim.rlim_cur < lim.rlim_max {
                lim.rlim_cur = lim.rlim_max;
                libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            }
        }
    }
}
