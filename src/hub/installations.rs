//! The installation lifecycle (ADR 0023 §4, §5): each operator action, and
//! the app's own upgrade, is one store call (its audit row and its events
//! written in the same transaction), then its effects after the commit:
//! the events published, the app's sockets closed when it lost its way in,
//! cached channel rights dropped when its grants went. The REST routes and
//! the CLI both come through here ([`Lifecycle::of`] a hub,
//! [`Lifecycle::offline`] on the store alone); the CLI, another process,
//! leaves the socket and cache effects to the serving hub's revocation
//! sweep.

use serde_json::Value;
use uuid::Uuid;

use super::Hub;
use crate::cluster::control::Control;
use crate::config::Config;
use crate::domain::event::NewEvent;
use crate::domain::installation::{
    Actor, InstallationState, LifecycleAction, Scope, ScopeSet, Transition,
};
use crate::domain::keys::{self, MintedKey};
use crate::domain::manifest::{self, Manifest};
use crate::domain::task::TaskState;
use crate::domain::validate::FieldProblem;
use crate::domain::{now_millis, PrincipalKind};
use crate::protocol::installations::{
    InstallationChanged, InstallationChangedPayload, InstallationScopes,
};
use crate::protocol::tasks::{TaskFailed, TaskPayload};
use crate::protocol::Notification;
use crate::rpc::close_code;
use crate::store::{
    Changed, FailedTask, IdempotencyRecord, InstallationRecord, NewInstallation, NewKey, Store,
    StoreError, Transitioned,
};
use crate::telemetry::names;

#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    #[error("app not found")]
    AppNotFound,
    /// The app has no live installation (pending, or uninstalled).
    #[error("installation not found")]
    NotInstalled,
    /// A refused move or a lost race: the state it met, if there is one.
    #[error("conflict: {message}")]
    Conflict {
        message: String,
        state: Option<crate::domain::installation::InstallationState>,
    },
    #[error("invalid request")]
    Invalid(Vec<FieldProblem>),
    /// An upgrade's manifest names a command the app registered itself
    /// (ADR 0027 §2: one live name per owner and place).
    #[error("conflict: {}", .0.message)]
    CommandConflict(FieldProblem),
    #[error("the idempotency key was used already")]
    IdempotencyTaken,
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for LifecycleError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::IdempotencyTaken => LifecycleError::IdempotencyTaken,
            other => LifecycleError::Store(other),
        }
    }
}

type Result<T> = std::result::Result<T, LifecycleError>;

/// A new installation, and the app's new key when it had none (after an
/// uninstall): shown once.
#[derive(Debug)]
pub struct Installed {
    pub installation: InstallationRecord,
    pub key: Option<MintedKey>,
}

/// What an upgrade changed, as its answer lists it.
#[derive(Debug)]
pub struct UpgradeOutcome {
    /// The top-level manifest members whose value differs, as pointers,
    /// sorted.
    pub changed: Vec<String>,
    pub requested: ScopeSet,
    pub granted: ScopeSet,
    /// The manifest commands it added, changed and removed, by name.
    pub commands: crate::store::CommandChanges,
    /// `{state, ...}` of the manifest's `interactionsUrl`, if it names one:
    /// a new URL is unverified until its check (a job) passes.
    pub interactions_url: Option<serde_json::Value>,
}

impl UpgradeOutcome {
    /// Requested and not granted: waiting for the operator's consent.
    pub fn awaiting_consent(&self) -> ScopeSet {
        self.requested.minus(self.granted)
    }
}

/// Builds the replayable record of an install from the installation it
/// writes (known before the write, so the record commits with it).
pub type InstallIdempotency<'a> = &'a (dyn Fn(&InstallationRecord) -> IdempotencyRecord + Sync);

/// How an installation reads on the wire: its event's payload, and the
/// REST answers' `scopes`.
pub fn scopes_view(r: &InstallationRecord) -> InstallationScopes {
    InstallationScopes {
        requested: r.requested.to_vec(),
        granted: r.granted.to_vec(),
        effective: r.effective().to_vec(),
    }
}

