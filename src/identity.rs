//! Agent and app identity: registration, key checks, rotation and revocation.
//! The HTTP routes, the gateway and the operator CLI all go through here, so
//! the rules (validation, keys shown once, constant-time checks, one answer
//! for every bad key) hold on every path.

use serde_json::Value;
use uuid::Uuid;

use crate::config::InstallMode;
use crate::domain::agent::{self, AgentRegistration};
use crate::domain::installation::Actor;
use crate::domain::keys::{self, MintedKey};
use crate::domain::manifest::{self, Manifest, ManifestBounds};
use crate::domain::validate::FieldProblem;
use crate::domain::{now_millis, Principal, PrincipalKind};
use crate::store::{
    IdempotencyRecord, IdentityStore, InstallationRecord, NewKey, NewPrincipal,
    RegistrationInstall, StoreError,
};

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// Wrong, malformed, unknown or revoked key: one answer for all of them.
    #[error("invalid or revoked key")]
    BadKey,
    #[error("invalid request")]
    Invalid(Vec<FieldProblem>),
    #[error("not found")]
    NotFound,
    /// An owner that is not an active person (missing, another kind or
    /// disabled alike, so the answer tells nothing about the id).
    #[error("the owner is not an active person")]
    OwnerRefused,
    /// The idempotency key was used by an earlier request; replay its result.
    #[error("idempotency key already used")]
    IdempotencyTaken,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Maps store errors, keeping an idempotency collision distinct.
fn from_store(e: StoreError) -> IdentityError {
    match e {
        StoreError::IdempotencyTaken => IdentityError::IdempotencyTaken,
        other => IdentityError::Store(other),
    }
}

/// Builds the replayable record of a create from the new principal's id.
pub type IdempotencyFor<'a> = &'a (dyn Fn(Uuid) -> IdempotencyRecord + Send + Sync);

/// A key check that passed.
#[derive(Clone, Debug)]
pub struct Authenticated {
    pub principal: Principal,
    pub key_id: String,
}

/// A new principal and its key, which is shown once.
#[derive(Debug)]
pub struct Registered {
    pub id: Uuid,
    pub key: MintedKey,
}

fn new_key(key: &MintedKey) -> NewKey {
    NewKey {
        key_id: key.key_id.clone(),
        secret_hash: key.secret_hash,
    }
}

pub async fn register_agent(
    store: &(impl IdentityStore + ?Sized),
    doc: &Value,
    idem: Option<IdempotencyFor<'_>>,
) -> Result<Registered, IdentityError> {
    register_owned_agent(store, doc, None, idem).await
}

/// Registers an agent with a person's key (`Bearer <person key>`, ADR 0020
/// §1): the caller owns it, written in the same transaction. A caller
/// disabled since its key was checked is answered like a bad key (the key
/// no longer authenticates), never as a refused `ownerId` the body lacks.
pub async fn register_owned_agent(
    store: &(impl IdentityStore + ?Sized),
    doc: &Value,
    owner: Option<Uuid>,
    idem: Option<IdempotencyFor<'_>>,
) -> Result<Registered, IdentityError> {
    register(store, doc, owner, IdentityError::BadKey, idem).await
}

/// Registers an agent owned by the person the operator names (`switchboard
/// agent register --owner`), when given. An owner that is no active person
/// is `OwnerRefused`.
pub async fn register_agent_owned_by(
    store: &(impl IdentityStore + ?Sized),
    doc: &Value,
    owner: Option<Uuid>,
    idem: Option<IdempotencyFor<'_>>,
) -> Result<Registered, IdentityError> {
    register(store, doc, owner, IdentityError::OwnerRefused, idem).await
}

/// An agent and its key, owned by `owner` when given; `refused` answers an
/// owner that is no active person. Any other store error (a key id taken)
/// is what it is on every create.
async fn register(
    store: &(impl IdentityStore + ?Sized),
    doc: &Value,
    owner: Option<Uuid>,
    refused: IdentityError,
    idem: Option<IdempotencyFor<'_>>,
) -> Result<Registered, IdentityError> {
    let (new, key) = new_principal(PrincipalKind::Agent, doc)?;
    let idem = idem.map(|f| f(new.id));
    let stored = match owner {
        None => {
            store
                .create_agent(&new, &new_key(&key), idem.as_ref())
                .await
        }
        Some(owner) => {
            store
                .create_owned_agent(&new, &new_key(&key), owner, idem.as_ref())
                .await
        }
    };
    stored.map_err(|e| match e {
        StoreError::NotFound if owner.is_some() => refused,
        other => from_store(other),
    })?;
    Ok(Registered { id: new.id, key })
}

