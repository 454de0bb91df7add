//! Closes sockets whose key was revoked, or whose person was disabled, by
//! another process. REST revocation closes them at once in this process;
//! the operator CLI (and, later, other hub nodes) only write `revoked_at`
//! or `disabled_at`, which this sweep picks up. Rights they change (grants,
//! group members, channel state) bump the store's rights version, on whose
//! change the sweep drops the cached channel levels (ADR 0020 §3).
//!
//! Installations another process changed (ADR 0023 §6) are read here too:
//! each changed app's cached installation is dropped and read again from
//! the store, and its sockets are closed 4012 when it is not active, 4018
//! when it lacks `events:subscribe`. Keys and disables are read *before*
//! the installations, so an uninstall (keys revoked and row changed in one
//! commit) is seen either whole, as its installation alone, or not at all:
//! never as revoked keys alone, which would close with 4003 instead of
//! 4012. Installations are applied first, and a socket's first close code
//! is the one it gets.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tracing::{info, warn};
use uuid::Uuid;

use crate::domain::installation::{InstallationState, Scope};
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
    /// Apps whose installation changed elsewhere, and whether one of the
    /// changes was an uninstall.
    apps: HashMap<Uuid, bool>,
}

/// What was acted on within the slack window, with its time, so each
/// revocation or disable is acted on once though every sweep sees it again.
#[derive(Default)]
struct Handled {
    keys: HashMap<String, Millis>,
    disabled: HashMap<Uuid, Millis>,
    /// Installation row versions: `(row id, updated_at)`.
    installations: HashMap<(Uuid, Millis), Millis>,
}

impl Handled {
    fn forget_before(&mut self, since: Millis) {
        self.keys.retain(|_, at| *at >= since);
        self.disabled.retain(|_, at| *at >= since);
        self.installations.retain(|_, at| *at >= since);
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
                let apps_done = match close_inactive_apps(&hub, &found.apps).await {
                    Ok(()) => true,
                    Err(e) => {
                        // Acted on again by the next sweep (closing twice is
                        // harmless), which therefore reads from the same
                        // point: however long the store fails, no change
                        // falls out of the window unseen.
                        warn!(error = %e, "reading changed installations failed");
                        handled.installations.clear();
                        false
                    }
                };
                act(&hub, found);
                if apps_done {
                    since = started - CLOCK_SLACK_MS;
                    handled.forget_before(since);
                }
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

/// The revoked keys, disabled people and changed installations since
/// `since` not handled yet, marked handled. A disable that found no active
/// key revokes no key row, so disables are read on their own (ADR 0020
/// §1). Installations come last (see the module's doc for why).
async fn fresh(hub: &Hub, since: Millis, handled: &mut Handled) -> StoreResult<Fresh> {
    let revoked = hub.store.keys_revoked_since(since).await?;
    let disabled = hub.store.principals_disabled_since(since).await?;
    let changed = hub.store.installations_changed_since(since).await?;
    let mut apps: HashMap<Uuid, bool> = HashMap::new();
    for row in changed {
        if handled
            .installations
            .insert((row.id, row.updated_at), row.updated_at)
            .is_none()
        {
            *apps.entry(row.app_id).or_default() |= row.state == InstallationState::Uninstalled;
        }
    }
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
        apps,
    })
}

/// For each app whose installation changed elsewhere: the cached entry
/// dropped, the live row read again, and the sockets closed when the app
/// lost its way in (4012) or its events (4018).
pub(super) async fn close_inactive_apps(hub: &Hub, apps: &HashMap<Uuid, bool>) -> StoreResult<()> {
    for (&app_id, &uninstalled) in apps {
        hub.installations.invalidate(app_id);
        let live = hub.installations.read_fresh(app_id).await?;
        let close = match live.as_deref().map(|i| (i.state, i.effective())) {
            None if uninstalled => (close_code::APP_INACTIVE, "app_uninstalled"),
            None => (close_code::APP_INACTIVE, "app_not_installed"),
            Some((InstallationState::Active, scopes))
                if scopes.contains(Scope::EventsSubscribe) =>
            {
                continue
            }
            Some((InstallationState::Active, _)) => (close_code::SCOPE_MISSING, "scope_missing"),
            Some((InstallationState::Suspended, _)) => (close_code::APP_INACTIVE, "app_suspended"),
            Some((InstallationState::Uninstalled, _)) => {
                (close_code::APP_INACTIVE, "app_uninstalled")
            }
        };
        let closed = hub.registry.close_app(app_id, close.0, close.1);
        if closed > 0 {
            info!(app = %app_id, closed, code = close.0, "closed sockets of an app whose installation changed elsewhere");
        }
    }
    Ok(())
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
