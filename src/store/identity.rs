//! Principals, their keys, and the idempotency records of their creation.

use async_trait::async_trait;
use uuid::Uuid;

use super::apps::{self, AppRecord, RegistrationInstall};
use super::installations::InstallationRecord;
use super::people;
use super::sql::{is_unique_violation, parsed, Arg, Database, Executor, Row};
use super::{StoreError, StoreResult};
use crate::domain::manifest::Manifest;
use crate::domain::{Millis, PrincipalKind};

#[derive(Clone, Debug, PartialEq)]
pub struct PrincipalRecord {
    pub id: Uuid,
    pub kind: PrincipalKind,
    pub name: String,
    pub description: Option<String>,
    pub created_at: Millis,
    /// The person owning this agent; only agents have one.
    pub owner_id: Option<Uuid>,
    /// When the operator disabled this principal: it is inactive after.
    pub disabled_at: Option<Millis>,
}

/// An agent as its owner lists it: the agent and every key it ever had.
#[derive(Clone, Debug, PartialEq)]
pub struct OwnedAgent {
    pub agent_id: Uuid,
    pub name: String,
    pub created_at: Millis,
    /// Oldest first.
    pub keys: Vec<OwnedKey>,
}

/// A key as its agent's owner sees it: no digest, so a listing can never
/// leak what verifies the key.
#[derive(Clone, Debug, PartialEq)]
pub struct OwnedKey {
    pub key_id: String,
    pub created_at: Millis,
    pub revoked_at: Option<Millis>,
}

/// A key as stored: never the secret, only its digest.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyRecord {
    pub key_id: String,
    pub principal_id: Uuid,
    pub kind: PrincipalKind,
    pub secret_hash: Vec<u8>,
    pub created_at: Millis,
    pub revoked_at: Option<Millis>,
}

/// A new key to store.
#[derive(Clone, Debug)]
pub struct NewKey {
    pub key_id: String,
    pub secret_hash: [u8; 32],
}

#[derive(Clone, Debug)]
pub struct NewPrincipal {
    pub id: Uuid,
    pub kind: PrincipalKind,
    pub name: String,
    pub description: Option<String>,
    pub created_at: Millis,
}

#[derive(Clone, Debug, PartialEq)]
pub struct IdempotentResponse {
    pub request_hash: String,
    pub status: u16,
    pub response: String,
}

/// The replayable result of a create, written in the create's transaction so
/// a retry can never create twice.
#[derive(Clone, Debug, PartialEq)]
pub struct IdempotencyRecord {
    pub scope: String,
    pub key: String,
    pub result: IdempotentResponse,
}