/// `app/installation/changed` to the app's own stream, under the fan-out's
/// rule (ADR 0023 §6, "Fan-out"), judged on the row as the change left it:
/// written only while the installation is active and holds
/// `events:subscribe`. An event written without the scope is never
/// delivered (the app can neither connect nor read catch-up), so it would
/// only grow the log; an app that regains the scope is told by the change
/// that gave it back, and reads its scopes with `GET
/// /api/v1/apps/{id}/installation` or `app/identity/get` at any time.
fn changed_event(r: &InstallationRecord) -> Vec<NewEvent> {
    if !r.receives_events() {
        return Vec::new();
    }
    let payload = InstallationChangedPayload {
        installation_id: r.id,
        state: r.state,
        scopes: scopes_view(r),
    };
    let payload = serde_json::to_value(payload).expect("event payloads serialize");
    vec![NewEvent::new(r.app_id, InstallationChanged::NAME, payload)]
}

fn no_event(_: &InstallationRecord) -> Vec<NewEvent> {
    Vec::new()
}

/// `agent/task/failed` for a task an uninstall failed: to every participant
/// of an active task, to the initiator of a waiting one (the invited were
/// never told of it, as a rejection tells only the initiator).
fn failed_event(f: &FailedTask) -> Vec<NewEvent> {
    let audience = match f.was {
        TaskState::Active => f.task.participant_ids(),
        _ => vec![f.task.initiator_id],
    };
    let payload = serde_json::to_value(TaskPayload {
        task: f.task.clone(),
    })
    .expect("event payloads serialize");
    audience
        .into_iter()
        .map(|a| NewEvent::new(a, TaskFailed::NAME, payload.clone()))
        .collect()
}

/// The scopes named at `pointer`, each one the manifest requests: a 400
/// naming `<pointer>/<i>` otherwise (unknown names are the caller's to
/// parse; here a scope can only be unrequested or repeated).
pub fn consent(scopes: &[Scope], requested: ScopeSet, pointer: &str) -> Result<ScopeSet> {
    let mut problems = Vec::new();
    for (i, scope) in scopes.iter().enumerate() {
        let message = if !requested.contains(*scope) {
            "not requested by the manifest"
        } else if scopes[..i].contains(scope) {
            "is listed twice"
        } else {
            continue;
        };
        problems.push(FieldProblem {
            pointer: format!("{pointer}/{i}"),
            message: message.into(),
        });
    }
    if problems.is_empty() {
        Ok(ScopeSet::of(scopes.iter().copied()))
    } else {
        Err(LifecycleError::Invalid(problems))
    }
}

/// Where a lifecycle action runs: on a serving hub (effects after the
/// commit) or on the store alone (the CLI: the serving hub's sweep applies
/// them).
#[derive(Clone, Copy)]
pub struct Lifecycle<'a> {
    store: &'a dyn Store,
    config: &'a Config,
    hub: Option<&'a Hub>,
}

impl<'a> Lifecycle<'a> {
    pub fn of(hub: &'a Hub) -> Self {
        Lifecycle {
            store: hub.store.as_ref(),
            config: &hub.config,
            hub: Some(hub),
        }
    }

    pub fn offline(store: &'a dyn Store, config: &'a Config) -> Self {
        Lifecycle {
            store,
            config,
            hub: None,
        }
    }

    async fn app_manifest(&self, app_id: Uuid) -> Result<Manifest> {
        let app = self.store.app(app_id).await?;
        Ok(app.ok_or(LifecycleError::AppNotFound)?.manifest)
    }

    /// The live installation of an app that exists.
    pub async fn live(&self, app_id: Uuid) -> Result<InstallationRecord> {
        self.app_manifest(app_id).await?;
        self.store
            .installation(app_id)
            .await?
            .ok_or(LifecycleError::NotInstalled)
    }

