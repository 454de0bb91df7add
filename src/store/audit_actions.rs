//! The audit of owner actions on apps (ADR 0023 §5): one `audit_actions`
//! row per install, set scopes, suspend, resume, uninstall, upgrade and app
//! grant change, written in the action's own transaction. Every column is a
//! closed enum, an id, a scope set or a time: no manifest, key or URL can
//! reach the table.

use uuid::Uuid;

use super::installations::InstallationRecord;
use super::sql::{parsed, Arg, Executor, Keyset, Row};
use super::{StoreError, StoreResult};
use crate::domain::installation::{Actor, InstallationState, LifecycleAction, ScopeSet};
use crate::domain::Millis;

/// An owner action to record: the installation row before and after it
/// (either absent where there is none, as for an upgrade of a pending app).
#[derive(Clone, Debug)]
pub(crate) struct NewAction<'a> {
    pub actor: Actor,
    pub action: LifecycleAction,
    pub app_id: Uuid,
    pub before: Option<&'a InstallationRecord>,
    pub after: Option<&'a InstallationRecord>,
    pub at: Millis,
    /// What the action did beyond the row (ADR 0027 §2: the commands added,
    /// changed and removed, by name; §7: the components disabled); `None`
    /// for the other actions.
    pub details: Option<ActionDetails>,
}

/// The `details` of an owner action: names and counts only.
#[derive(
    Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct ActionDetails {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands_added: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands_changed: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands_removed: Vec<String>,
    /// How many components of the app's cards a suspend or uninstall
    /// disabled (ADR 0027 §7); absent when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub components_disabled: u32,
    /// The webhook subscription a `webhook.disable` or `webhook.retry`
    /// acted on (its id only: never its URL or secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_id: Option<Uuid>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// An `audit_actions` row: who did what to which app, with the granted
/// scopes and the state before and after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionRecord {
    /// UUIDv7: pages go by it.
    pub id: Uuid,
    pub actor: Actor,
    pub action: LifecycleAction,
    pub app_id: Uuid,
    pub scopes_before: Option<ScopeSet>,
    pub scopes_after: Option<ScopeSet>,
    pub state_before: Option<InstallationState>,
    pub state_after: Option<InstallationState>,
    pub at: Millis,
    pub details: Option<ActionDetails>,
}

/// Which records a page holds; `None` filters nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ActionFilter {
    pub app: Option<Uuid>,
}

const COLUMNS: &str = "id, actor_kind, actor_id, action, app_id, scopes_before, scopes_after, \
     state_before, state_after, at, details";

impl<'a> NewAction<'a> {
    /// The action of one row moving from `before` to `after`, at the
    /// time `after` was written.
    pub fn of(
        actor: Actor,
        action: LifecycleAction,
        before: Option<&'a InstallationRecord>,
        after: &'a InstallationRecord,
    ) -> NewAction<'a> {
        NewAction {
            actor,
            action,
            app_id: after.app_id,
            before,
            after: Some(after),
            at: after.updated_at,
            details: None,
        }
    }

    /// The same action with its `details`.
    pub fn with_details(mut self, details: ActionDetails) -> NewAction<'a> {
        self.details = Some(details);
        self
    }

    /// Writes the row in the caller's transaction: the action's own.
    pub async fn record(&self, ex: &mut dyn Executor) -> StoreResult<()> {
        let scopes = |r: Option<&InstallationRecord>| r.map(|r| r.granted.to_stored());
        let (before, after) = (scopes(self.before), scopes(self.after));
        // An action that changed nothing beyond the row records none.
        let details = self
            .details
            .as_ref()
            .filter(|d| **d != ActionDetails::default())
            .map(super::sql::to_json)
            .transpose()?;
        ex.execute(
            &format!("INSERT INTO audit_actions ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"),
            &[
                Arg::Id(Uuid::now_v7()),
                Arg::Text(self.actor.kind_str()),
                Arg::OptId(self.actor.id()),
                Arg::Text(self.action.as_str()),
                Arg::Id(self.app_id),
                Arg::OptText(before.as_deref()),
                Arg::OptText(after.as_deref()),
                Arg::OptText(self.before.map(|r| r.state.as_str())),
                Arg::OptText(self.after.map(|r| r.state.as_str())),
                Arg::Int(self.at),
                Arg::OptText(details.as_deref()),
            ],
        )
        .await?;
        Ok(())
    }
}

fn opt_scopes(r: &Row, col: &str) -> StoreResult<Option<ScopeSet>> {
    r.opt_text(col)?
        .map(|s| ScopeSet::from_stored(&s).map_err(|e| StoreError::Corrupt(e.to_string())))
        .transpose()
}

fn opt_state(r: &Row, col: &str) -> StoreResult<Option<InstallationState>> {
    r.opt_text(col)?
        .map(|s| parsed(s, "installation state", InstallationState::parse))
        .transpose()
}

fn action_row(r: &Row) -> StoreResult<ActionRecord> {
    let kind = r.text("actor_kind")?;
    let actor = Actor::from_stored(&kind, r.opt_id("actor_id")?)
        .ok_or_else(|| StoreError::Corrupt(format!("bad actor kind {kind:?}")))?;
    Ok(ActionRecord {
        id: r.id("id")?,
        actor,
        action: parsed(r.text("action")?, "action", LifecycleAction::parse)?,
        app_id: r.id("app_id")?,
        scopes_before: opt_scopes(r, "scopes_before")?,
        scopes_after: opt_scopes(r, "scopes_after")?,
        state_before: opt_state(r, "state_before")?,
        state_after: opt_state(r, "state_after")?,
        at: r.int("at")?,
        details: r
            .opt_text("details")?
            .map(|d| serde_json::from_str(&d).map_err(super::sql::json_err))
            .transpose()?,
    })
}

pub(super) async fn page<D: Keyset>(
    ex: &mut dyn Executor,
    filter: ActionFilter,
    after: Option<Uuid>,
    limit: u32,
) -> StoreResult<Vec<ActionRecord>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM audit_actions WHERE {} AND ($2 IS NULL OR app_id = $2) \
         ORDER BY id LIMIT $3",
        D::after("id", 1)
    );
    let rows = ex
        .fetch_all(
            &sql,
            &[
                Arg::OptId(after),
                Arg::OptId(filter.app),
                Arg::Int(i64::from(limit)),
            ],
        )
        .await?;
    rows.iter().map(action_row).collect()
}

pub(super) async fn prune(ex: &mut dyn Executor, before: Millis) -> StoreResult<u64> {
    ex.execute(
        "DELETE FROM audit_actions WHERE at < $1",
        &[Arg::Int(before)],
    )
    .await
}