#[async_trait]
pub trait IdentityStore: Send + Sync + 'static {
    /// Stores an agent and its first key (and the idempotency record, if
    /// any) in one transaction. `IdempotencyTaken` when the record exists.
    async fn create_agent(
        &self,
        agent: &NewPrincipal,
        key: &NewKey,
        idem: Option<&IdempotencyRecord>,
    ) -> StoreResult<()>;

    /// Stores an app, its manifest and its first key (and the idempotency
    /// record, if any) in one transaction; with `install`
    /// (`registration.install = "auto"`), its active installation too,
    /// granted what the manifest requests, returned.
    async fn create_app(
        &self,
        app: &NewPrincipal,
        manifest: &Manifest,
        key: &NewKey,
        install: Option<&RegistrationInstall>,
        idem: Option<&IdempotencyRecord>,
    ) -> StoreResult<Option<InstallationRecord>>;

    async fn principal(&self, id: Uuid) -> StoreResult<Option<PrincipalRecord>>;

    async fn app(&self, id: Uuid) -> StoreResult<Option<AppRecord>>;
    /// Principals of one kind by id, after `after`, at most `limit`: the
    /// operator's `agent list` and `app list`.
    async fn principals(
        &self,
        kind: PrincipalKind,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<PrincipalRecord>>;

    /// The key, if its principal is not disabled: a disabled principal's
    /// key never authenticates, even if its row were left active.
    async fn key(&self, key_id: &str) -> StoreResult<Option<KeyRecord>>;

    /// Revokes every active key of the principal and stores `new` in one
    /// transaction. Returns the revoked key ids. With `presented`, the
    /// rotation happens only if that key is still active at that moment
    /// (`Conflict` otherwise), so a key revoked meanwhile cannot mint a new one.
    async fn rotate_keys(
        &self,
        principal_id: Uuid,
        new: &NewKey,
        now: Millis,
        presented: Option<&str>,
    ) -> StoreResult<Vec<String>>;

    /// Revokes every active key of the principal. Returns the revoked key ids.
    async fn revoke_keys(&self, principal_id: Uuid, now: Millis) -> StoreResult<Vec<String>>;

    /// `(principal, key id, revoked_at)` of keys revoked at or after
    /// `since`, by any process.
    async fn keys_revoked_since(&self, since: Millis) -> StoreResult<Vec<(Uuid, String, Millis)>>;

    /// `(person, disabled_at)` of principals disabled at or after `since`,
    /// by any process: a disable revokes no key row when the person had no
    /// active key, and the revocation sweep must see it all the same.
    async fn principals_disabled_since(&self, since: Millis) -> StoreResult<Vec<(Uuid, Millis)>>;

    /// Revokes every active key of `agent` if `owner` owns it at that
    /// moment, checked under the agent's lock in the same transaction, so
    /// an owner changed meanwhile revokes nothing. `None` when `agent` is
    /// no agent of `owner` (any more); the revoked key ids otherwise.
    async fn revoke_owned_keys(
        &self,
        agent: Uuid,
        owner: Uuid,
        now: Millis,
    ) -> StoreResult<Option<Vec<String>>>;

    async fn idempotent_response(
        &self,
        scope: &str,
        key: &str,
    ) -> StoreResult<Option<IdempotentResponse>>;

    /// [`IdentityStore::create_agent`] with its owner set in the same
    /// transaction (ADR 0020 §1: registered with a person's key). `NotFound`
    /// when `owner` names no active person, under the owner's lock, so a
    /// `Conflict` (a key id taken) stays what it is on every create.
    async fn create_owned_agent(
        &self,
        agent: &NewPrincipal,
        key: &NewKey,
        owner: Uuid,
        idem: Option<&IdempotencyRecord>,
    ) -> StoreResult<()>;

    /// Stores a person and its first key (and the idempotency record, if
    /// any) in one transaction. `Conflict` when `person.kind` is not a person.
    async fn create_person(
        &self,
        person: &NewPrincipal,
        key: &NewKey,
        idem: Option<&IdempotencyRecord>,
    ) -> StoreResult<()>;

    /// Sets `disabled_at` (the first time only) and revokes every active key
    /// of the person, in one transaction. Returns the revoked key ids.
    /// `NotFound` for an unknown id, `Conflict` for a principal that is not
    /// a person.
    async fn disable_person(&self, person: Uuid, now: Millis) -> StoreResult<Vec<String>>;

    /// Sets or clears an agent's owner. `NotFound` for an unknown agent;
    /// `Conflict` when `agent` is not an agent, or `owner` names no active
    /// person (missing, another kind or disabled alike).
    async fn set_owner(&self, agent: Uuid, owner: Option<Uuid>) -> StoreResult<()>;

    /// The agents `person` owns, by id, with their keys.
    async fn owned_agents(&self, person: Uuid) -> StoreResult<Vec<OwnedAgent>>;

    /// Kind and active (not disabled) of each of `ids` that exists, in one
    /// read: what the authorization loader needs of named principals.
    /// Unknown ids are left out; each id appears once, in `ids` order.
    async fn principal_kinds(&self, ids: &[Uuid]) -> StoreResult<Vec<(Uuid, PrincipalKind, bool)>>;
}

/// What differs per dialect in this area.
#[async_trait]
pub trait IdentityDialect {
    /// Takes the lock a key change holds until commit, so two rotations (or
    /// a rotation and a revoke) cannot interleave. False when the principal
    /// does not exist.
    async fn lock_principal(ex: &mut dyn Executor, id: Uuid) -> StoreResult<bool>;
}