    /// A store `Conflict`, answered with the state the app's live row is
    /// in now; a `NotFound` is the row gone meanwhile.
    async fn store_error(&self, app_id: Uuid, e: StoreError) -> LifecycleError {
        match e {
            StoreError::Conflict(message) => match self.store.installation(app_id).await {
                Ok(row) => LifecycleError::Conflict {
                    message,
                    state: row.map(|r| r.state),
                },
                Err(e) => e.into(),
            },
            StoreError::NotFound => LifecycleError::NotInstalled,
            other => other.into(),
        }
    }

    /// Drops the app's cached installation (`hub::installation_cache`):
    /// after every store call that may have changed the row, also one that
    /// failed (it may have committed), before anything is answered or
    /// closed. Offline (the CLI) there is no cache: the serving hub's
    /// revocation sweep drops it.
    fn invalidate(&self, app_id: Uuid) {
        if let Some(hub) = self.hub {
            hub.installations.invalidate(app_id);
        }
    }

    /// After a commit: publish its events, close the app's sockets when
    /// `close` says, count the action.
    fn after_commit(
        &self,
        action: LifecycleAction,
        app_id: Uuid,
        events: &[crate::domain::event::StoredEvent],
        close: Option<(Uuid, u16, &str)>,
    ) {
        metrics::counter!(names::APP_LIFECYCLE, "action" => action.as_str()).increment(1);
        let Some(hub) = self.hub else { return };
        hub.events.publish(events);
        // The other nodes drop their cached entry and close the app's
        // sockets as the row now says (ADR 0034 §4).
        hub.announce(&Control::InstallationChanged {
            app_id,
            uninstalled: action == LifecycleAction::Uninstall,
        });
        if let Some((closed_app, code, reason)) = close {
            hub.registry.close_app(closed_app, code, reason);
        }
    }

    /// Installs an app that has no live installation, granted `scopes`
    /// (all it requests when `None`). A new key when the app has none.
    pub async fn install(
        &self,
        app_id: Uuid,
        scopes: Option<&[Scope]>,
        actor: Actor,
        idem: Option<InstallIdempotency<'_>>,
    ) -> Result<Installed> {
        let requested = self.app_manifest(app_id).await?.requested_scopes();
        let granted = match scopes {
            Some(scopes) => consent(scopes, requested, "/scopes")?,
            None => requested,
        };
        let key = keys::mint(PrincipalKind::App);
        let mut new = NewInstallation {
            id: Uuid::now_v7(),
            app_id,
            requested,
            granted,
            key: Some(NewKey {
                key_id: key.key_id.clone(),
                secret_hash: key.secret_hash,
            }),
            idem: None,
            actor,
            now: now_millis(),
        };
        new.idem = idem.map(|f| f(&predicted(&new)));
        let installed = self.store.install(&new, &changed_event).await;
        self.invalidate(app_id);
        let installed = match installed {
            Err(StoreError::NotFound) => return Err(LifecycleError::AppNotFound),
            Err(e) => return Err(self.store_error(app_id, e).await),
            Ok(i) => i,
        };
        self.after_commit(LifecycleAction::Install, app_id, &installed.events, None);
        Ok(Installed {
            installation: installed.installation,
            key: installed.key_issued.then_some(key),
        })
    }

    /// Replaces the granted scopes (operator only), at once: a lost
    /// `events:subscribe` closes the app's sockets with 4018.
    pub async fn set_scopes(
        &self,
        app_id: Uuid,
        scopes: &[Scope],
        actor: Actor,
    ) -> Result<InstallationRecord> {
        let current = self.live(app_id).await?;
        let granted = consent(scopes, current.requested, "/scopes")?;
        let written = self
            .store
            .set_scopes(app_id, granted, actor, now_millis(), &changed_event)
            .await;
        self.invalidate(app_id);
        let written = match written {
            Ok(w) => w,
            Err(e) => return Err(self.store_error(app_id, e).await),
        };
        let close = unsubscribed(&written.change);
        self.after_commit(
            LifecycleAction::ScopesUpdate,
            app_id,
            &written.events,
            close,
        );
        Ok(written.change.after)
    }

