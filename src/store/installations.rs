//! App installations (ADR 0023 §2-§5, §9): the row between an app and the
//! hub, its lifecycle writes and the audit of each. One area, one trait,
//! the same SQL on both backends; what differs is how a write transaction
//! holds the live row ([`InstallationDialect`]).
//!
//! Every write that reads the row to compute the next one (set scopes,
//! upgrade, a transition, uninstall) reads it *locked* in its own write
//! transaction, so two of them never interleave (the review fix of §4).
//! Locks are taken in one order, the app's principal before its
//! installation row, so no two writers wait on each other.

use async_trait::async_trait;
use uuid::Uuid;

use super::identity::{insert_idempotency, insert_key, IdentityDialect};
use super::sql::{is_unique_violation, parsed, to_json, Arg, Database, Executor, Keyset, Row};
use super::{StoreError, StoreResult};
use crate::domain::installation::{
    Actor, InstallationState, LifecycleAction, ScopeSet, Transition, TransitionOutcome,
};
use crate::domain::manifest::Manifest;
use crate::domain::Millis;

pub(super) use super::audit_actions::NewAction;
pub use super::audit_actions::{ActionDetails, ActionFilter, ActionRecord};

pub use super::installation_records::{
    ChangeEvents, Changed, Committed, FailedTask, FailureEvents, InstallationRecord, Installed,
    NewInstallation, Transitioned, Uninstalled, Upgraded,
};

#[async_trait]
pub trait InstallationStore: Send + Sync + 'static {
    /// The app's live installation (active or suspended); `None` for an
    /// app that is pending, uninstalled or missing alike.
    async fn installation(&self, app_id: Uuid) -> StoreResult<Option<InstallationRecord>>;

    /// Writes a new active installation (and the key, the idempotency
    /// record, the audit row and `events` of it) in one transaction.
    /// `NotFound` for an id that is no app; `Conflict` when a live
    /// installation exists, the manifest requests other scopes than
    /// `new.requested` or a granted scope is not requested;
    /// `IdempotencyTaken` on a replay.
    async fn install(
        &self,
        new: &NewInstallation,
        events: ChangeEvents<'_>,
    ) -> StoreResult<Installed>;

    /// Replaces the granted scopes of the live installation, read locked.
    /// `NotFound` without one; `Conflict` for a scope not requested.
    async fn set_scopes(
        &self,
        app_id: Uuid,
        granted: ScopeSet,
        actor: Actor,
        now: Millis,
        events: ChangeEvents<'_>,
    ) -> StoreResult<Committed<Changed>>;

    /// Replaces the app's manifest and, with a live installation (read
    /// locked), its requested scopes, keeping granted only what is still
    /// requested; `events` of the new row written with it. `NotFound` for
    /// an id that is no app.
    async fn upgrade(
        &self,
        app_id: Uuid,
        manifest: &Manifest,
        actor: Actor,
        now: Millis,
        events: ChangeEvents<'_>,
    ) -> StoreResult<Upgraded>;

    /// Suspends or resumes installation `id`: a compare-and-swap on its
    /// state, read locked. `NotFound` for no such row; `Conflict` naming
    /// the current state when the move is refused. An uninstall has
    /// effects beyond the row and is [`InstallationStore::uninstall`]:
    /// `Transition::Uninstall` here is a `Conflict` that writes nothing.
    /// `events` of a moved row are written with it.
    async fn transition(
        &self,
        id: Uuid,
        transition: Transition,
        actor: Actor,
        now: Millis,
        events: ChangeEvents<'_>,
    ) -> StoreResult<Committed<Transitioned>>;

    /// Uninstalls installation `id` in one transaction: the state's CAS,
    /// every key of the app revoked, its grants deleted (and the rights
    /// version bumped), its waiting and active tasks failed with
    /// `app_uninstalled` and `events` of each written, the live leases on
    /// its tasks' messages ended, the audit row. Errors as `transition`.
    async fn uninstall(
        &self,
        id: Uuid,
        actor: Actor,
        now: Millis,
        events: FailureEvents<'_>,
    ) -> StoreResult<Uninstalled>;

    /// Every installation row (of any state) written at or after `since`,
    /// by any process: what the revocation sweep applies.
    async fn installations_changed_since(
        &self,
        since: Millis,
    ) -> StoreResult<Vec<InstallationRecord>>;

    /// Owner actions matching `filter`, by id after `after`, at most `limit`.
    async fn actions(
        &self,
        filter: ActionFilter,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<ActionRecord>>;

    /// Deletes the owner actions recorded before `before`; returns how many.
    async fn prune_actions(&self, before: Millis) -> StoreResult<u64>;
}

