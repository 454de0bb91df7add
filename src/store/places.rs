//! Places and who reaches them (ADR 0020 §2, §5): spaces, channels (rows
//! of `conversations` of kind `channel`), groups and their members, grants,
//! and the levels the grants give. The queries that resolve grants through
//! groups are in [`super::place_levels`].

use std::collections::HashMap;

use async_trait::async_trait;
use uuid::Uuid;

pub use super::app_grants::{actor_of, APP_NOT_INSTALLED};
use super::installations::InstallationDialect;
use super::sql::{is_unique_violation, parsed, Arg, Database, Executor, Keyset, Row};
use super::{app_grants, place_levels};
use super::{StoreError, StoreResult};
use crate::domain::authz::level::{GrantPlace, Holder};
use crate::domain::authz::{ChannelState, Level};
use crate::domain::{Millis, PrincipalKind};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewSpace {
    pub id: Uuid,
    pub name: String,
    pub created_at: Millis,
}

/// A space as stored: a named set of channels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpaceRecord {
    pub id: Uuid,
    pub name: String,
    pub created_at: Millis,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewGroup {
    pub id: Uuid,
    pub name: String,
    pub created_at: Millis,
}

/// A grant to write; its `id` is kept only when no grant of the same
/// subject on the same place exists (otherwise that one is replaced).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewGrant {
    pub id: Uuid,
    pub subject: Holder,
    pub place: GrantPlace,
    pub level: Level,
    /// `None`: the operator.
    pub granted_by: Option<Uuid>,
    pub created_at: Millis,
}

/// A `grants` row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantRecord {
    pub id: Uuid,
    pub subject: Holder,
    pub place: GrantPlace,
    pub level: Level,
    pub granted_by: Option<Uuid>,
    pub created_at: Millis,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewChannel {
    pub id: Uuid,
    pub space_id: Uuid,
    pub name: String,
    pub created_by: Uuid,
    pub created_at: Millis,
}

/// A channel: its conversation row's columns that concern a place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelRecord {
    pub id: Uuid,
    pub space_id: Uuid,
    pub name: String,
    pub state: ChannelState,
    pub created_by: Uuid,
    pub created_at: Millis,
    pub last_message_seq: i64,
}

/// What a principal's grants give it on a space: on the space itself, and
/// (kept apart, for `space.read` only) on the space's channels. Both
/// folded (highest, capped by kind); `None`: no grant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpaceLevels {
    pub space: Option<Level>,
    pub channels: Option<Level>,
}

/// The readers of a channel: each principal a grant reaches, with its kind
/// and effective level.
pub type ChannelLevels = HashMap<Uuid, (PrincipalKind, Level)>;

#[async_trait]
pub trait PlaceStore: Send + Sync + 'static {
    /// `Conflict` when a space of that name exists.
    async fn create_space(&self, space: &NewSpace) -> StoreResult<SpaceRecord>;

    async fn space(&self, id: Uuid) -> StoreResult<Option<SpaceRecord>>;

    /// `Conflict` when a group of that name exists.
    async fn create_group(&self, group: &NewGroup) -> StoreResult<()>;

    /// Idempotent; `NotFound` for an unknown group or principal.
    async fn add_member(&self, group: Uuid, principal: Uuid, now: Millis) -> StoreResult<()>;

    /// Idempotent; `NotFound` for an unknown group or principal.
    async fn remove_member(&self, group: Uuid, principal: Uuid) -> StoreResult<()>;

    /// Grants, or replaces the level of the grant the subject holds on the
    /// place; `NotFound` when the subject or the place does not exist,
    /// `Conflict` [`APP_NOT_INSTALLED`] for an app without a live
    /// installation. A grant to an app is audited (`grant.manage`, the
    /// actor [`actor_of`] `granted_by`) in the same transaction.
    async fn put_grant(&self, grant: &NewGrant) -> StoreResult<GrantRecord>;

    async fn grant(&self, id: Uuid) -> StoreResult<Option<GrantRecord>>;

    /// `NotFound` for an unknown id. `by` as [`NewGrant::granted_by`]
    /// (`None`: the operator): who the audit row of an app's grant names.
    async fn delete_grant(&self, id: Uuid, by: Option<Uuid>, now: Millis) -> StoreResult<()>;

    /// The grants on one place, by id.
    async fn grants_of_place(&self, place: GrantPlace) -> StoreResult<Vec<GrantRecord>>;

    /// An open channel in a space; `NotFound` for an unknown space,
    /// `Conflict` for a name the space has already.
    async fn create_channel(&self, channel: &NewChannel) -> StoreResult<ChannelRecord>;

    /// A conversation of kind `channel`; any other is `None`.
    async fn channel(&self, id: Uuid) -> StoreResult<Option<ChannelRecord>>;

    /// Renames and/or changes state; `NotFound` for no such channel,
    /// `Conflict` for a name the space has already.
    async fn set_channel(
        &self,
        id: Uuid,
        name: Option<&str>,
        state: Option<ChannelState>,
    ) -> StoreResult<ChannelRecord>;

    /// Channels on which `principal` holds a grant, on the channel or its
    /// space, directly or through a group, by id after `after`. An index:
    /// the decision judges each row. A disabled principal sees none.
    async fn channels_visible_to(
        &self,
        principal: Uuid,
        space: Option<Uuid>,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<ChannelRecord>>;

    async fn space_levels(&self, principal: Uuid, space: Uuid) -> StoreResult<SpaceLevels>;

    /// Every active principal reached by a grant on the channel or on
    /// `space` (the channel's).
    async fn channel_levels(&self, channel: Uuid, space: Uuid) -> StoreResult<ChannelLevels>;

    /// A counter every write that changes rights (grants, group members,
    /// channel name or state) bumps in its own transaction, so a hub learns
    /// of changes another process made (ADR 0020 §3); 0 before the first.
    async fn rights_version(&self) -> StoreResult<i64>;
}

