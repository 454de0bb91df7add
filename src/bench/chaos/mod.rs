//! `switchboard bench --scenario chaos`: agents send to a group and to a
//! task conversation whose messages a hook app decides, while sockets are
//! dropped at random points, the hub is SIGKILLed and started again on the
//! same database, and one consumer is slowed until the hub closes it as
//! slow (4008). Then every receiver catches up and the checker compares
//! what each got against what each sender saw acknowledged. The random
//! choices come from one seed, printed, and `--seed` replays them (the
//! interleaving with the hub's own timing still differs run to run).

mod actors;
pub mod checker;
mod hub;
mod receiver;
mod setup;
mod slow;

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use self::actors::{Acks, KillPlan, Sender, Target};
use self::checker::{Evidence, Figures, ReceiverLog};
use self::hub::HubProcess;
use self::receiver::{Command, Receiver, Shared};
use self::setup::World;
use super::report::Entry;

/// Every socket's outbound queue: small, so the slow consumer is closed
/// after a few hundred frames; the others read at once and never fill it.
const QUEUE: u32 = 128;

/// One chaos run's shape (`--seed`, `--chaos-drops`, `--chaos-kills`).
#[derive(Clone, Debug)]
pub struct ChaosPlan {
    pub backend: String,
    pub database_url: Option<String>,
    pub seed: u64,
    pub drops: usize,
    pub kills: usize,
    /// Acknowledged sends between two kills.
    pub acks_between: usize,
    /// The run fails past this, whatever it was doing.
    pub deadline: Duration,
}

/// Runs the scenario on a hub of its own; the entry carries the figures
/// (see [`failures`] for the ones that fail the bench).
pub async fn run(plan: ChaosPlan) -> anyhow::Result<Entry> {
    println!(
        "chaos on {}: seed {} ({} drops, {} kills)",
        plan.backend, plan.seed, plan.drops, plan.kills
    );
    let dir = tempfile::tempdir()?;
    let hub = Arc::new(HubProcess::start(dir.path(), plan.database_url.clone(), QUEUE).await?);
    let outcome = tokio::time::timeout(plan.deadline, chaos(&plan, hub.clone())).await;
    hub.stop().await;
    let failed = |e: anyhow::Error| {
        let kept = dir.keep();
        e.context(format!(
            "chaos on {} (seed {}); the hub's log is kept in {}",
            plan.backend,
            plan.seed,
            kept.join("hub.log").display()
        ))
    };
    match outcome {
        Ok(Ok(entry)) => Ok(entry),
        Ok(Err(e)) => Err(failed(e)),
        Err(_) => Err(failed(anyhow::anyhow!(
            "did not finish within {:?}",
            plan.deadline
        ))),
    }
}

/// The "must be 0" figures of a chaos entry that are not.
pub fn failures(entry: &Entry) -> Vec<String> {
    let mut out = Vec::new();
    for name in checker::MUST_BE_ZERO {
        if let Some(n) = entry.number(name).filter(|n| *n != 0.0) {
            out.push(format!("{name} = {n}"));
        }
    }
    if entry.results.get("slow_consumer_close_code") != Some(&serde_json::json!(4008)) {
        out.push("the slow consumer was not closed with 4008".into());
    }
    out
}

/// What runs while the faults go on.
struct Actors {
    receivers: Vec<(
        mpsc::Sender<Command>,
        JoinHandle<anyhow::Result<ReceiverLog>>,
    )>,
    senders: Vec<JoinHandle<()>>,
    stop: CancellationToken,
    acks: Arc<Acks>,
    shared: Arc<Shared>,
}