    /// Suspends or resumes the app's installation. A repeat answers the
    /// row as it is, unwritten; a suspend closes the app's sockets (4012).
    pub async fn transition(
        &self,
        app_id: Uuid,
        transition: Transition,
        actor: Actor,
    ) -> Result<InstallationRecord> {
        let current = self.live(app_id).await?;
        if transition == Transition::Uninstall {
            self.uninstall(app_id, actor).await?;
            return Ok(InstallationRecord {
                state: InstallationState::Uninstalled,
                ..current
            });
        }
        let events = match transition {
            Transition::Resume => changed_event,
            _ => no_event,
        };
        let written = self
            .store
            .transition(current.id, transition, actor, now_millis(), &events)
            .await;
        self.invalidate(app_id);
        let written = match written {
            Ok(w) => w,
            Err(e) => return Err(self.store_error(app_id, e).await),
        };
        let after = match written.change {
            Transitioned::Unchanged(row) => return Ok(row),
            Transitioned::Moved(change) => change.after,
        };
        let close = (transition == Transition::Suspend).then_some((
            app_id,
            close_code::APP_INACTIVE,
            "app_suspended",
        ));
        self.after_commit(transition.action(), app_id, &written.events, close);
        Ok(after)
    }

    /// Uninstalls the app: keys, grants, tasks and leases in one
    /// transaction; after it, the failed tasks' events published, the
    /// app's sockets closed (4012) and the cached channel rights dropped
    /// (its grants are gone).
    pub async fn uninstall(&self, app_id: Uuid, actor: Actor) -> Result<()> {
        let current = self.live(app_id).await?;
        let gone = self
            .store
            .uninstall(current.id, actor, now_millis(), &failed_event)
            .await;
        self.invalidate(app_id);
        let gone = match gone {
            Ok(g) => g,
            Err(e) => return Err(self.store_error(app_id, e).await),
        };
        let close = Some((app_id, close_code::APP_INACTIVE, "app_uninstalled"));
        self.after_commit(LifecycleAction::Uninstall, app_id, &gone.events, close);
        if let Some(hub) = self.hub {
            hub.memberships.invalidate_channels();
            // An uninstalled app is called no more; its figures go too.
            hub.hook_health.forget(app_id);
        }
        Ok(())
    }

    /// Replaces the app's manifest, validated as at registration (pointers
    /// relative to the manifest). Scopes it newly requests wait for
    /// consent; a dropped `events:subscribe` closes its sockets (4018).
    pub async fn upgrade(&self, app_id: Uuid, doc: &Value, actor: Actor) -> Result<UpgradeOutcome> {
        let manifest = manifest::validate(doc, &self.config.manifest_bounds())
            .map_err(LifecycleError::Invalid)?;
        self.refuse_api_names(app_id, &manifest).await?;
        let upgraded = self
            .store
            .upgrade(app_id, &manifest, actor, now_millis(), &changed_event)
            .await;
        self.invalidate(app_id);
        let upgraded = match upgraded {
            Err(StoreError::NotFound) => return Err(LifecycleError::AppNotFound),
            Err(e) => return Err(self.store_error(app_id, e).await),
            Ok(u) => u,
        };
        let close = upgraded.installation.as_ref().and_then(unsubscribed);
        self.after_commit(LifecycleAction::Upgrade, app_id, &upgraded.events, close);
        let (requested, granted) = match &upgraded.installation {
            Some(c) => (c.after.requested, c.after.granted),
            None => (manifest.requested_scopes(), ScopeSet::EMPTY),
        };
        let check: crate::store::UrlCheck = match upgraded.url_check {
            true => Default::default(),
            false => self.store.url_check(app_id).await?.unwrap_or_default(),
        };
        Ok(UpgradeOutcome {
            changed: changed_members(&upgraded.previous, &manifest),
            requested,
            granted,
            commands: upgraded.commands,
            interactions_url: check.view(&manifest),
        })
    }
}