const SPACE_COLUMNS: &str = "id, name, created_at";
const GRANT_COLUMNS: &str =
    "id, subject_kind, subject_id, place_kind, place_id, level, granted_by, created_at";
const CHANNEL_COLUMNS: &str = "id, space_id, name, state, created_by, created_at, last_message_seq";

fn space_row(r: &Row) -> StoreResult<SpaceRecord> {
    Ok(SpaceRecord {
        id: r.id("id")?,
        name: r.text("name")?,
        created_at: r.int("created_at")?,
    })
}

pub(super) fn channel_row(r: &Row) -> StoreResult<ChannelRecord> {
    Ok(ChannelRecord {
        id: r.id("id")?,
        space_id: r.id("space_id")?,
        name: r.text("name")?,
        state: parsed(r.text("state")?, "channel state", ChannelState::parse)?,
        created_by: r.id("created_by")?,
        created_at: r.int("created_at")?,
        last_message_seq: r.int("last_message_seq")?,
    })
}

fn holder_parts(h: Holder) -> (&'static str, Uuid) {
    match h {
        Holder::Principal(id) => ("principal", id),
        Holder::Group(id) => ("group", id),
    }
}

fn place_parts(p: GrantPlace) -> (&'static str, Uuid) {
    match p {
        GrantPlace::Space(id) => ("space", id),
        GrantPlace::Channel(id) => ("channel", id),
    }
}

pub(super) fn level_of(r: &Row) -> StoreResult<Level> {
    parsed(r.text("level")?, "grant level", Level::parse)
}

fn grant_row(r: &Row) -> StoreResult<GrantRecord> {
    let subject_id = r.id("subject_id")?;
    let subject = match r.text("subject_kind")?.as_str() {
        "principal" => Holder::Principal(subject_id),
        "group" => Holder::Group(subject_id),
        other => return Err(StoreError::Corrupt(format!("bad grant subject {other:?}"))),
    };
    let place_id = r.id("place_id")?;
    let place = match r.text("place_kind")?.as_str() {
        "space" => GrantPlace::Space(place_id),
        "channel" => GrantPlace::Channel(place_id),
        other => return Err(StoreError::Corrupt(format!("bad grant place {other:?}"))),
    };
    Ok(GrantRecord {
        id: r.id("id")?,
        subject,
        place,
        level: level_of(r)?,
        granted_by: r.opt_id("granted_by")?,
        created_at: r.int("created_at")?,
    })
}

/// A unique violation is the named conflict; anything else passes.
fn conflict_on_unique<T>(result: StoreResult<T>, what: &str) -> StoreResult<T> {
    match result {
        Err(e) if is_unique_violation(&e) => Err(StoreError::Conflict(what.into())),
        other => other,
    }
}