async fn chaos(plan: &ChaosPlan, hub: Arc<HubProcess>) -> anyhow::Result<Entry> {
    let mut rng = StdRng::seed_from_u64(plan.seed);
    let world = setup::world(&hub).await?;
    let (mut actors, targets) = start_actors(&world, &hub, &mut rng);
    let started = Instant::now();
    let (kills_tx, mut kills_rx) = watch::channel(0usize);
    let calm = Arc::new(tokio::sync::Mutex::new(()));
    let killer = tokio::spawn(actors::killer(
        hub.clone(),
        KillPlan {
            kills: plan.kills,
            acks_between: plan.acks_between,
            max_delay: Duration::from_millis(300),
        },
        actors.acks.clone(),
        calm.clone(),
        kills_tx,
        StdRng::seed_from_u64(rng.gen()),
    ));
    let dropper = tokio::spawn(actors::dropper(
        targets,
        plan.drops,
        actors.shared.clone(),
        StdRng::seed_from_u64(rng.gen()),
        actors.stop.clone(),
    ));
    // The slow consumer's turn comes half way through the kills.
    let half = plan.kills.div_ceil(2);
    let _ = kills_rx.wait_for(|k| *k >= half).await;
    let slowed = slow::phase(
        &hub,
        &world,
        &actors.receivers[world.slow_index].0,
        &actors.acks,
        &calm,
    )
    .await;
    let slowed = match slowed {
        Ok(s) => s,
        Err(e) => return Err(receiver_failure(&mut actors).await.unwrap_or(e)),
    };
    killer.await??;
    dropper.await?;
    let chaos_seconds = started.elapsed().as_secs_f64();
    let drops = actors
        .shared
        .drops
        .load(std::sync::atomic::Ordering::SeqCst);
    let (figures, recovery) = settle(&hub, &world, actors).await?;
    let mut entry = Entry::new("chaos")
        .param("backend", plan.backend.as_str())
        .param("seed", plan.seed.to_string())
        .param("drops_wanted", plan.drops)
        .param("kills_wanted", plan.kills)
        .param("agents", world.group.len())
        .param("outbound_queue_capacity", QUEUE);
    entry.result("socket_drops", drops);
    entry.result("hub_kills", plan.kills);
    entry.result("chaos_seconds", (chaos_seconds * 10.0).round() / 10.0);
    record(&mut entry, &figures);
    entry.result("longest_recovery_ms", recovery.first_ms);
    entry.result("longest_all_resumed_ms", recovery.all_ms);
    entry.result("slow_consumer_sends", slowed.sends);
    entry.result(
        "slow_consumer_close_code",
        slowed
            .close_code
            .map_or(serde_json::Value::Null, Into::into),
    );
    Ok(entry)
}

/// Receivers for every agent but the flooder, senders for the group, the
/// hook app; returns them and what the dropper may drop.
fn start_actors(world: &World, hub: &HubProcess, rng: &mut StdRng) -> (Actors, Vec<Target>) {
    let stop = CancellationToken::new();
    let acks = Acks::new();
    let shared = Arc::new(Shared::default());
    let mut targets = Vec::new();
    let mut receivers = Vec::new();
    for (index, agent) in world.receivers().enumerate() {
        let (tx, commands) = mpsc::channel(4);
        let receiver = Receiver {
            index,
            agent_id: agent.id,
            key: agent.key.clone(),
            hub: hub.watch(),
            commands,
            shared: shared.clone(),
            seed: rng.gen(),
        };
        targets.push(Target::Receiver(tx.clone()));
        receivers.push((tx, tokio::spawn(receiver.run())));
    }
    let mut senders = Vec::new();
    for agent in &world.group {
        let (tx, drops) = mpsc::channel(1);
        targets.push(Target::Socket(tx));
        let sender = Sender {
            key: agent.key.clone(),
            conversations: world.conversations_of(agent.id),
            hub: hub.watch(),
            drops,
            rng: StdRng::seed_from_u64(rng.gen()),
            think: Duration::from_millis(20),
        };
        senders.push(tokio::spawn(sender.run(
            acks.clone(),
            shared.clone(),
            stop.clone(),
        )));
    }
    let (tx, drops) = mpsc::channel(1);
    targets.push(Target::Socket(tx));
    senders.push(tokio::spawn(actors::app(
        world.app_key.clone(),
        hub.watch(),
        drops,
        shared.clone(),
        stop.clone(),
    )));
    let actors = Actors {
        receivers,
        senders,
        stop,
        acks,
        shared,
    };
    (actors, targets)
}

/// The error of a receiver that stopped early, if one did: the cause of
/// whatever failed for want of it (its command channel closed).
async fn receiver_failure(actors: &mut Actors) -> Option<anyhow::Error> {
    for (_, handle) in actors.receivers.iter_mut() {
        if handle.is_finished() {
            match handle.await {
                Ok(Err(e)) => return Some(e),
                Err(e) => return Some(e.into()),
                Ok(Ok(_)) => {}
            }
        }
    }
    None
}

