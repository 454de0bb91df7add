//! Closes sockets whose key was revoked by another process. REST revocation
//! closes them at once in this process; the operator CLI (and, later, other
//! hub nodes) only write `revoked_at`, which this sweep picks up.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tracing::{info, warn};

use crate::domain::now_millis;
use crate::hub::Hub;
use crate::rpc::close_code;

/// Revocations are looked for back to this far before the last sweep, so a
/// revoking process whose clock runs behind ours is not missed. Closing a
/// socket twice is harmless: a closed one has left the registry.
const CLOCK_SLACK_MS: i64 = 60_000;

pub async fn run(hub: Arc<Hub>) {
    let interval = Duration::from_millis(hub.config.gateway.revocation_check_interval_ms);
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Sockets cannot predate the hub, so neither can a revocation that
    // matters to one.
    let mut since = now_millis() - CLOCK_SLACK_MS;
    // Keys handled within the slack window, with their `revoked_at`, so
    // each revocation is acted on once though every sweep sees it again.
    let mut handled: HashMap<String, i64> = HashMap::new();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = hub.shutdown.cancelled() => return,
        }
        let started = now_millis();
        match hub.store.keys_revoked_since(since).await {
            Ok(revoked) => {
                let fresh: Vec<_> = revoked
                    .into_iter()
                    .filter(|(_, key_id, at)| handled.insert(key_id.clone(), *at).is_none())
                    .collect();
                if !fresh.is_empty() {
                    // A revocation elsewhere may be a person's disable,
                    // which cached memberships must learn (ADR 0020 §1):
                    // drop them before the sockets close. Revocations are
                    // rare; the cache refills on use.
                    hub.memberships.invalidate_all();
                }
                for (principal, key_id, _) in fresh {
                    let closed = hub.registry.close_keys(
                        principal,
                        std::slice::from_ref(&key_id),
                        close_code::KEY_REVOKED,
                        "key revoked",
                    );
                    if closed > 0 {
                        info!(%principal, %key_id, closed, "closed sockets of a key revoked elsewhere");
                    }
                }
                since = started - CLOCK_SLACK_MS;
                handled.retain(|_, at| *at >= since);
            }
            Err(e) => warn!(error = %e, "checking for revoked keys failed"),
        }
    }
}