/// A row of a table keyed by id with a unique name (spaces, groups).
async fn insert_named<D: Database + ?Sized>(
    db: &D,
    sql: &str,
    id: Uuid,
    name: &str,
    created_at: Millis,
) -> StoreResult<()> {
    let args = [Arg::Id(id), Arg::Text(name), Arg::Int(created_at)];
    db.write().await?.execute(sql, &args).await?;
    Ok(())
}

/// True when `sql` (one `$1` id) finds a row.
async fn exists(ex: &mut dyn Executor, sql: &str, id: Uuid) -> StoreResult<bool> {
    Ok(ex.fetch_optional(sql, &[Arg::Id(id)]).await?.is_some())
}

/// An active principal: a disabled one answers as a missing one, so a
/// grant or a membership cannot tell them apart.
async fn check_principal(ex: &mut dyn Executor, id: Uuid) -> StoreResult<()> {
    let found = exists(
        ex,
        "SELECT 1 AS one FROM principals WHERE id = $1 AND disabled_at IS NULL",
        id,
    )
    .await?;
    found.then_some(()).ok_or(StoreError::NotFound)
}

async fn check_group(ex: &mut dyn Executor, id: Uuid) -> StoreResult<()> {
    let found = exists(ex, "SELECT 1 AS one FROM groups WHERE id = $1", id).await?;
    found.then_some(()).ok_or(StoreError::NotFound)
}

async fn check_space(ex: &mut dyn Executor, id: Uuid) -> StoreResult<()> {
    let found = exists(ex, "SELECT 1 AS one FROM spaces WHERE id = $1", id).await?;
    found.then_some(()).ok_or(StoreError::NotFound)
}

async fn check_channel(ex: &mut dyn Executor, id: Uuid) -> StoreResult<()> {
    let sql = "SELECT 1 AS one FROM conversations WHERE id = $1 AND kind = 'channel'";
    exists(ex, sql, id)
        .await?
        .then_some(())
        .ok_or(StoreError::NotFound)
}

/// The polymorphic ends of a grant, which no foreign key can check.
async fn check_grant_ends(ex: &mut dyn Executor, g: &NewGrant) -> StoreResult<()> {
    match g.subject {
        Holder::Principal(id) => check_principal(ex, id).await?,
        Holder::Group(id) => check_group(ex, id).await?,
    }
    match g.place {
        GrantPlace::Space(id) => check_space(ex, id).await,
        GrantPlace::Channel(id) => check_channel(ex, id).await,
    }
}

async fn upsert_grant(ex: &mut dyn Executor, g: &NewGrant) -> StoreResult<GrantRecord> {
    let (subject_kind, subject_id) = holder_parts(g.subject);
    let (place_kind, place_id) = place_parts(g.place);
    let sql = format!(
        "INSERT INTO grants ({GRANT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
         ON CONFLICT (place_kind, place_id, subject_kind, subject_id) DO UPDATE SET \
         level = excluded.level, granted_by = excluded.granted_by, created_at = excluded.created_at \
         RETURNING {GRANT_COLUMNS}"
    );
    let row = ex
        .fetch_optional(
            &sql,
            &[
                Arg::Id(g.id),
                Arg::Text(subject_kind),
                Arg::Id(subject_id),
                Arg::Text(place_kind),
                Arg::Id(place_id),
                Arg::Text(g.level.as_str()),
                Arg::OptId(g.granted_by),
                Arg::Int(g.created_at),
            ],
        )
        .await?
        .ok_or_else(|| StoreError::Corrupt("grant upsert returned no row".into()))?;
    grant_row(&row)
}

async fn insert_channel_row(ex: &mut dyn Executor, c: &NewChannel) -> StoreResult<()> {
    let inserted = ex
        .execute(
            "INSERT INTO conversations (id, kind, name, space_id, state, created_by, created_at) \
             VALUES ($1, 'channel', $2, $3, 'open', $4, $5)",
            &[
                Arg::Id(c.id),
                Arg::Text(&c.name),
                Arg::Id(c.space_id),
                Arg::Id(c.created_by),
                Arg::Int(c.created_at),
            ],
        )
        .await;
    conflict_on_unique(inserted, "the space has a channel of this name").map(|_| ())
}