/// Creates a person (`{name, description?}`, the agents' rules) with its
/// first key, shown once. Only the operator does (ADR 0020 §1).
pub async fn create_person(
    store: &(impl IdentityStore + ?Sized),
    doc: &Value,
    idem: Option<IdempotencyFor<'_>>,
) -> Result<Registered, IdentityError> {
    let (new, key) = new_principal(PrincipalKind::Person, doc)?;
    store
        .create_person(&new, &new_key(&key), idem.map(|f| f(new.id)).as_ref())
        .await
        .map_err(from_store)?;
    Ok(Registered { id: new.id, key })
}

/// Disables a person: every key revoked (returned, for closing sockets)
/// and `disabled_at` set. `NotFound` for an id that is no person.
pub async fn disable_person(
    store: &(impl IdentityStore + ?Sized),
    person: Uuid,
) -> Result<Vec<String>, IdentityError> {
    store
        .disable_person(person, now_millis())
        .await
        .map_err(|e| match e {
            StoreError::NotFound | StoreError::Conflict(_) => IdentityError::NotFound,
            other => other.into(),
        })
}

/// Sets or clears an agent's owner (the operator's act). `NotFound` for an
/// id that is no agent, `OwnerRefused` for an owner that is no active
/// person.
pub async fn set_owner(
    store: &(impl IdentityStore + ?Sized),
    agent: Uuid,
    owner: Option<Uuid>,
) -> Result<(), IdentityError> {
    let found = store.principal(agent).await?;
    if found.map(|p| p.kind) != Some(PrincipalKind::Agent) {
        return Err(IdentityError::NotFound);
    }
    store.set_owner(agent, owner).await.map_err(|e| match e {
        StoreError::NotFound => IdentityError::NotFound,
        StoreError::Conflict(_) => IdentityError::OwnerRefused,
        other => other.into(),
    })
}

fn new_principal(
    kind: PrincipalKind,
    doc: &Value,
) -> Result<(NewPrincipal, MintedKey), IdentityError> {
    let AgentRegistration { name, description } =
        agent::validate_registration(doc).map_err(IdentityError::Invalid)?;
    let new = NewPrincipal {
        id: Uuid::new_v4(),
        kind,
        name,
        description,
        created_at: now_millis(),
    };
    Ok((new, keys::mint(kind)))
}

/// Builds the replayable record of an app's registration from its id and
/// the installation it got, if any.
pub type AppIdempotencyFor<'a> =
    &'a (dyn Fn(Uuid, Option<&InstallationRecord>) -> IdempotencyRecord + Send + Sync);

/// Who registers an app, as the audit of its installation names them: the
/// operator (the CLI), or the app itself (the open or secret registration
/// route: the key it gets is its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Registrant {
    Operator,
    TheApp,
}

impl Registrant {
    fn actor(self, app_id: Uuid) -> Actor {
        match self {
            Registrant::Operator => Actor::Operator,
            Registrant::TheApp => Actor::App(app_id),
        }
    }
}

/// A registered app: its id and key, its manifest, and the installation
/// `registration.install = "auto"` gave it (`None` when pending).
#[derive(Debug)]
pub struct RegisteredApp {
    pub registered: Registered,
    pub manifest: Manifest,
    pub installation: Option<InstallationRecord>,
}

/// Validates the manifest (every problem reported with a pointer relative to
/// the manifest) and registers the app, installed at once when `install`
/// is `Auto`.
pub async fn register_app(
    store: &(impl IdentityStore + ?Sized),
    manifest_doc: &Value,
    bounds: &ManifestBounds,
    install: (InstallMode, Registrant),
    idem: Option<AppIdempotencyFor<'_>>,
) -> Result<RegisteredApp, IdentityError> {
    register_app_as(store, Uuid::new_v4(), manifest_doc, bounds, install, idem).await
}

