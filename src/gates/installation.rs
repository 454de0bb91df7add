//! Every gate first asks whether the task's app may be asked at all (ADR
//! 0023 §6, "Gates"): its installation, from the hub's cache, must be
//! active. Not active fails the gate closed without a round trip (and a
//! static policy too: a suspended app's tasks are frozen, not opened).
//! A cached "not active" is read again from the store before it fails a
//! gate, so a resume in another process heals at once; so is every gate
//! decided again after its verdict was refused as not applicable (§7).

use uuid::Uuid;

use crate::domain::installation::InstallationState;
use crate::hub::Hub;
use crate::store::StoreError;

/// Why the gate fails closed: the reason or task failure code it records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inactive {
    Suspended,
    NotInstalled,
}

impl Inactive {
    pub fn code(self) -> &'static str {
        match self {
            Inactive::Suspended => "app_suspended",
            Inactive::NotInstalled => "app_not_installed",
        }
    }
}

/// Where the installation is read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
    /// The cache; a "not active" is confirmed on the store.
    Cached,
    /// The store: a round after a verdict refused as not applicable.
    Fresh,
}

/// `None` when the app's installation is active. An inactive one is
/// counted as the outcome `inactive` of `method`, the call not made.
pub async fn inactive(
    hub: &Hub,
    app_id: Uuid,
    method: &'static str,
    read: Read,
) -> Result<Option<Inactive>, StoreError> {
    let mut installation = match read {
        Read::Cached => hub.installations.lookup(app_id).await?.installation,
        Read::Fresh => hub.installations.read_fresh(app_id).await?,
    };
    let active = |i: &Option<std::sync::Arc<crate::store::InstallationRecord>>| {
        i.as_ref()
            .is_some_and(|i| i.state == InstallationState::Active)
    };
    if !active(&installation) && read == Read::Cached {
        installation = hub.installations.read_fresh(app_id).await?;
    }
    let found = match installation.map(|i| i.state) {
        Some(InstallationState::Active) => return Ok(None),
        Some(InstallationState::Suspended) => Inactive::Suspended,
        Some(InstallationState::Uninstalled) | None => Inactive::NotInstalled,
    };
    crate::hooks::record_inactive(hub, app_id, method);
    Ok(Some(found))
}