/// What differs per dialect in this area.
pub trait InstallationDialect {
    /// A statement reading the installation rows `condition` selects
    /// (columns [`INSTALLATION_COLUMNS`]) and holding them until the
    /// transaction ends: PostgreSQL's `SELECT ... FOR UPDATE`; on SQLite a
    /// no-op `UPDATE ... RETURNING`, which takes the database's write lock
    /// at once, as `BEGIN IMMEDIATE` would.
    fn locking_read(condition: &str) -> String;

    /// The same row held against a change until the transaction ends, but
    /// shared, for verdicts: one app's accepts and grants do not queue on
    /// each other, while a suspend's write still waits for them
    /// (PostgreSQL's `FOR SHARE`; SQLite has one writer either way).
    fn sharing_read(condition: &str) -> String {
        Self::locking_read(condition)
    }
}

pub(super) const INSTALLATION_COLUMNS: &str =
    "id, app_id, state, requested_scopes, granted_scopes, created_at, updated_at";

const LIVE: &str = "app_id = $1 AND state <> 'uninstalled'";

fn scopes(row: &Row, col: &str) -> StoreResult<ScopeSet> {
    ScopeSet::from_stored(&row.text(col)?).map_err(|e| StoreError::Corrupt(e.to_string()))
}

pub(super) fn installation_row(row: &Row) -> StoreResult<InstallationRecord> {
    Ok(InstallationRecord {
        id: row.id("id")?,
        app_id: row.id("app_id")?,
        state: parsed(
            row.text("state")?,
            "installation state",
            InstallationState::parse,
        )?,
        requested: scopes(row, "requested_scopes")?,
        granted: scopes(row, "granted_scopes")?,
        created_at: row.int("created_at")?,
        updated_at: row.int("updated_at")?,
    })
}

/// Inserts `r`; a second live row of its app is a `Conflict` (the
/// partial unique index `installations_live`).
pub(super) async fn insert_installation(
    ex: &mut dyn Executor,
    r: &InstallationRecord,
) -> StoreResult<()> {
    let requested = r.requested.to_stored();
    let granted = r.granted.to_stored();
    ex.execute(
        "INSERT INTO installations (id, app_id, state, requested_scopes, granted_scopes, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        &[
            Arg::Id(r.id),
            Arg::Id(r.app_id),
            Arg::Text(r.state.as_str()),
            Arg::Text(&requested),
            Arg::Text(&granted),
            Arg::Int(r.created_at),
            Arg::Int(r.updated_at),
        ],
    )
    .await
    .map_err(|e| {
        if is_unique_violation(&e) {
            already_installed()
        } else {
            e
        }
    })?;
    Ok(())
}

fn already_installed() -> StoreError {
    StoreError::Conflict("the app is installed already".into())
}

fn not_requested(extra: ScopeSet) -> StoreError {
    StoreError::Conflict(format!(
        "scopes not requested by the manifest: {}",
        extra.to_stored()
    ))
}

/// The rows `condition` (on `$1`) selects, locked until commit.
pub(super) async fn locked<D: InstallationDialect>(
    ex: &mut dyn Executor,
    condition: &str,
    arg: Arg<'_>,
) -> StoreResult<Option<InstallationRecord>> {
    held(ex, &D::locking_read(condition), arg).await
}