async fn load_channel(ex: &mut dyn Executor, id: Uuid) -> StoreResult<Option<ChannelRecord>> {
    let sql =
        format!("SELECT {CHANNEL_COLUMNS} FROM conversations WHERE id = $1 AND kind = 'channel'");
    ex.fetch_optional(&sql, &[Arg::Id(id)])
        .await?
        .map(|r| channel_row(&r))
        .transpose()
}

/// Bumps `rights_version` in the caller's transaction, which must be the
/// one that changes the rights, so the bump and the change commit together.
pub(super) async fn bump_rights_version(ex: &mut dyn Executor) -> StoreResult<()> {
    ex.execute(
        "INSERT INTO hub_meta (name, value) VALUES ('rights_version', '1') \
         ON CONFLICT (name) DO UPDATE \
         SET value = CAST(CAST(hub_meta.value AS BIGINT) + 1 AS TEXT)",
        &[],
    )
    .await?;
    Ok(())
}

#[async_trait]
impl<D: Database + Keyset + InstallationDialect> PlaceStore for D {
    async fn create_space(&self, space: &NewSpace) -> StoreResult<SpaceRecord> {
        let sql = "INSERT INTO spaces (id, name, created_at) VALUES ($1, $2, $3)";
        let inserted = insert_named(self, sql, space.id, &space.name, space.created_at).await;
        conflict_on_unique(inserted, "a space of this name exists")?;
        Ok(SpaceRecord {
            id: space.id,
            name: space.name.clone(),
            created_at: space.created_at,
        })
    }

    async fn space(&self, id: Uuid) -> StoreResult<Option<SpaceRecord>> {
        let sql = format!("SELECT {SPACE_COLUMNS} FROM spaces WHERE id = $1");
        self.read()
            .await?
            .fetch_optional(&sql, &[Arg::Id(id)])
            .await?
            .map(|r| space_row(&r))
            .transpose()
    }

    async fn create_group(&self, group: &NewGroup) -> StoreResult<()> {
        let sql = "INSERT INTO groups (id, name, created_at) VALUES ($1, $2, $3)";
        let inserted = insert_named(self, sql, group.id, &group.name, group.created_at).await;
        conflict_on_unique(inserted, "a group of this name exists")
    }

