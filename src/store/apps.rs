//! Apps: the principal with its manifest, and their creation with the
//! installation that `registration.install = "auto"` writes alongside
//! (part of the identity area, [`super::IdentityStore`]; ADR 0023 §3).

use uuid::Uuid;

use super::identity::{insert_idempotency, insert_principal, principal_row};
use super::installations::{insert_installation, InstallationRecord, NewAction};
use super::sql::{to_json, Arg, Executor, Row};
use super::{IdempotencyRecord, NewKey, NewPrincipal, PrincipalRecord, StoreResult};
use crate::domain::installation::{Actor, InstallationState, LifecycleAction};
use crate::domain::manifest::Manifest;
use crate::domain::Millis;

#[derive(Clone, Debug, PartialEq)]
pub struct AppRecord {
    pub principal: PrincipalRecord,
    pub manifest: Manifest,
}

/// The installation a registration writes in its transaction
/// (`registration.install = "auto"`): the row, built by the caller so the
/// idempotency record can carry it, and who registered, for the audit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegistrationInstall {
    pub installation: InstallationRecord,
    pub actor: Actor,
}

impl RegistrationInstall {
    /// The active installation of a new app, granted all `manifest` asks.
    pub fn new(app_id: Uuid, manifest: &Manifest, actor: Actor, now: Millis) -> Self {
        let requested = manifest.requested_scopes();
        RegistrationInstall {
            installation: InstallationRecord {
                id: Uuid::now_v7(),
                app_id,
                state: InstallationState::Active,
                requested,
                granted: requested,
                created_at: now,
                updated_at: now,
            },
            actor,
        }
    }
}

/// An app's principal (`p`) and manifest (`a`), as [`app_row`] reads them.
pub(super) const APP_COLUMNS: &str =
    "p.id, p.kind, p.name, p.description, p.created_at, p.owner_id, p.disabled_at, a.manifest";

pub(super) fn app_row(row: &Row) -> StoreResult<AppRecord> {
    Ok(AppRecord {
        principal: principal_row(row)?,
        manifest: row.decoded("manifest")?,
    })
}

pub(super) async fn app(ex: &mut dyn Executor, id: Uuid) -> StoreResult<Option<AppRecord>> {
    let sql = format!(
        "SELECT {APP_COLUMNS} FROM principals p JOIN apps a ON a.app_id = p.id WHERE p.id = $1"
    );
    let row = ex.fetch_optional(&sql, &[Arg::Id(id)]).await?;
    row.as_ref().map(app_row).transpose()
}

/// The steps of `create_app`, in the caller's transaction: the idempotency
/// record first (a retry stops there), the principal and key, the
/// manifest, then the installation, if any, with its audit row.
pub(super) async fn create(
    ex: &mut dyn Executor,
    app: &NewPrincipal,
    manifest: &Manifest,
    key: &NewKey,
    install: Option<&RegistrationInstall>,
    idem: Option<&IdempotencyRecord>,
) -> StoreResult<Option<InstallationRecord>> {
    let json = to_json(manifest)?;
    insert_idempotency(ex, idem, app.created_at).await?;
    insert_principal(ex, app, key).await?;
    ex.execute(
        "INSERT INTO apps (app_id, manifest, updated_at) VALUES ($1, $2, $3)",
        &[Arg::Id(app.id), Arg::Json(&json), Arg::Int(app.created_at)],
    )
    .await?;
    super::app_urls::check_after_commit(ex, app.id, None, manifest, app.created_at).await?;
    let Some(install) = install else {
        return Ok(None);
    };
    let record = &install.installation;
    insert_installation(ex, record).await?;
    let commands =
        super::commands::install_manifest(ex, app.id, &manifest.commands, app.created_at).await?;
    NewAction::of(install.actor, LifecycleAction::Install, None, record)
        .with_details(commands.details())
        .record(ex)
        .await?;
    Ok(Some(*record))
}