/// [`locked`], shared: see [`InstallationDialect::sharing_read`].
pub(super) async fn shared<D: InstallationDialect>(
    ex: &mut dyn Executor,
    condition: &str,
    arg: Arg<'_>,
) -> StoreResult<Option<InstallationRecord>> {
    held(ex, &D::sharing_read(condition), arg).await
}

async fn held(
    ex: &mut dyn Executor,
    sql: &str,
    arg: Arg<'_>,
) -> StoreResult<Option<InstallationRecord>> {
    ex.fetch_optional(sql, &[arg])
        .await?
        .map(|r| installation_row(&r))
        .transpose()
}

/// Writes the mutable columns of `r` (matched by id).
async fn write_row(ex: &mut dyn Executor, r: &InstallationRecord) -> StoreResult<()> {
    let requested = r.requested.to_stored();
    let granted = r.granted.to_stored();
    ex.execute(
        "UPDATE installations SET requested_scopes = $1, granted_scopes = $2, updated_at = $3 WHERE id = $4",
        &[
            Arg::Text(&requested),
            Arg::Text(&granted),
            Arg::Int(r.updated_at),
            Arg::Id(r.id),
        ],
    )
    .await?;
    Ok(())
}

/// Moves the row read locked as `before` with `transition`: the CAS on
/// its state. `Ok(None)` for an idempotent repeat.
pub(super) async fn move_state(
    ex: &mut dyn Executor,
    before: &InstallationRecord,
    transition: Transition,
    now: Millis,
) -> StoreResult<Option<InstallationRecord>> {
    let to = match transition.from_state(before.state) {
        TransitionOutcome::Move(to) => to,
        TransitionOutcome::Unchanged => return Ok(None),
        TransitionOutcome::Refused => {
            return Err(StoreError::Conflict(format!(
                "the installation is {}",
                before.state.as_str()
            )))
        }
    };
    let changed = ex
        .execute(
            "UPDATE installations SET state = $1, updated_at = $2 WHERE id = $3 AND state = $4",
            &[
                Arg::Text(to.as_str()),
                Arg::Int(now),
                Arg::Id(before.id),
                Arg::Text(before.state.as_str()),
            ],
        )
        .await?;
    if changed == 0 {
        // Unreachable under the row lock; kept as the CAS's own answer.
        return Err(StoreError::Conflict(
            "the installation changed meanwhile".into(),
        ));
    }
    Ok(Some(InstallationRecord {
        state: to,
        updated_at: now,
        ..*before
    }))
}

/// The app's stored manifest, in the caller's transaction.
async fn manifest_of(ex: &mut dyn Executor, app_id: Uuid) -> StoreResult<Option<Manifest>> {
    ex.fetch_optional(
        "SELECT manifest FROM apps WHERE app_id = $1",
        &[Arg::Id(app_id)],
    )
    .await?
    .map(|r| r.decoded("manifest"))
    .transpose()
}

async fn has_active_key(ex: &mut dyn Executor, app_id: Uuid) -> StoreResult<bool> {
    let row = ex
        .fetch_optional(
            "SELECT 1 AS one FROM principal_keys WHERE principal_id = $1 AND revoked_at IS NULL",
            &[Arg::Id(app_id)],
        )
        .await?;
    Ok(row.is_some())
}