impl Lifecycle<'_> {
    /// A manifest command named as a hub-wide command the app registered
    /// through the API is refused, naming it (the store's unique index is
    /// the backstop for a register racing the upgrade).
    async fn refuse_api_names(&self, app_id: Uuid, manifest: &Manifest) -> Result<()> {
        use crate::domain::command::name_key;
        let own = self.store.commands_of(app_id).await?;
        let taken = |name: &str| {
            own.iter().any(|c| {
                c.source == crate::store::CommandSource::Api
                    && c.conversation_id.is_none()
                    && name_key(&c.name) == name_key(name)
            })
        };
        match manifest.commands.iter().position(|c| taken(&c.name)) {
            Some(i) => Err(LifecycleError::CommandConflict(FieldProblem {
                pointer: format!("/commands/{i}/name"),
                message: "names a command the app registered itself".into(),
            })),
            None => Ok(()),
        }
    }
}

/// The row `new` writes, as the store will write it.
fn predicted(new: &NewInstallation) -> InstallationRecord {
    InstallationRecord {
        id: new.id,
        app_id: new.app_id,
        state: InstallationState::Active,
        requested: new.requested,
        granted: new.granted,
        created_at: new.now,
        updated_at: new.now,
    }
}

/// The 4018 close of a change that took the app's effective
/// `events:subscribe` (set scopes, upgrade).
fn unsubscribed(change: &Changed) -> Option<(Uuid, u16, &'static str)> {
    let had = change.before.effective().contains(Scope::EventsSubscribe);
    let has = change.after.effective().contains(Scope::EventsSubscribe);
    (had && !has).then_some((
        change.after.app_id,
        close_code::SCOPE_MISSING,
        "scope_missing",
    ))
}

/// The top-level members whose value differs between two manifests, as
/// JSON pointers, sorted.
fn changed_members(before: &Manifest, after: &Manifest) -> Vec<String> {
    let object = |m: &Manifest| match serde_json::to_value(m) {
        Ok(Value::Object(o)) => o,
        _ => serde_json::Map::new(),
    };
    let (before, after) = (object(before), object(after));
    let mut changed: Vec<String> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| format!("/{k}"))
        .collect();
    changed.sort();
    changed.dedup();
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consent_names_each_unrequested_or_repeated_scope() {
        let requested = ScopeSet::of([Scope::EventsSubscribe, Scope::MessagesWrite]);
        let ok = consent(&[Scope::MessagesWrite], requested, "/scopes").unwrap();
        assert_eq!(ok, ScopeSet::of([Scope::MessagesWrite]));
        assert_eq!(consent(&[], requested, "/scopes").unwrap(), ScopeSet::EMPTY);
        let scopes = [
            Scope::EventsSubscribe,
            Scope::CommandsWrite,
            Scope::EventsSubscribe,
        ];
        let Err(LifecycleError::Invalid(problems)) = consent(&scopes, requested, "/scopes") else {
            panic!("refused")
        };
        let got: Vec<(&str, &str)> = problems
            .iter()
            .map(|p| (p.pointer.as_str(), p.message.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("/scopes/1", "not requested by the manifest"),
                ("/scopes/2", "is listed twice")
            ]
        );
    }

    #[test]
    fn an_upgrade_lists_the_members_that_differ() {
        let bounds = crate::config::Config::default().manifest_bounds();
        let doc: Value =
            serde_json::from_str(include_str!("../../examples/werewolf.manifest.json")).unwrap();
        let before = manifest::validate(&doc, &bounds).unwrap();
        let mut after = before.clone();
        assert!(changed_members(&before, &after).is_empty());
        after.description = "another".into();
        after.name = "Wolves".into();
        assert_eq!(changed_members(&before, &after), ["/description", "/name"]);
    }
}