    async fn add_member(&self, group: Uuid, principal: Uuid, now: Millis) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        check_group(&mut *tx, group).await?;
        check_principal(&mut *tx, principal).await?;
        tx.execute(
            "INSERT INTO group_members (group_id, principal_id, added_at) VALUES ($1, $2, $3) \
             ON CONFLICT (group_id, principal_id) DO NOTHING",
            &[Arg::Id(group), Arg::Id(principal), Arg::Int(now)],
        )
        .await?;
        bump_rights_version(&mut *tx).await?;
        tx.commit().await
    }

    async fn remove_member(&self, group: Uuid, principal: Uuid) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        check_group(&mut *tx, group).await?;
        // Any principal, disabled too: removing one is always allowed.
        if !exists(
            &mut *tx,
            "SELECT 1 AS one FROM principals WHERE id = $1",
            principal,
        )
        .await?
        {
            return Err(StoreError::NotFound);
        }
        tx.execute(
            "DELETE FROM group_members WHERE group_id = $1 AND principal_id = $2",
            &[Arg::Id(group), Arg::Id(principal)],
        )
        .await?;
        bump_rights_version(&mut *tx).await?;
        tx.commit().await
    }

    async fn put_grant(&self, grant: &NewGrant) -> StoreResult<GrantRecord> {
        let app = app_grants::app_subject(&mut *self.read().await?, grant.subject).await?;
        let mut tx = self.begin().await?;
        let installation = match app {
            Some(app_id) => Some(app_grants::hold_installation::<D>(&mut *tx, app_id).await?),
            None => None,
        };
        check_grant_ends(&mut *tx, grant).await?;
        let stored = upsert_grant(&mut *tx, grant).await?;
        if let Some(installation) = &installation {
            let actor = app_grants::actor_of(grant.granted_by);
            app_grants::record_put(&mut *tx, actor, installation, grant.created_at).await?;
        }
        bump_rights_version(&mut *tx).await?;
        tx.commit().await?;
        Ok(stored)
    }

    async fn grant(&self, id: Uuid) -> StoreResult<Option<GrantRecord>> {
        let sql = format!("SELECT {GRANT_COLUMNS} FROM grants WHERE id = $1");
        self.read()
            .await?
            .fetch_optional(&sql, &[Arg::Id(id)])
            .await?
            .map(|r| grant_row(&r))
            .transpose()
    }

    async fn delete_grant(&self, id: Uuid, by: Option<Uuid>, now: Millis) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        let deleted = tx
            .fetch_optional(
                "DELETE FROM grants WHERE id = $1 RETURNING subject_kind, subject_id",
                &[Arg::Id(id)],
            )
            .await?
            .ok_or(StoreError::NotFound)?;
        let (kind, subject) = (deleted.text("subject_kind")?, deleted.id("subject_id")?);
        let actor = app_grants::actor_of(by);
        app_grants::record_delete(&mut *tx, actor, &kind, subject, now).await?;
        bump_rights_version(&mut *tx).await?;
        tx.commit().await
    }

    async fn grants_of_place(&self, place: GrantPlace) -> StoreResult<Vec<GrantRecord>> {
        let (kind, id) = place_parts(place);
        let sql = format!(
            "SELECT {GRANT_COLUMNS} FROM grants WHERE place_kind = $1 AND place_id = $2 ORDER BY id"
        );
        let rows = self
            .read()
            .await?
            .fetch_all(&sql, &[Arg::Text(kind), Arg::Id(id)])
            .await?;
        rows.iter().map(grant_row).collect()
    }

    async fn create_channel(&self, channel: &NewChannel) -> StoreResult<ChannelRecord> {
        let mut tx = self.begin().await?;
        check_space(&mut *tx, channel.space_id).await?;
        insert_channel_row(&mut *tx, channel).await?;
        let stored = load_channel(&mut *tx, channel.id).await?;
        tx.commit().await?;
        stored.ok_or_else(|| StoreError::Corrupt("inserted channel not found".into()))
    }

    async fn channel(&self, id: Uuid) -> StoreResult<Option<ChannelRecord>> {
        load_channel(&mut *self.read().await?, id).await
    }

    async fn set_channel(
        &self,
        id: Uuid,
        name: Option<&str>,
        state: Option<ChannelState>,
    ) -> StoreResult<ChannelRecord> {
        let sql = format!(
            "UPDATE conversations SET name = COALESCE($2, name), state = COALESCE($3, state) \
             WHERE id = $1 AND kind = 'channel' RETURNING {CHANNEL_COLUMNS}"
        );
        let mut tx = self.begin().await?;
        let updated = tx
            .fetch_optional(
                &sql,
                &[
                    Arg::Id(id),
                    Arg::OptText(name),
                    Arg::OptText(state.map(ChannelState::as_str)),
                ],
            )
            .await;
        let stored = conflict_on_unique(updated, "the space has a channel of this name")?
            .map(|r| channel_row(&r))
            .transpose()?
            .ok_or(StoreError::NotFound)?;
        bump_rights_version(&mut *tx).await?;
        tx.commit().await?;
        Ok(stored)
    }

    async fn channels_visible_to(
        &self,
        principal: Uuid,
        space: Option<Uuid>,
        after: Option<Uuid>,
        limit: u32,
    ) -> StoreResult<Vec<ChannelRecord>> {
        let sql = place_levels::visible_channels_sql(&D::after("c.id", 3));
        let rows = self
            .read()
            .await?
            .fetch_all(
                &sql,
                &[
                    Arg::Id(principal),
                    Arg::OptId(space),
                    Arg::OptId(after),
                    Arg::Int(i64::from(limit)),
                ],
            )
            .await?;
        rows.iter().map(channel_row).collect()
    }

    async fn space_levels(&self, principal: Uuid, space: Uuid) -> StoreResult<SpaceLevels> {
        place_levels::space_levels(&mut *self.read().await?, principal, space).await
    }

    async fn channel_levels(&self, channel: Uuid, space: Uuid) -> StoreResult<ChannelLevels> {
        place_levels::channel_levels(&mut *self.read().await?, channel, space).await
    }

    async fn rights_version(&self) -> StoreResult<i64> {
        let sql = "SELECT value FROM hub_meta WHERE name = 'rights_version'";
        let Some(row) = self.read().await?.fetch_optional(sql, &[]).await? else {
            return Ok(0);
        };
        let value = row.text("value")?;
        value
            .parse()
            .map_err(|_| StoreError::Corrupt("rights_version is not an integer".into()))
    }
}