pub(super) fn principal_row(row: &Row) -> StoreResult<PrincipalRecord> {
    Ok(PrincipalRecord {
        id: row.id("id")?,
        kind: parsed(row.text("kind")?, "principal kind", PrincipalKind::parse)?,
        name: row.text("name")?,
        description: row.opt_text("description")?,
        created_at: row.int("created_at")?,
        owner_id: row.opt_id("owner_id")?,
        disabled_at: row.opt_int("disabled_at")?,
    })
}

const PRINCIPAL_COLUMNS: &str = "id, kind, name, description, created_at, owner_id, disabled_at";

fn key_row(row: &Row) -> StoreResult<KeyRecord> {
    Ok(KeyRecord {
        key_id: row.text("key_id")?,
        principal_id: row.id("principal_id")?,
        kind: parsed(row.text("kind")?, "principal kind", PrincipalKind::parse)?,
        secret_hash: row.bytes("secret_hash")?,
        created_at: row.int("created_at")?,
        revoked_at: row.opt_int("revoked_at")?,
    })
}

pub(super) async fn insert_principal(
    ex: &mut dyn Executor,
    p: &NewPrincipal,
    key: &NewKey,
) -> StoreResult<()> {
    ex.execute(
        "INSERT INTO principals (id, kind, name, description, created_at) VALUES ($1, $2, $3, $4, $5)",
        &[
            Arg::Id(p.id),
            Arg::Text(p.kind.as_str()),
            Arg::Text(&p.name),
            Arg::OptText(p.description.as_deref()),
            Arg::Int(p.created_at),
        ],
    )
    .await?;
    insert_key(ex, p.id, key, p.created_at).await
}

pub(super) async fn insert_key(
    ex: &mut dyn Executor,
    principal_id: Uuid,
    key: &NewKey,
    now: Millis,
) -> StoreResult<()> {
    ex.execute(
        "INSERT INTO principal_keys (key_id, principal_id, secret_hash, created_at) VALUES ($1, $2, $3, $4)",
        &[
            Arg::Text(&key.key_id),
            Arg::Id(principal_id),
            Arg::Bytes(&key.secret_hash[..]),
            Arg::Int(now),
        ],
    )
    .await
    .map_err(|e| {
        if is_unique_violation(&e) {
            StoreError::Conflict("key id already exists".into())
        } else {
            e
        }
    })?;
    Ok(())
}

pub(super) async fn revoke_active(
    ex: &mut dyn Executor,
    principal_id: Uuid,
    now: Millis,
) -> StoreResult<Vec<String>> {
    let rows = ex
        .fetch_all(
            "UPDATE principal_keys SET revoked_at = $1 WHERE principal_id = $2 AND revoked_at IS NULL RETURNING key_id",
            &[Arg::Int(now), Arg::Id(principal_id)],
        )
        .await?;
    rows.iter().map(|r| r.text("key_id")).collect()
}

pub(super) async fn insert_idempotency(
    ex: &mut dyn Executor,
    idem: Option<&IdempotencyRecord>,
    now: Millis,
) -> StoreResult<()> {
    let Some(r) = idem else { return Ok(()) };
    ex.execute(
        "INSERT INTO idempotency_keys (scope, key, request_hash, status, response, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            Arg::Text(&r.scope),
            Arg::Text(&r.key),
            Arg::Text(&r.result.request_hash),
            Arg::Int(i64::from(r.result.status)),
            Arg::Text(&r.result.response),
            Arg::Int(now),
        ],
    )
    .await
    .map_err(|e| if is_unique_violation(&e) { StoreError::IdempotencyTaken } else { e })?;
    Ok(())
}

