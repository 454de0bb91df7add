//! Closes sockets whose key was revoked, or whose person was disabled, by
//! another process. REST revocation closes them at once in this process;
//! the operator CLI (and, later, other hub nodes) only write `revoked_at`
//! or `disabled_at`, which this sweep picks up. Rights they change (grants,
//! group members, channel state) bump the store's rights version, on whose
//! change the sweep drops the cached channel levels (ADR 0020 §3).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tracing::{info, warn};
use uuid::Uuid;

use crate::domain::{now_millis, Millis};
use crate::hub::Hub;
use crate::rpc::close_code;
use crate::store::StoreResult;

/// Revocations are looked for back to this far before the last sweep, so a
/// revoking process whose clock runs behind ours is not missed. Closing a
/// socket twice is harmless: a closed one has left the registry.
const CLOCK_SLACK_MS: i64 = 60_000;

/// What one sweep found that no earlier sweep acted on.
struct Fresh {
    /// `(principal, key id)` of keys revoked elsewhere.
    keys: Vec<(Uuid, String)>,
    /// People disabled elsewhere, with or without a key revoked with them.
    disabled: Vec<Uuid>,
}

/// What was acted on within the slack window, with its time, so each
/// revocation or disable is acted on once though every sweep sees it again.
#[derive(Default)]
struct Handled {
    keys: HashMap<String, Millis>,
    disabled: HashMap<Uuid, Millis>,
}

impl Handled {
    fn forget_before(&mut self, since: Millis) {
        self.keys.retain(|_, at| *at >= since);
        self.disabled.retain(|_, at| *at >= since);
    }
}

pub async fn run(hub: Arc<Hub>) {
    let interval = Duration::from_millis(hub.config.gateway.revocation_check_interval_ms);
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Sockets cannot predate the hub, so neither can a revocation that
    // matters to one.
    let mut since = now_millis() - CLOCK_SLACK_MS;
    let mut handled = Handled::default();
    let mut rights = RightsVersion::default();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = hub.shutdown.cancelled() => return,
        }
        let started = now_millis();
        match fresh(&hub, since, &mut handled).await {
            Ok(found) => {
                act(&hub, found);
                since = started - CLOCK_SLACK_MS;
                handled.forget_before(since);
            }
            Err(e) => warn!(error = %e, "checking for revoked keys failed"),
        }
        rights.check(&hub).await;
    }
}

/// The rights version last read; `None` before the first read, which only
/// records it: nothing can be cached from before the hub started.
#[derive(Default)]
struct RightsVersion(Option<i64>);

impl RightsVersion {
    /// Drops the cached channel levels when the version moved since the
    /// last read. A failed read keeps the last version, so the next read
    /// that succeeds still sees the change.
    async fn check(&mut self, hub: &Hub) {
        let now = match hub.store.rights_version().await {
            Ok(v) => v,
            Err(e) => {
                warn!(error = %e, "reading the rights version failed");
                return;
            }
        };
        if self.0.is_some_and(|seen| seen != now) {
            hub.memberships.invalidate_channels();
        }
        self.0 = Some(now);
    }
}

/// The revoked keys and disabled people since `since` not handled yet,
/// marked handled. A disable that found no active key revokes no key row,
/// so disables are read on their own (ADR 0020 §1).
async fn fresh(hub: &Hub, since: Millis, handled: &mut Handled) -> StoreResult<Fresh> {
    let revoked = hub.store.keys_revoked_since(since).await?;
    let disabled = hub.store.principals_disabled_since(since).await?;
    Ok(Fresh {
        keys: revoked
            .into_iter()
            .filter(|(_, key_id, at)| handled.keys.insert(key_id.clone(), *at).is_none())
            .map(|(principal, key_id, _)| (principal, key_id))
            .collect(),
        disabled: disabled
            .into_iter()
            .filter(|(person, at)| handled.disabled.insert(*person, *at).is_none())
            .map(|(person, _)| person)
            .collect(),
    })
}

fn act(hub: &Hub, found: Fresh) {
    if found.keys.is_empty() && found.disabled.is_empty() {
        return;
    }
    // A revocation elsewhere may be a person's disable, and a disable is
    // one, which cached memberships must learn (ADR 0020 §1): drop them
    // before the sockets close. Both are rare; the cache refills on use.
    hub.memberships.invalidate_all();
    for (principal, key_id) in found.keys {
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
    for person in found.disabled {
        // Whatever key a socket of a disabled person holds, it is closed.
        let keys: Vec<String> = hub
            .registry
            .connections(person)
            .into_iter()
            .map(|c| c.key_id)
            .collect();
        let closed = hub
            .registry
            .close_keys(person, &keys, close_code::KEY_REVOKED, "key revoked");
        if closed > 0 {
            info!(%person, closed, "closed sockets of a person disabled elsewhere");
        }
    }
}
