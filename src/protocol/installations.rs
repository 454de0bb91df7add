//! The app's own installation, as its event tells it (ADR 0023 §11).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::events::Envelope;
use super::{Caller, Direction, Notification};
use crate::domain::installation::{InstallationState, Scope};

/// An installation's scopes: what the manifest requests, what the operator
/// granted, and what the app holds (granted and still requested).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallationScopes {
    pub requested: Vec<Scope>,
    pub granted: Vec<Scope>,
    pub effective: Vec<Scope>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallationChangedPayload {
    pub installation_id: Uuid,
    pub state: InstallationState,
    pub scopes: InstallationScopes,
}

/// Tells the app its installation changed: installed, scopes set, resumed
/// or upgraded. Durable, so a reconnecting app learns what it holds; none on
/// suspend or uninstall (the close code says it, and nothing reaches a
/// suspended app).
pub struct InstallationChanged;
impl Notification for InstallationChanged {
    const NAME: &'static str = "app/installation/changed";
    const DIRECTION: Direction = Direction::FromHub;
    const AUDIENCE: Caller = Caller::App;
    const SUMMARY: &'static str = "The app's installation was installed, resumed, upgraded or had its scopes set; payload: {installationId, state, scopes: {requested, granted, effective}}.";
    const EPHEMERAL: bool = false;
    type Params = Envelope<InstallationChangedPayload>;
}