/// [`register_app`] with the app's id chosen by the caller: a hosted card's
/// app (ADR 0031 §2), whose id is bound to the card before it exists so two
/// first runs make one app.
pub async fn register_app_as(
    store: &(impl IdentityStore + ?Sized),
    id: Uuid,
    manifest_doc: &Value,
    bounds: &ManifestBounds,
    install: (InstallMode, Registrant),
    idem: Option<AppIdempotencyFor<'_>>,
) -> Result<RegisteredApp, IdentityError> {
    let manifest = manifest::validate(manifest_doc, bounds).map_err(IdentityError::Invalid)?;
    let key = keys::mint(PrincipalKind::App);
    let now = now_millis();
    let (mode, registrant) = install;
    let install = (mode == InstallMode::Auto)
        .then(|| RegistrationInstall::new(id, &manifest, registrant.actor(id), now));
    let installation = install.as_ref().map(|i| i.installation);
    let installed = store
        .create_app(
            &NewPrincipal {
                id,
                kind: PrincipalKind::App,
                name: manifest.name.clone(),
                description: Some(manifest.description.clone()),
                created_at: now,
            },
            &manifest,
            &new_key(&key),
            install.as_ref(),
            idem.map(|f| f(id, installation.as_ref())).as_ref(),
        )
        .await
        .map_err(from_store)?;
    Ok(RegisteredApp {
        registered: Registered { id, key },
        manifest,
        installation: installed,
    })
}

/// Checks a presented key. `expected` restricts the kind (an agent key cannot
/// connect as an app); a mismatch is answered like any other bad key.
pub async fn authenticate(
    store: &(impl IdentityStore + ?Sized),
    presented: &str,
    expected: Option<PrincipalKind>,
) -> Result<Authenticated, IdentityError> {
    let Some(parsed) = keys::parse(presented) else {
        // Same work as a real check, so a malformed key is not faster.
        let _ = keys::hash_secret(presented);
        return Err(IdentityError::BadKey);
    };
    let record = store.key(&parsed.key_id).await?;
    let stored = record.as_ref().map(|r| r.secret_hash.as_slice());
    let matches = keys::verify(&parsed, stored);
    match record {
        Some(r)
            if matches
                && r.revoked_at.is_none()
                && r.kind == parsed.kind
                && expected.is_none_or(|k| k == r.kind) =>
        {
            Ok(Authenticated {
                principal: Principal {
                    id: r.principal_id,
                    kind: r.kind,
                },
                key_id: r.key_id,
            })
        }
        _ => Err(IdentityError::BadKey),
    }
}

/// Issues a new key for the principal and revokes every older one. With
/// `presented`, only while that key is still active (a key revoked in the
/// meantime answers `BadKey`).
pub async fn rotate(
    store: &(impl IdentityStore + ?Sized),
    principal: Principal,
    presented: Option<&str>,
) -> Result<(MintedKey, Vec<String>), IdentityError> {
    let key = keys::mint(principal.kind);
    let revoked = store
        .rotate_keys(principal.id, &new_key(&key), now_millis(), presented)
        .await
        .map_err(|e| match e {
            StoreError::NotFound => IdentityError::NotFound,
            StoreError::Conflict(_) if presented.is_some() => IdentityError::BadKey,
            other => other.into(),
        })?;
    Ok((key, revoked))
}

pub async fn revoke(
    store: &(impl IdentityStore + ?Sized),
    principal_id: Uuid,
) -> Result<Vec<String>, IdentityError> {
    Ok(store.revoke_keys(principal_id, now_millis()).await?)
}

/// An owner's revoke of its agent's keys (`agent.keys.revoke`, decided by
/// `access` before): `None` when the agent is no longer `owner`'s by the
/// time the revoke holds its lock (the operator moved it meanwhile).
pub async fn revoke_owned(
    store: &(impl IdentityStore + ?Sized),
    agent: Uuid,
    owner: Uuid,
) -> Result<Option<Vec<String>>, IdentityError> {
    Ok(store.revoke_owned_keys(agent, owner, now_millis()).await?)
}

/// Looks a principal up for the operator CLI.
pub async fn principal(
    store: &(impl IdentityStore + ?Sized),
    id: Uuid,
) -> Result<Principal, IdentityError> {
    let record = store.principal(id).await?.ok_or(IdentityError::NotFound)?;
    Ok(Principal {
        id: record.id,
        kind: record.kind,
    })
}