#[async_trait]
impl<D> InstallationStore for D
where
    D: Database + Keyset + IdentityDialect + InstallationDialect,
{
    async fn installation(&self, app_id: Uuid) -> StoreResult<Option<InstallationRecord>> {
        let sql = format!("SELECT {INSTALLATION_COLUMNS} FROM installations WHERE {LIVE}");
        self.read()
            .await?
            .fetch_optional(&sql, &[Arg::Id(app_id)])
            .await?
            .map(|r| installation_row(&r))
            .transpose()
    }

    async fn install(
        &self,
        new: &NewInstallation,
        events: ChangeEvents<'_>,
    ) -> StoreResult<Installed> {
        let mut tx = self.begin().await?;
        insert_idempotency(&mut *tx, new.idem.as_ref(), new.now).await?;
        D::lock_principal(&mut *tx, new.app_id).await?;
        let manifest = manifest_of(&mut *tx, new.app_id)
            .await?
            .ok_or(StoreError::NotFound)?;
        if locked::<D>(&mut *tx, LIVE, Arg::Id(new.app_id))
            .await?
            .is_some()
        {
            return Err(already_installed());
        }
        let requested = manifest.requested_scopes();
        if requested != new.requested {
            return Err(StoreError::Conflict(
                "the manifest changed meanwhile".into(),
            ));
        }
        let granted = new.granted;
        if !granted.is_subset_of(requested) {
            return Err(not_requested(granted.minus(requested)));
        }
        let key_issued = match &new.key {
            Some(key) if !has_active_key(&mut *tx, new.app_id).await? => {
                insert_key(&mut *tx, new.app_id, key, new.now).await?;
                true
            }
            _ => false,
        };
        let record = InstallationRecord {
            id: new.id,
            app_id: new.app_id,
            state: InstallationState::Active,
            requested,
            granted,
            created_at: new.now,
            updated_at: new.now,
        };
        insert_installation(&mut *tx, &record).await?;
        let commands =
            super::commands::install_manifest(&mut *tx, new.app_id, &manifest.commands, new.now)
                .await?;
        NewAction::of(new.actor, LifecycleAction::Install, None, &record)
            .with_details(commands.details())
            .record(&mut *tx)
            .await?;
        let events = tx.append_events(&events(&record), new.now).await?;
        tx.commit().await?;
        Ok(Installed {
            installation: record,
            key_issued,
            events,
        })
    }

    async fn set_scopes(
        &self,
        app_id: Uuid,
        granted: ScopeSet,
        actor: Actor,
        now: Millis,
        events: ChangeEvents<'_>,
    ) -> StoreResult<Committed<Changed>> {
        let mut tx = self.begin().await?;
        let before = locked::<D>(&mut *tx, LIVE, Arg::Id(app_id))
            .await?
            .ok_or(StoreError::NotFound)?;
        if !granted.is_subset_of(before.requested) {
            return Err(not_requested(granted.minus(before.requested)));
        }
        let after = InstallationRecord {
            granted,
            updated_at: now,
            ..before
        };
        write_row(&mut *tx, &after).await?;
        let subscribe = crate::domain::installation::Scope::EventsSubscribe;
        if after.granted.contains(subscribe) && !before.granted.contains(subscribe) {
            super::webhook_subscriptions::pause_ended(&mut *tx, app_id, now).await?;
        }
        NewAction::of(actor, LifecycleAction::ScopesUpdate, Some(&before), &after)
            .record(&mut *tx)
            .await?;
        let events = tx.append_events(&events(&after), now).await?;
        tx.commit().await?;
        Ok(Committed {
            change: Changed { before, after },
            events,
        })
    }

    async fn upgrade(
        &self,
        app_id: Uuid,
        manifest: &Manifest,
        actor: Actor,
        now: Millis,
        events: ChangeEvents<'_>,
    ) -> StoreResult<Upgraded> {
        let json = to_json(manifest)?;
        let mut tx = self.begin().await?;
        D::lock_principal(&mut *tx, app_id).await?;
        let previous = manifest_of(&mut *tx, app_id)
            .await?
            .ok_or(StoreError::NotFound)?;
        tx.execute(
            "UPDATE apps SET manifest = $1, updated_at = $2 WHERE app_id = $3",
            &[Arg::Json(&json), Arg::Int(now), Arg::Id(app_id)],
        )
        .await?;
        let url_check =
            super::app_urls::check_after_commit(&mut *tx, app_id, Some(&previous), manifest, now)
                .await?;
        let installation = match locked::<D>(&mut *tx, LIVE, Arg::Id(app_id)).await? {
            Some(before) => {
                let requested = manifest.requested_scopes();
                let after = InstallationRecord {
                    requested,
                    granted: before.granted.intersect(requested),
                    updated_at: now,
                    ..before
                };
                write_row(&mut *tx, &after).await?;
                Some(Changed { before, after })
            }
            None => None,
        };
        let commands = match installation {
            Some(_) => {
                super::commands::apply_upgrade(
                    &mut *tx,
                    app_id,
                    &previous.commands,
                    &manifest.commands,
                    now,
                )
                .await?
            }
            None => super::commands::CommandChanges::default(),
        };
        NewAction {
            actor,
            action: LifecycleAction::Upgrade,
            app_id,
            before: installation.as_ref().map(|c| &c.before),
            after: installation.as_ref().map(|c| &c.after),
            at: now,
            details: Some(commands.details()),
        }
        .record(&mut *tx)
        .await?;
        let written = match &installation {
            Some(c) => events(&c.after),
            None => Vec::new(),
        };
        let events = tx.append_events(&written, now).await?;
        super::webhook_subscriptions::follow_manifest(&mut *tx, app_id, manifest, now).await?;
        tx.commit().await?;
        Ok(Upgraded {
            previous,
            installation,
            commands,
            events,
            url_check,
        })
    }

    async fn transition(
        &self,
        id: Uuid,
        transition: Transition,
        actor: Actor,
        now: Millis,
        events: ChangeEvents<'_>,
    ) -> StoreResult<Committed<Transitioned>> {
        if transition == Transition::Uninstall {
            return Err(StoreError::Conflict(
                "an uninstall is InstallationStore::uninstall".into(),
            ));
        }
        let mut tx = self.begin().await?;
        let before = locked::<D>(&mut *tx, "id = $1", Arg::Id(id))
            .await?
            .ok_or(StoreError::NotFound)?;
        let Some(after) = move_state(&mut *tx, &before, transition, now).await? else {
            tx.rollback().await?;
            return Ok(Committed {
                change: Transitioned::Unchanged(before),
                events: Vec::new(),
            });
        };
        let mut new_events = events(&after);
        // A suspend disables the app's cards in its transaction (ADR 0027
        // §7), the count in its audit row; a resume leaves them disabled.
        // One append, after the cards' locks (`components`).
        let mut disabled = 0;
        if transition == Transition::Suspend {
            let (count, cards) =
                super::components::disable_authored_by(&mut *tx, before.app_id).await?;
            new_events.extend(cards);
            disabled = count;
        }
        if transition == Transition::Resume {
            super::webhook_subscriptions::pause_ended(&mut *tx, before.app_id, now).await?;
        }
        let details = ActionDetails {
            components_disabled: disabled,
            ..ActionDetails::default()
        };
        NewAction::of(actor, transition.action(), Some(&before), &after)
            .with_details(details)
            .record(&mut *tx)
            .await?;
        let events = tx.append_events(&new_events, now).await?;
        tx.commit().await?;
        Ok(Committed {
            change: Transitioned::Moved(Changed { before, after }),
            events,
        })
    }

    async fn uninstall(
        &self,
        id: Uuid,
        actor: Actor,
        now: Millis,
        events: FailureEvents<'_>,
    ) -> StoreResult<Uninstalled> {
        super::uninstall::run::<D>(self, id, actor, now, events).await
    }

    async fn installations_changed_since(
        &self,
        since: Millis,
    ) -> StoreResult<Vec<InstallationRecord>> {
        let sql = format!(
            "SELECT {INSTALLATION_COLUMNS} FROM installations WHERE updated_at >= $1 ORDER BY updated_at, id"
        );
        let rows = self
            .read()
            .await?
            .fetch_all(&sql, &[Arg::Int(since)])
            .await?;
        rows.iter().map(installation_row).collect()
    }

    async fn actions(
        &self,
        filter: ActionFilter,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<ActionRecord>> {
        super::audit_actions::page::<D>(&mut *self.read().await?, filter, after, limit).await
    }

    async fn prune_actions(&self, before: Millis) -> StoreResult<u64> {
        super::audit_actions::prune(&mut *self.write().await?, before).await
    }
}
