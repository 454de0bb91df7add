//! Levels and the effective level of a subject on a place (ADR 0020 §2).
//!
//! Grants are stored for spaces and channels only; every other conversation
//! derives its levels from membership, so nothing here reads a grant for a
//! direct, group or task conversation.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::resource::{Place, PlaceKind};
use crate::domain::PrincipalKind;

/// Ordered so that "at least" is `>=`: `read < write < trigger < admin`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Read,
    Write,
    Trigger,
    Admin,
}

impl Level {
    pub const ALL: [Level; 4] = [Level::Read, Level::Write, Level::Trigger, Level::Admin];

    /// The text stored in `grants.level` (its CHECK lists these four).
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Read => "read",
            Level::Write => "write",
            Level::Trigger => "trigger",
            Level::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Option<Level> {
        Level::ALL.into_iter().find(|l| l.as_str() == s)
    }
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The highest level an app may hold: apps act for their users through
/// tasks and messages, never as channel admins or command triggers.
pub const APP_CAP: Level = Level::Write;

/// What membership alone gives in a direct, group or task conversation.
pub const DERIVED: Level = Level::Write;

/// Who holds a grant row: one principal, or every member of a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Holder {
    Principal(Uuid),
    Group(Uuid),
}

/// Where a grant row applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GrantPlace {
    Space(Uuid),
    Channel(Uuid),
}

/// One `grants` row as the store holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    pub holder: Holder,
    pub on: GrantPlace,
    pub level: Level,
}

/// A principal and the groups it belongs to: what a grant row must name to
/// reach it.
#[derive(Clone, Copy, Debug)]
pub struct Holding<'a> {
    pub principal: Uuid,
    pub groups: &'a [Uuid],
}

impl Holding<'_> {
    fn holds(&self, holder: Holder) -> bool {
        match holder {
            Holder::Principal(id) => id == self.principal,
            Holder::Group(id) => self.groups.contains(&id),
        }
    }
}

/// The levels of the grants reaching `who` on a channel: those on the
/// channel and those on its space, direct or through a group.
pub fn reaching_channel(grants: &[Grant], who: Holding, channel: Uuid, space: Uuid) -> Vec<Level> {
    reaching(grants, who, |on| {
        on == GrantPlace::Channel(channel) || on == GrantPlace::Space(space)
    })
}

/// The levels of the grants reaching `who` on a space itself. A channel
/// grant is no right on its space (except for `space.read`, which the
/// loader gathers with the channels' grants).
pub fn reaching_space(grants: &[Grant], who: Holding, space: Uuid) -> Vec<Level> {
    reaching(grants, who, |on| on == GrantPlace::Space(space))
}

fn reaching(grants: &[Grant], who: Holding, on: impl Fn(GrantPlace) -> bool) -> Vec<Level> {
    grants
        .iter()
        .filter(|g| who.holds(g.holder) && on(g.on))
        .map(|g| g.level)
        .collect()
}

/// The highest of the grants, capped for apps. `None`: no grant at all,
/// which is no read.
pub fn effective(kind: PrincipalKind, grants: &[Level]) -> Option<Level> {
    let highest = grants.iter().copied().max()?;
    Some(cap(kind, highest))
}

/// Apps never hold more than [`APP_CAP`]; a group grant reaching an app is
/// capped here rather than refused (ADR 0020 §2).
pub fn cap(kind: PrincipalKind, level: Level) -> Level {
    match kind {
        PrincipalKind::App => level.min(APP_CAP),
        PrincipalKind::Agent | PrincipalKind::Person => level,
    }
}

/// The level membership gives `subject` in a conversation that has no
/// grants: write for the participants of a direct or group conversation,
/// for a task's participants and for the task's app; nobody else anything.
/// Channels derive nothing: their levels are their grants.
pub fn derived(place: &Place, subject: Uuid) -> Option<Level> {
    let member = place.participants.contains(&subject);
    let reaches = match place.kind {
        PlaceKind::Direct | PlaceKind::Group => member,
        PlaceKind::Task { app_id } => member || app_id == subject,
        PlaceKind::Channel { .. } => false,
    };
    reaches.then_some(DERIVED)
}

/// The effective level on a conversation: grants (already filtered to the
/// subject by [`reaching_channel`] or the loader's query) for channels,
/// membership for the rest.
pub fn on_place(
    place: &Place,
    subject: Uuid,
    kind: PrincipalKind,
    grants: &[Level],
) -> Option<Level> {
    match place.kind {
        PlaceKind::Channel { .. } => effective(kind, grants),
        PlaceKind::Direct | PlaceKind::Group | PlaceKind::Task { .. } => derived(place, subject),
    }
}

/// Folds the rows of the store's `channel_levels` query (one per grant
/// reaching a principal, groups already resolved) into each principal's
/// kind and effective level: the readers of a channel and what they hold.
pub fn fold<I>(rows: I) -> HashMap<Uuid, (PrincipalKind, Level)>
where
    I: IntoIterator<Item = (Uuid, PrincipalKind, Level)>,
{
    let mut out: HashMap<Uuid, (PrincipalKind, Level)> = HashMap::new();
    for (id, kind, level) in rows {
        let level = cap(kind, level);
        out.entry(id)
            .and_modify(|held| held.1 = held.1.max(level))
            .or_insert((kind, level));
    }
    out
}
