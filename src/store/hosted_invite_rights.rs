//! What a redemption decides about its link's maker and the apps it
//! involves, inside the joining transaction (ADR 0031, 2026-12-02 third
//! pass). A link lends its maker's right to the room, so that right is
//! decided here, under rows any change of it must take, not by a check the
//! handler ran before the transaction:
//! - the installation rows a redemption needs are held, each once and all
//!   in id order (the maker's; a task room's app's, since a suspended or
//!   uninstalled task app takes no new participant; a redeemer app's on a
//!   channel, exclusively, as `put_grant` holds it), so two redemptions
//!   involving the same apps never wait on each other in a cycle;
//! - in a task room, the maker writes as the task's app or as one of the
//!   room's participants, read with the room's row held;
//! - on a channel, the maker's installation (held) has `messages:write`,
//!   the channel (its row held) is open, and the maker's level, read after
//!   the redemption bumped the rights version, is `write`: every grant,
//!   group or channel change bumps that row in its own transaction, so a
//!   revocation either committed before the read or waits for this commit.

use uuid::Uuid;

use super::app_grants;
use super::installations::{shared, InstallationDialect};
use super::place_levels::principal_channel_level;
use super::sql::{Arg, Executor};
use super::{InstallationRecord, StoreError, StoreResult};
use crate::domain::authz::installation_refusal;
use crate::domain::authz::{ChannelState, Level};
use crate::domain::installation::{InstallationState, Scope};

/// How an installation row is held until the redemption commits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Lock {
    /// Held against a change (a suspend, an uninstall, new scopes) without
    /// queueing redemptions of one app on each other.
    Shared,
    /// Locked as `put_grant` locks a grant's app subject.
    Exclusive,
}

/// One installation row a redemption needs: its app, how it is held, and
/// whether the row must be active (a live one is enough otherwise).
#[derive(Clone, Copy, Debug)]
pub(super) struct Need {
    pub app: Uuid,
    pub lock: Lock,
    pub active: bool,
}

/// The rows held, one per app.
pub(super) struct Held(Vec<InstallationRecord>);

impl Held {
    pub(super) fn of(&self, app: Uuid) -> Option<&InstallationRecord> {
        self.0.iter().find(|i| i.app_id == app)
    }
}

/// One need per app (the strongest lock and requirement asked for it),
/// sorted by app id: the order every redemption takes the rows in. A row
/// taken shared and then exclusively by one transaction would deadlock two
/// such transactions on PostgreSQL, so each row is taken once.
fn merged(needs: &[Need]) -> Vec<Need> {
    let mut out: Vec<Need> = Vec::with_capacity(needs.len());
    for n in needs {
        match out.iter_mut().find(|o| o.app == n.app) {
            Some(o) => {
                o.lock = o.lock.max(n.lock);
                o.active |= n.active;
            }
            None => out.push(*n),
        }
    }
    out.sort_by_key(|n| n.app);
    out
}

/// Holds every needed row, or `None` (nothing more to do but roll back)
/// when one has no live row or is not active where that is needed.
pub(super) async fn hold<D: InstallationDialect>(
    ex: &mut dyn Executor,
    needs: &[Need],
) -> StoreResult<Option<Held>> {
    let mut held = Vec::new();
    for n in merged(needs) {
        let row = match n.lock {
            Lock::Shared => {
                shared::<D>(ex, "app_id = $1 AND state <> 'uninstalled'", Arg::Id(n.app)).await?
            }
            Lock::Exclusive => match app_grants::hold_installation::<D>(ex, n.app).await {
                Ok(row) => Some(row),
                Err(StoreError::Conflict(_)) => None,
                Err(e) => return Err(e),
            },
        };
        match row {
            Some(row) if !n.active || row.state == InstallationState::Active => held.push(row),
            _ => return Ok(None),
        }
    }
    Ok(Some(Held(held)))
}

/// An existing, active principal of one of `kinds`.
pub(super) async fn principal_is(
    ex: &mut dyn Executor,
    id: Uuid,
    kinds: &[&str],
) -> StoreResult<bool> {
    let kind = ex
        .fetch_optional(
            "SELECT kind FROM principals WHERE id = $1 AND disabled_at IS NULL",
            &[Arg::Id(id)],
        )
        .await?
        .map(|r| r.text("kind"))
        .transpose()?;
    Ok(kind.is_some_and(|k| kinds.contains(&k.as_str())))
}

/// The maker's `message.create` on a task room, with the room's row held:
/// an active app that is the task's app or a participant of the room (the
/// levels membership derives; a write into a task room needs no scope).
/// Its installation, and the task app's, are held active already.
pub(super) async fn maker_writes_task_room(
    ex: &mut dyn Executor,
    maker: Uuid,
    task_app: Uuid,
    room: Uuid,
) -> StoreResult<bool> {
    if !principal_is(ex, maker, &["app"]).await? {
        return Ok(false);
    }
    if maker == task_app {
        return Ok(true);
    }
    let member = ex
        .fetch_optional(
            "SELECT 1 AS one FROM conversation_participants \
             WHERE conversation_id = $1 AND principal_id = $2",
            &[Arg::Id(room), Arg::Id(maker)],
        )
        .await?;
    Ok(member.is_some())
}

/// Whether a channel in `state` takes a write from an app: an app's level
/// is capped at `write`, below the admin a read-only channel asks for, so
/// only an open channel does.
pub(super) fn open_to_apps(state: ChannelState) -> bool {
    state == ChannelState::Open
}

/// The maker's `message.create` on the channel, its installation held:
/// `messages:write` among its effective scopes, and a level of `write`
/// reaching it (directly, through a group, or on the space; capped for an
/// app). Read after the rights version's row is held (see the module's
/// doc), so it is the level as of this commit.
pub(super) async fn maker_writes_channel(
    ex: &mut dyn Executor,
    maker: &InstallationRecord,
    channel: Uuid,
    space: Uuid,
) -> StoreResult<bool> {
    if installation_refusal(Some(maker.facts()), Some(Scope::MessagesWrite)).is_some() {
        return Ok(false);
    }
    let level = principal_channel_level(ex, maker.app_id, channel, space).await?;
    Ok(level.is_some_and(|l| l >= Level::Write))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn need(app: Uuid, lock: Lock, active: bool) -> Need {
        Need { app, lock, active }
    }

    #[test]
    fn needs_merge_per_app_into_id_order() {
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let got = merged(&[
            need(b, Lock::Exclusive, false),
            need(a, Lock::Shared, true),
            need(b, Lock::Shared, true),
        ]);
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[0].app, got[0].lock, got[0].active),
            (a, Lock::Shared, true)
        );
        assert_eq!(
            (got[1].app, got[1].lock, got[1].active),
            (b, Lock::Exclusive, true),
            "the strongest lock and requirement of one app, its row taken once"
        );
    }

    #[test]
    fn only_an_open_channel_takes_an_apps_write() {
        assert!(open_to_apps(ChannelState::Open));
        assert!(!open_to_apps(ChannelState::ReadOnly));
        assert!(!open_to_apps(ChannelState::Archived));
    }
}