#[async_trait]
impl<D: Database + IdentityDialect> IdentityStore for D {
    async fn create_agent(
        &self,
        agent: &NewPrincipal,
        key: &NewKey,
        idem: Option<&IdempotencyRecord>,
    ) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        insert_idempotency(&mut *tx, idem, agent.created_at).await?;
        insert_principal(&mut *tx, agent, key).await?;
        tx.commit().await
    }

    async fn create_app(
        &self,
        app: &NewPrincipal,
        manifest: &Manifest,
        key: &NewKey,
        install: Option<&RegistrationInstall>,
        idem: Option<&IdempotencyRecord>,
    ) -> StoreResult<Option<InstallationRecord>> {
        let mut tx = self.begin().await?;
        let installed = apps::create(&mut *tx, app, manifest, key, install, idem).await?;
        super::webhook_subscriptions::follow_manifest(&mut *tx, app.id, manifest, app.created_at)
            .await?;
        tx.commit().await?;
        Ok(installed)
    }

    async fn principal(&self, id: Uuid) -> StoreResult<Option<PrincipalRecord>> {
        self.read()
            .await?
            .fetch_optional(
                &format!("SELECT {PRINCIPAL_COLUMNS} FROM principals WHERE id = $1"),
                &[Arg::Id(id)],
            )
            .await?
            .map(|r| principal_row(&r))
            .transpose()
    }

    async fn app(&self, id: Uuid) -> StoreResult<Option<AppRecord>> {
        apps::app(&mut *self.read().await?, id).await
    }

    async fn principals(
        &self,
        kind: PrincipalKind,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<PrincipalRecord>> {
        let sql = format!(
            "SELECT {PRINCIPAL_COLUMNS} FROM principals WHERE kind = $1 AND id > $2 ORDER BY id LIMIT $3"
        );
        let args = [
            Arg::Text(kind.as_str()),
            Arg::Id(after.unwrap_or(Uuid::nil())),
            Arg::Int(i64::from(limit)),
        ];
        let rows = self.read().await?.fetch_all(&sql, &args).await?;
        rows.iter().map(principal_row).collect()
    }

    async fn key(&self, key_id: &str) -> StoreResult<Option<KeyRecord>> {
        self.read()
            .await?
            .fetch_optional(
                "SELECT k.key_id, k.principal_id, p.kind, k.secret_hash, k.created_at, k.revoked_at \
                 FROM principal_keys k JOIN principals p ON p.id = k.principal_id \
                 WHERE k.key_id = $1 AND p.disabled_at IS NULL",
                &[Arg::Text(key_id)],
            )
            .await?
            .map(|r| key_row(&r))
            .transpose()
    }

    async fn rotate_keys(
        &self,
        principal_id: Uuid,
        new: &NewKey,
        now: Millis,
        presented: Option<&str>,
    ) -> StoreResult<Vec<String>> {
        let mut tx = self.begin().await?;
        if !D::lock_principal(&mut *tx, principal_id).await? {
            return Err(StoreError::NotFound);
        }
        // A disabled principal's keys were revoked with it; it gets none
        // back. Checked under the lock a disable takes too.
        let disabled = tx
            .fetch_optional(
                "SELECT 1 AS one FROM principals WHERE id = $1 AND disabled_at IS NOT NULL",
                &[Arg::Id(principal_id)],
            )
            .await?;
        if disabled.is_some() {
            return Err(StoreError::Conflict("the principal is disabled".into()));
        }
        let revoked = revoke_active(&mut *tx, principal_id, now).await?;
        if let Some(k) = presented {
            if !revoked.iter().any(|r| r == k) {
                return Err(StoreError::Conflict(
                    "the presented key is no longer active".into(),
                ));
            }
        }
        insert_key(&mut *tx, principal_id, new, now).await?;
        tx.commit().await?;
        Ok(revoked)
    }

    async fn revoke_keys(&self, principal_id: Uuid, now: Millis) -> StoreResult<Vec<String>> {
        let mut tx = self.begin().await?;
        // The same lock rotation takes: a revoke never misses a key that a
        // concurrent rotation is inserting.
        D::lock_principal(&mut *tx, principal_id).await?;
        let revoked = revoke_active(&mut *tx, principal_id, now).await?;
        tx.commit().await?;
        Ok(revoked)
    }

    async fn keys_revoked_since(&self, since: Millis) -> StoreResult<Vec<(Uuid, String, Millis)>> {
        let rows = self
            .read()
            .await?
            .fetch_all(
                "SELECT principal_id, key_id, revoked_at FROM principal_keys WHERE revoked_at IS NOT NULL AND revoked_at >= $1",
                &[Arg::Int(since)],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.id("principal_id")?,
                    r.text("key_id")?,
                    r.int("revoked_at")?,
                ))
            })
            .collect()
    }

    async fn principals_disabled_since(&self, since: Millis) -> StoreResult<Vec<(Uuid, Millis)>> {
        people::disabled_since(&mut *self.read().await?, since).await
    }

    async fn revoke_owned_keys(
        &self,
        agent: Uuid,
        owner: Uuid,
        now: Millis,
    ) -> StoreResult<Option<Vec<String>>> {
        let mut tx = self.begin().await?;
        // The lock `set_owner` takes: the owner read holds until commit.
        D::lock_principal(&mut *tx, agent).await?;
        if !people::owns(&mut *tx, owner, agent).await? {
            return Ok(None);
        }
        let revoked = revoke_active(&mut *tx, agent, now).await?;
        tx.commit().await?;
        Ok(Some(revoked))
    }

    async fn idempotent_response(
        &self,
        scope: &str,
        key: &str,
    ) -> StoreResult<Option<IdempotentResponse>> {
        let row = self
            .read()
            .await?
            .fetch_optional(
                "SELECT request_hash, status, response FROM idempotency_keys WHERE scope = $1 AND key = $2",
                &[Arg::Text(scope), Arg::Text(key)],
            )
            .await?;
        row.map(|r| {
            Ok(IdempotentResponse {
                request_hash: r.text("request_hash")?,
                status: r.int("status")? as u16,
                response: r.text("response")?,
            })
        })
        .transpose()
    }

    async fn create_person(
        &self,
        person: &NewPrincipal,
        key: &NewKey,
        idem: Option<&IdempotencyRecord>,
    ) -> StoreResult<()> {
        if person.kind != PrincipalKind::Person {
            return Err(StoreError::Conflict(format!(
                "create_person takes a person, not an {}",
                person.kind.as_str()
            )));
        }
        let mut tx = self.begin().await?;
        insert_idempotency(&mut *tx, idem, person.created_at).await?;
        insert_principal(&mut *tx, person, key).await?;
        tx.commit().await
    }

    async fn disable_person(&self, person: Uuid, now: Millis) -> StoreResult<Vec<String>> {
        let mut tx = self.begin().await?;
        // Rotation's lock: no key minted meanwhile escapes the revoke.
        D::lock_principal(&mut *tx, person).await?;
        let found = people::kind_of(&mut *tx, person).await?;
        people::check_person(person, found.map(|(kind, _)| kind))?;
        people::mark_disabled(&mut *tx, person, now).await?;
        let revoked = revoke_active(&mut *tx, person, now).await?;
        tx.commit().await?;
        Ok(revoked)
    }

    async fn create_owned_agent(
        &self,
        agent: &NewPrincipal,
        key: &NewKey,
        owner: Uuid,
        idem: Option<&IdempotencyRecord>,
    ) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        // Locked, so a disable cannot commit between check and write.
        D::lock_principal(&mut *tx, owner).await?;
        people::check_owner(&mut *tx, owner)
            .await
            .map_err(|e| match e {
                StoreError::Conflict(_) => StoreError::NotFound,
                other => other,
            })?;
        insert_idempotency(&mut *tx, idem, agent.created_at).await?;
        insert_principal(&mut *tx, agent, key).await?;
        people::write_owner(&mut *tx, agent.id, Some(owner)).await?;
        tx.commit().await
    }

    async fn set_owner(&self, agent: Uuid, owner: Option<Uuid>) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        D::lock_principal(&mut *tx, agent).await?;
        let found = people::kind_of(&mut *tx, agent).await?;
        people::check_agent(agent, found.map(|(kind, _)| kind))?;
        if let Some(owner) = owner {
            // Locked too, so a disable cannot commit between check and write.
            D::lock_principal(&mut *tx, owner).await?;
            people::check_owner(&mut *tx, owner).await?;
        }
        people::write_owner(&mut *tx, agent, owner).await?;
        tx.commit().await
    }

    async fn owned_agents(&self, person: Uuid) -> StoreResult<Vec<OwnedAgent>> {
        people::owned_agents(&mut *self.read().await?, person).await
    }

    async fn principal_kinds(&self, ids: &[Uuid]) -> StoreResult<Vec<(Uuid, PrincipalKind, bool)>> {
        people::principal_kinds(&mut *self.read().await?, ids).await
    }
}