/// The longest times from a kill to the first receiver's connect and to
/// every receiver's.
struct Recovery {
    first_ms: f64,
    all_ms: f64,
}

/// Stops the load, reads the verdicts, lets every receiver catch up, and
/// checks.
async fn settle(
    hub: &HubProcess,
    world: &World,
    actors: Actors,
) -> anyhow::Result<(Figures, Recovery)> {
    actors.stop.cancel();
    for s in actors.senders {
        s.await?;
    }
    // Read before the receivers finish: a verdict seen here has its
    // deliveries in the same commit, so before the log end they read to.
    let verdicts = setup::verdicts(hub, world).await?;
    let mut logs = Vec::new();
    for (tx, _) in &actors.receivers {
        // A receiver that stopped early has its own error, below.
        let _ = tx.send(Command::Finish).await;
    }
    for (_, handle) in actors.receivers {
        logs.push(handle.await??);
    }
    // Read again for the count: a second verdict may have come since.
    let all_verdicts = setup::verdicts(hub, world).await?;
    let acks = actors.acks.list.lock().expect("acks").clone();
    let members = world.members();
    let figures = checker::check(&Evidence {
        receivers: &logs,
        acks: &acks,
        members: &members,
        verdicts: &verdicts,
        recounted: &all_verdicts,
    });
    let connects = actors.shared.connects.lock().expect("connects").clone();
    Ok((figures, recovery(hub, &connects, logs.len())))
}

fn recovery(hub: &HubProcess, connects: &[receiver::Connected], receivers: usize) -> Recovery {
    let mut first_ms: f64 = 0.0;
    let mut all_ms: f64 = 0.0;
    let mut generation = 1;
    while let Some(killed) = hub.killed_at(generation) {
        let mut firsts = vec![None; receivers];
        for c in connects.iter().filter(|c| c.generation == generation) {
            let ms = (c.at - killed).as_secs_f64() * 1000.0;
            let slot = &mut firsts[c.receiver];
            *slot = Some(slot.map_or(ms, |m: f64| m.min(ms)));
        }
        let got: Vec<f64> = firsts.into_iter().flatten().collect();
        if let Some(first) = got.iter().copied().reduce(f64::min) {
            first_ms = first_ms.max(first);
        }
        if got.len() == receivers {
            all_ms = all_ms.max(got.into_iter().fold(0.0, f64::max));
        }
        generation += 1;
    }
    Recovery {
        first_ms: (first_ms * 10.0).round() / 10.0,
        all_ms: (all_ms * 10.0).round() / 10.0,
    }
}

fn record(entry: &mut Entry, f: &Figures) {
    entry.result("acked_sends", f.acked_sends);
    entry.result("acked_blocked", f.acked_blocked);
    entry.result("acked_pending", f.acked_pending);
    entry.result("unanswered_verdicts", f.unanswered_verdicts);
    entry.result("expected_deliveries", f.expected_deliveries);
    entry.result("events_received", f.events_received);
    entry.result("events_lost", f.events_lost);
    entry.result("duplicates_per_socket", f.duplicates_per_socket);
    entry.result("gaps_per_socket", f.gaps_per_socket);
    entry.result(
        "duplicates_across_reconnects",
        f.duplicates_across_reconnects,
    );
    entry.result("double_verdicts", f.double_verdicts);
    entry.result("blocked_but_delivered", f.blocked_but_delivered);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(lost: usize, close: Option<u16>) -> Entry {
        let mut e = Entry::new("chaos");
        record(
            &mut e,
            &Figures {
                events_lost: lost,
                ..Figures::default()
            },
        );
        e.result(
            "slow_consumer_close_code",
            close.map_or(serde_json::Value::Null, Into::into),
        );
        e
    }

    #[test]
    fn a_kept_promise_fails_nothing() {
        assert_eq!(failures(&entry(0, Some(4008))), Vec::<String>::new());
    }

    #[test]
    fn a_loss_or_a_slow_consumer_not_closed_4008_fails_the_bench() {
        assert_eq!(failures(&entry(2, Some(4008))), vec!["events_lost = 2"]);
        assert_eq!(
            failures(&entry(0, None)),
            vec!["the slow consumer was not closed with 4008"]
        );
    }
}
